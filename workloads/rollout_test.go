package workloads_test

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/workloads"
)

// The rollout engine on a real store, with devices' reports written as
// ReportStatus writes them and the module's clock in the test's hands.

// fleet makes n devices labelled line=1, by host ID; md(i) adds labels.
func (e *env) fleet(n int, md func(i int) []string) []string {
	e.t.Helper()
	var ids []string
	for range n {
		ids = append(ids, e.device(e.proj.Name, "", "x86_64", "line", "1").id)
	}
	sort.Strings(ids)
	for i, id := range ids {
		if md != nil {
			e.setMetadata(e.proj.Name, id, append([]string{"line", "1"}, md(i)...)...)
		}
	}
	return ids
}

// report records that host runs revision rev of cam in phase.
func (e *env) report(host string, rev int64, phase string) {
	e.t.Helper()
	if err := e.store.RecordEdgeWorkloadStatus(e.ctx, e.proj.Name, host, 0, []eim.EdgeWorkloadStatus{{Workload: "cam", HostID: host, Revision: rev, Phase: phase}}); err != nil {
		e.t.Fatal(err)
	}
}

// targets are cam's stored targets by host.
func (e *env) targets() map[string]int64 {
	e.t.Helper()
	ts, err := e.store.EdgeWorkloadTargets(e.ctx, e.proj.Name, "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, tg := range ts {
		if tg.Workload == "cam" {
			out[tg.HostID] = tg.Revision
		}
	}
	return out
}

// wantTargets checks cam's targets: want[i] is ids[i]'s (0: none).
func (e *env) wantTargets(what string, ids []string, want ...int64) {
	e.t.Helper()
	got := e.targets()
	for i, id := range ids {
		if got[id] != want[i] {
			g := make([]int64, len(ids))
			for j, id := range ids {
				g[j] = got[id]
			}
			e.t.Fatalf("%s: targets got %v, want %v", what, g, want)
		}
	}
}

func (e *env) rolloutOf() *workloads.RolloutView {
	e.t.Helper()
	var v workloads.RolloutView
	e.want(e.call(e.proj.Name, "GET", "/cam/rollout", nil), 200, "rollout").decode(e.t, &v)
	return &v
}

func camSpec(image string, pol map[string]any) map[string]any {
	s := map[string]any{"deviceSelector": map[string]any{"matchLabels": map[string]string{"line": "1"}},
		"pod": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}}}}
	if pol != nil {
		s["rolloutPolicy"] = pol
	}
	return s
}

// TestRollout: a revision rolled out batch by batch, spread over the
// zones, under a per-zone budget, continued by another instance of the module (a restart), a
// device past its timeout failed and holding its zone's budget, the
// rollout paused at the missed threshold with the reason, rolled back as
// a new rollout, paused, resumed and aborted.
func TestRollout(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		ids := e.fleet(10, func(i int) []string {
			if i < 5 {
				return []string{"zone", "a"}
			}
			return []string{"zone", "b"}
		})
		e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", nil)}), 201, "create")
		e.reconcile(p)
		e.wantTargets("no policy: all at once", ids, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
		e.want(e.call(p, "GET", "/cam/rollout", nil), 404, "rollout without a policy")
		for _, id := range ids {
			e.report(id, 1, eim.PhaseRunning)
		}

		// The policy alone is no new revision; the devices run it already.
		pol := map[string]any{"batches": []any{map[string]any{"limit": 3}, map[string]any{"limit": "50%"}},
			"successThreshold": "100%", "updateTimeout": "10m",
			"disruptionBudget": map[string]any{"groupBy": []string{"zone"}, "maxUnavailable": 1}}
		var v workloads.View
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:1", pol)}), 200, "policy").decode(t, &v)
		if v.Revision != 1 || v.Spec.RolloutPolicy == nil {
			t.Fatalf("policy alone: got revision %d policy %v, want revision 1 with it", v.Revision, v.Spec.RolloutPolicy)
		}
		e.reconcile(p)
		if ro := e.rolloutOf(); ro.State != eim.RolloutDone || ro.ToRevision != 1 {
			t.Fatalf("a policy over a converged fleet: got %s to %d, want DONE to 1", ro.State, ro.ToRevision)
		}

		// Revision 2: batch 1 takes 3 devices spread over the zones (ids
		// 0, 5 and 1); one a zone at a time.
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:2", pol)}), 200, "revise").decode(t, &v)
		if v.Revision != 2 {
			t.Fatalf("revise: got revision %d, want 2", v.Revision)
		}
		e.reconcile(p)
		e.wantTargets("batch 1 under the budget", ids, 2, 1, 1, 1, 1, 2, 1, 1, 1, 1)
		ro := e.rolloutOf()
		if ro.State != eim.RolloutProgressing || ro.FromRevision != 1 || ro.ToRevision != 2 || ro.Batch != 1 || ro.Batches != 3 ||
			!strings.Contains(ro.Reason, "disruption budget: group zone=a has 1 unavailable of at most 1") ||
			ro.CurrentBatch.Total != 3 || ro.CurrentBatch.Updating != 2 || ro.CurrentBatch.Waiting != 1 {
			t.Fatalf("batch 1: got %+v", ro)
		}
		e.reconcile(p)
		e.wantTargets("nothing reported: nothing moves", ids, 2, 1, 1, 1, 1, 2, 1, 1, 1, 1)
		e.report(ids[0], 2, eim.PhaseDeploying)
		e.reconcile(p)
		e.wantTargets("deploying is not done", ids, 2, 1, 1, 1, 1, 2, 1, 1, 1, 1)
		e.report(ids[0], 2, eim.PhaseRunning)
		e.reconcile(p)
		e.wantTargets("the third of batch 1", ids, 2, 2, 1, 1, 1, 2, 1, 1, 1, 1)
		e.report(ids[1], 2, eim.PhaseRunning)
		e.report(ids[5], 2, eim.PhaseRunning)
		e.reconcile(p)
		// Batch 2: 50 % of 10 of the rest, spread: ids 2, 6, 3, 7, 4.
		e.wantTargets("batch 2 starts", ids, 2, 2, 2, 1, 1, 2, 2, 1, 1, 1)
		if ro := e.rolloutOf(); ro.Batch != 2 || ro.CurrentBatch.Total != 5 || ro.Devices.Done != 3 {
			t.Fatalf("batch 2: got %+v", ro)
		}

		// A restart: another instance of the module continues from the
		// stored batch.
		svc2, err := workloads.New(workloads.Options{Store: e.store, FeedStore: e.store, Inventory: e.inv, Key: e.key, Now: e.now})
		if err != nil {
			t.Fatal(err)
		}
		step := func() {
			t.Helper()
			if err := svc2.ReconcileProject(e.ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		e.report(ids[2], 2, eim.PhaseRunning)
		step()
		e.wantTargets("after the restart", ids, 2, 2, 2, 2, 1, 2, 2, 1, 1, 1)

		// ids[6] never runs it: past the timeout it failed, and holds
		// zone b's budget.
		e.report(ids[6], 2, eim.PhaseError)
		e.advance(11 * time.Minute)
		e.report(ids[3], 2, eim.PhaseRunning)
		step()
		e.wantTargets("ids 6 failed", ids, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1)
		e.report(ids[4], 2, eim.PhaseRunning)
		step()
		ro = e.rolloutOf()
		if ro.State != eim.RolloutProgressing || !strings.Contains(ro.Reason, "zone=b has 1 unavailable of at most 1") || !strings.Contains(ro.Reason, ids[6]+" (failed)") {
			t.Fatalf("held by the budget: got %s %q", ro.State, ro.Reason)
		}
		if len(ro.Failed) != 1 || ro.Failed[0].HostID != ids[6] || !strings.Contains(ro.Failed[0].Reason, "Error at revision 2") {
			t.Fatalf("failed devices: got %+v", ro.Failed)
		}
		// No progress for a whole timeout: the batch is judged.
		e.advance(11 * time.Minute)
		step()
		ro = e.rolloutOf()
		if ro.State != eim.RolloutPaused || !strings.Contains(ro.Reason, "batch 2 of 3 missed its success threshold (100%): 3 of 5") ||
			!strings.Contains(ro.Reason, ids[6]) || ro.BatchStarted || ro.Batch != 3 {
			t.Fatalf("missed threshold: got %+v", ro)
		}
		step()
		e.wantTargets("paused: the rest keep revision 1", ids, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1)
		var sv workloads.StatusView
		e.want(e.call(p, "GET", "/cam/status", nil), 200, "status").decode(t, &sv)
		if sv.Rollout == nil || sv.Rollout.State != eim.RolloutPaused || sv.Rollout.ToRevision != 2 || sv.Rollout.Reason != ro.Reason {
			t.Fatalf("status's rollout: got %+v", sv.Rollout)
		}
		// Devices not in a batch run their target: none is out of date.
		if sv.Devices.Running != 9 || sv.Devices.Failed != 1 || sv.Devices.Updating != 0 {
			t.Fatalf("status's devices: got %+v, want 9 running and 1 failed", sv.Devices)
		}

		// Rollback: revision 3 is revision 1's spec, rolled out anew.
		e.want(e.call(p, "POST", "/cam/rollout/rollback", nil), 200, "rollback").decode(t, &v)
		if v.Revision != 3 || v.Spec.Pod.Spec.Containers[0].Image != "reg/cam:1" || v.Spec.RolloutPolicy == nil {
			t.Fatalf("rollback: got revision %d image %s", v.Revision, v.Spec.Pod.Spec.Containers[0].Image)
		}
		step()
		e.wantTargets("rollback's batch 1", ids, 3, 2, 2, 2, 2, 3, 2, 1, 1, 1)
		if ro := e.rolloutOf(); ro.FromRevision != 2 || ro.ToRevision != 3 || ro.State != eim.RolloutProgressing || ro.ID != 3 {
			t.Fatalf("rollback's rollout: got %+v", ro)
		}

		// Pause, resume, abort.
		if ro := e.call(p, "POST", "/cam/rollout/pause", nil); ro.code != 200 || !strings.Contains(string(ro.body), `"PAUSED"`) || !strings.Contains(string(ro.body), `paused by user:admin`) {
			t.Fatalf("pause: got %d %s", ro.code, ro.body)
		}
		e.want(e.call(p, "POST", "/cam/rollout/pause", nil), 409, "pause twice")
		e.want(e.call(p, "POST", "/cam/rollout/pause", `{"force": true}`), 400, "pause with a body")
		e.report(ids[0], 3, eim.PhaseRunning)
		step()
		e.wantTargets("paused: nothing starts", ids, 3, 2, 2, 2, 2, 3, 2, 1, 1, 1)
		e.want(e.call(p, "POST", "/cam/rollout/resume", nil), 200, "resume")
		step()
		e.wantTargets("resumed", ids, 3, 3, 2, 2, 2, 3, 2, 1, 1, 1)
		e.want(e.call(p, "POST", "/cam/rollout/abort", nil), 200, "abort")
		e.report(ids[1], 3, eim.PhaseRunning)
		step()
		e.wantTargets("aborted: devices keep what they have", ids, 3, 3, 2, 2, 2, 3, 2, 1, 1, 1)
		e.want(e.call(p, "POST", "/cam/rollout/resume", nil), 409, "resume an aborted rollout")
		if ro := e.rolloutOf(); ro.State != eim.RolloutAborted {
			t.Fatalf("aborted: got %s", ro.State)
		}
		e.want(e.call(p, "GET", "/nope/rollout", nil), 404, "no workload")
	})
}

// TestRolloutNewDevicesAndOffline: a rollout of a first revision (no
// device has any), a device without a connection counted in the budget,
// and a device joining the selector mid-rollout getting the revision in
// the last batch.
func TestRolloutNewDevicesAndOffline(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		ids := e.fleet(4, nil)
		err := e.store.Update(e.ctx, p, func(tx eim.Tx) error {
			r, err := tx.Get(e.ctx, eim.KindHost, ids[3])
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			h.HostStatus = "No Connection"
			return tx.Update(e.ctx, h)
		})
		if err != nil {
			t.Fatal(err)
		}
		pol := map[string]any{"batches": []any{map[string]any{"limit": "50%"}}, "updateTimeout": "5m",
			"disruptionBudget": map[string]any{"maxUnavailable": 2}}
		e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", pol)}), 201, "create")
		e.reconcile(p)
		// ids 3 is offline: one of two unavailable, so one of batch 1 starts.
		e.wantTargets("first revision, batch 1", ids, 1, 0, 0, 0)
		if ro := e.rolloutOf(); ro.FromRevision != 0 || !strings.Contains(ro.Reason, ids[3]+" (no connection)") {
			t.Fatalf("offline in the budget: got %+v", ro)
		}
		e.report(ids[0], 1, eim.PhaseRunning)
		e.reconcile(p)
		e.wantTargets("batch 1, second", ids, 1, 1, 0, 0)
		late := e.device(p, "", "x86_64", "line", "1").id
		e.reconcile(p)
		if got := e.targets()[late]; got != 0 {
			t.Fatalf("a device joining mid-rollout: got target %d, want none before the last batch", got)
		}
		e.report(ids[1], 1, eim.PhaseRunning)
		e.reconcile(p)
		// The last batch: ids 2, 3 and the late device; 3 offline, so
		// one more may start (the first by host ID).
		got := e.targets()
		if got[ids[2]]+got[late] != 1 || got[ids[3]] != 0 {
			t.Fatalf("last batch: got %v", got)
		}
		if ro := e.rolloutOf(); ro.Batch != 2 || ro.CurrentBatch.Total != 3 {
			t.Fatalf("last batch with the late device: got %+v", ro)
		}

		// Without its policy, the workload goes to every device at once
		// and has no rollout any more.
		var v workloads.View
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:1", nil)}), 200, "policy removed").decode(t, &v)
		if v.Revision != 1 {
			t.Fatalf("policy removed: got revision %d, want 1", v.Revision)
		}
		e.reconcile(p)
		e.wantTargets("policy removed", append(ids, late), 1, 1, 1, 1, 1)
		e.want(e.call(p, "GET", "/cam/rollout", nil), 404, "rollout without a policy")
	})
}

// TestRolloutWindows: honorMaintenanceWindows starts a device's update only
// in an open window; devices with none ever fail the rollout with the
// reason, and resume looks again.
func TestRolloutWindows(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		ids := e.fleet(2, nil)
		e.advance(0)
		pol := map[string]any{"honorMaintenanceWindows": true}
		e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", pol)}), 201, "create")
		e.reconcile(p)
		e.wantTargets("no windows", ids, 0, 0)
		ro := e.rolloutOf()
		if ro.State != eim.RolloutFailed || !strings.Contains(ro.Reason, "2 devices have no maintenance window") || !strings.Contains(ro.Reason, ids[0]) {
			t.Fatalf("no windows: got %s %q", ro.State, ro.Reason)
		}
		now := e.now().Unix()
		for i, w := range [][2]int64{{now - 60, now + 3600}, {now + 3600, now + 7200}} {
			if _, err := e.inv.Create(e.ctx, p, &eim.SingleSchedule{Name: "w", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE",
				StartSeconds: uint32(w[0]), EndSeconds: uint32(w[1]), TargetHostID: ids[i]}); err != nil {
				t.Fatal(err)
			}
		}
		e.reconcile(p)
		e.wantTargets("failed stays failed until resumed", ids, 0, 0)
		e.want(e.call(p, "POST", "/cam/rollout/resume", nil), 200, "resume")
		e.reconcile(p)
		e.wantTargets("one window open", ids, 1, 0)
		if ro := e.rolloutOf(); ro.State != eim.RolloutProgressing || !strings.Contains(ro.Reason, "maintenance windows (the next opens at") {
			t.Fatalf("waiting for a window: got %s %q", ro.State, ro.Reason)
		}
		e.advance(61 * time.Minute)
		e.reconcile(p)
		e.wantTargets("the second window open", ids, 1, 1)
	})
}

// TestRolloutTicks: the targets loop steps rollouts on its own (devices'
// reports are no change event), and stops with its context.
func TestRolloutTicks(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"), nil)
	p := e.proj.Name
	ids := e.fleet(2, nil)
	pol := map[string]any{"batches": []any{map[string]any{"limit": 1}}}
	e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", pol)}), 201, "create")
	svc, err := workloads.New(workloads.Options{Store: e.store, FeedStore: e.store, Inventory: e.inv, Key: e.key, RolloutTick: 20 * time.Millisecond, RetryWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Reconcile(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Reconcile: %v", err)
		}
	}()
	eventually(t, "batch 1's device given revision 1", func() bool { return e.targets()[ids[0]] == 1 })
	e.report(ids[0], 1, eim.PhaseRunning)
	eventually(t, "the last batch started by a tick", func() bool { return e.targets()[ids[1]] == 1 })
}

// TestRolloutPolicyAPI: a bad policy is a 400 naming its field, and
// nothing is written.
func TestRolloutPolicyAPI(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"), nil)
	p := e.proj.Name
	for _, tc := range []struct {
		pol   map[string]any
		field string
	}{
		{map[string]any{"batches": []any{map[string]any{"limit": "0%"}}}, "rolloutPolicy.batches[0].limit"},
		{map[string]any{"batches": []any{map[string]any{"limit": 1, "selector": map[string]any{}}}}, "rolloutPolicy.batches[0].selector"},
		{map[string]any{"updateTimeout": "forever"}, "rolloutPolicy.updateTimeout"},
		{map[string]any{"successThreshold": "101%"}, "rolloutPolicy.successThreshold"},
		{map[string]any{"disruptionBudget": map[string]any{"maxUnavailable": 0}}, "rolloutPolicy.disruptionBudget.maxUnavailable"},
		{map[string]any{"speed": "fast"}, "speed"},
		{map[string]any{"batches": []any{map[string]any{"limit": true}}}, "limit"},
	} {
		r := e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", tc.pol)})
		if r.code != 400 || !strings.Contains(string(r.body), tc.field) {
			t.Errorf("policy %v: got %d %s, want 400 naming %s", tc.pol, r.code, r.body, tc.field)
		}
	}
	e.want(e.call(p, "GET", "/cam", nil), 404, "nothing written")
	e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", nil)}), 201, "create")
	r := e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:1", map[string]any{"updateTimeout": "0s"})})
	if r.code != 400 || !strings.Contains(string(r.body), "rolloutPolicy.updateTimeout") {
		t.Fatalf("a bad policy in a replace: got %d %s", r.code, r.body)
	}
	var v workloads.View
	e.want(e.call(p, "GET", "/cam", nil), 200, "get").decode(t, &v)
	if v.Revision != 1 || v.Spec.RolloutPolicy != nil {
		t.Fatalf("after a refused replace: got revision %d policy %v", v.Revision, v.Spec.RolloutPolicy)
	}
	e.want(e.call(p, "POST", "/cam/rollout/rollback", nil), 409, "rollback without a rollout")
}

// TestRolloutConcurrentEngines: two instances of the module stepping the
// same rollout at once (as two replicas would if their leases overlapped)
// never give a device the revision outside a started batch, never take
// it back, and finish the rollout.
func TestRolloutConcurrentEngines(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		ids := e.fleet(40, nil)
		e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", nil)}), 201, "create")
		e.reconcile(p)
		for _, id := range ids {
			e.report(id, 1, eim.PhaseRunning)
		}
		pol := map[string]any{"batches": []any{map[string]any{"limit": "25%"}, map[string]any{"limit": "25%"}}, "successThreshold": "100%"}
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:2", pol)}), 200, "revise")
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
		defer cancel()
		errs := make(chan error, 2)
		for range 2 {
			svc, err := workloads.New(workloads.Options{Store: e.store, FeedStore: e.store, Inventory: e.inv, Key: e.key})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for ctx.Err() == nil {
					if err := svc.ReconcileProject(ctx, p); err != nil && ctx.Err() == nil && eim.ErrorCode(err) != eim.ECONFLICT {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		given := map[string]bool{}
		for {
			ts := e.targets()
			rows, err := e.store.EdgeWorkloadRolloutDevices(e.ctx, p, "cam")
			if err != nil {
				t.Fatal(err)
			}
			started := map[string]bool{}
			for _, r := range rows {
				started[r.HostID] = r.State != eim.RolloutDeviceWaiting
			}
			for _, id := range ids {
				switch {
				case ts[id] == 2 && !started[id]:
					t.Fatalf("%s has revision 2 outside a started batch", id)
				case ts[id] == 2 && !given[id]:
					given[id] = true
					e.report(id, 2, eim.PhaseRunning)
				case ts[id] != 2 && given[id]:
					t.Fatalf("%s was given revision 2, then %d", id, ts[id])
				}
			}
			ro, err := e.store.FindEdgeWorkloadRollout(e.ctx, p, "cam")
			if err == nil && ro.ToRevision == 2 && ro.State == eim.RolloutDone {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("rollout not done in time: %+v", ro)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("a concurrent step: %v", err)
			}
		}
		e.wantTargets("done", ids[:1], 2)
		if len(given) != len(ids) {
			t.Fatalf("devices given revision 2: got %d, want %d", len(given), len(ids))
		}
	})
}
