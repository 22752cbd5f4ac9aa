package workloads_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/workloads"
)

// TestTargetsFollowHosts: the targets loop follows hosts' changes host by
// host — a label added selects the device, removed unselects it, a host
// deleted loses its targets — without reconciling the whole project
// again (the loop's own count of its reconciles by scope), while a
// workload's change does reconcile the project; under a rollout policy a
// host's change reconciles the project too (the rollout engine decides
// over every device).
func TestTargetsFollowHosts(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		ids := e.fleet(3, nil)
		other := e.device(p, "", "x86_64", "line", "2").id
		reg := prometheus.NewRegistry()
		svc, err := workloads.New(workloads.Options{Store: e.store, FeedStore: e.store, Inventory: e.inv, Key: e.key, Metrics: reg,
			Relist: time.Hour, RolloutTick: time.Hour, RetryWait: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		count := func(scope string) int {
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "eim_workloads_reconciles_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "scope" && l.GetValue() == scope {
							return int(m.GetCounter().GetValue())
						}
					}
				}
			}
			return 0
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
		// The loop's first re-list (every project, whole), then the
		// workload: its event reconciles the project once more.
		eventually(t, "the loop's first re-list", func() bool { return count("project") > 0 })
		e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", nil)}), 201, "create")
		eventually(t, "the workload's devices targeted", func() bool { return len(e.targets()) == 3 })
		whole := count("project")

		e.setMetadata(p, other, "line", "1")
		eventually(t, "a device newly labelled targeted", func() bool { return e.targets()[other] == 1 })
		e.setMetadata(p, ids[0], "line", "3")
		eventually(t, "a device unlabelled no longer targeted", func() bool { _, ok := e.targets()[ids[0]]; return !ok })
		if err := e.inv.Delete(e.ctx, p, eim.KindHost, ids[1]); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a deleted host's targets gone", func() bool { _, ok := e.targets()[ids[1]]; return !ok })
		if got := count("project"); got != whole {
			t.Fatalf("hosts' changes reconciled the whole project %d times", got-whole)
		}
		if count("hosts") < 3 {
			t.Fatalf("hosts' changes reconciled host by host %d times, want at least 3", count("hosts"))
		}
		if got := e.targets(); len(got) != 2 || got[ids[2]] != 1 || got[other] != 1 {
			t.Fatalf("targets at the end: %v", got)
		}

		// Under a rollout policy, a host's change reconciles the project.
		pol := map[string]any{"batches": []any{map[string]any{"limit": "100%"}}}
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:1", pol)}), 200, "policy")
		eventually(t, "the policy's reconcile", func() bool { return count("project") > whole })
		whole = count("project")
		e.setMetadata(p, ids[0], "line", "1")
		eventually(t, "the relabelled device targeted under the policy", func() bool { return e.targets()[ids[0]] == 1 })
		if count("project") == whole {
			t.Fatal("a host's change under a rollout policy did not reconcile the project")
		}
	})
}
