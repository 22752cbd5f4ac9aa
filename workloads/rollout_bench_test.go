package workloads_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim"
)

// BenchmarkRollout10k measures the rollout engine's cost of one revision
// rolled out to 10,000 devices of 100 sites: nine batches of 10 % and the
// rest, a success threshold of 90 %, at most 10 % of a site unavailable.
// An op is one whole rollout: the targets loop's steps (timed) until it is
// DONE, each device reporting the revision Running as soon as it is given
// it (not timed: that is the devices' side). On SQLite, as the single
// binary runs.
func BenchmarkRollout10k(b *testing.B) {
	const n, sites = 10000, 100
	e := newEnv(b, filepath.Join(b.TempDir(), "eim.db"), nil)
	p := e.proj.Name
	err := e.store.Update(e.ctx, p, func(tx eim.Tx) error {
		for i := range n {
			h := &eim.Host{Name: fmt.Sprintf("dev-%d", i), UUID: newUUID(), DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded,
				Metadata: eim.Metadata{{Key: "line", Value: "1"}, {Key: "site", Value: fmt.Sprintf("s%d", i%sites)}}}
			if err := tx.Create(e.ctx, h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var batches []any
	for range 9 {
		batches = append(batches, map[string]any{"limit": "10%"})
	}
	pol := map[string]any{"batches": batches, "successThreshold": "90%", "updateTimeout": "10m",
		"disruptionBudget": map[string]any{"groupBy": []string{"site"}, "maxUnavailable": "10%"}}
	e.want(e.call(p, "POST", "", map[string]any{"name": "cam", "spec": camSpec("reg/cam:1", nil)}), 201, "create")
	e.reconcile(p)
	e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec("reg/cam:1", pol)}), 200, "policy")
	e.reconcile(p)
	reported := map[string]int64{}
	report := func(rev int64) {
		ts, err := e.store.EdgeWorkloadTargets(e.ctx, p, "")
		if err != nil {
			b.Fatal(err)
		}
		for _, tg := range ts {
			if tg.Revision == rev && reported[tg.HostID] != rev {
				reported[tg.HostID] = rev
				e.report(tg.HostID, rev, eim.PhaseRunning)
			}
		}
	}
	report(1)
	rev := int64(1)
	steps := 0
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rev++
		e.want(e.call(p, "PUT", "/cam", map[string]any{"spec": camSpec(fmt.Sprintf("reg/cam:%d", rev), pol)}), 200, "revise")
		for {
			b.StartTimer()
			e.reconcile(p)
			b.StopTimer()
			steps++
			ro, err := e.store.FindEdgeWorkloadRollout(e.ctx, p, "cam")
			if err != nil {
				b.Fatal(err)
			}
			if ro.ToRevision == rev && ro.State == eim.RolloutDone {
				break
			}
			if ro.State != eim.RolloutProgressing || steps > 1000 {
				b.Fatalf("rollout of %d: %s after %d steps: %s", rev, ro.State, steps, ro.Reason)
			}
			report(rev)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}
