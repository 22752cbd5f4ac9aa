package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testEdgeWorkloadDeleteRaces deletes workloads, and a host, while
// devices report their status and uploads, log requests are made and
// targets are set for them. A write about a workload (or host) deleted
// meanwhile is never an internal error: a status report drops the
// deleted workload's row and records the rest, an upload record or a log
// request or a rollout's save is answered "not found", a target of a
// deleted workload is not set, a deleted host's rollout row is left out,
// and the deletes succeed. Nothing of the deleted workload remains.
func testEdgeWorkloadDeleteRaces(t *testing.T, s eim.Store) {
	p := project(t, s)
	const devices, rounds = 4, 12
	var hosts []string
	for i := range devices {
		hosts = append(hosts, create(t, s, p, &eim.Host{Name: fmt.Sprintf("d%d", i)}).(*eim.Host).ResourceID)
	}
	spec := eim.EdgeWorkloadSpec{Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/c:1"}}}}}
	if err := s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p, Name: "keep", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	var logs atomic.Int64
	for round := range rounds {
		name := fmt.Sprintf("w%d", round)
		if err := s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p, Name: name, Spec: spec}); err != nil {
			t.Fatal(err)
		}
		// A host of this round only, deleted with the workload.
		gone := create(t, s, p, &eim.Host{Name: fmt.Sprintf("gone%d", round)}).(*eim.Host).ResourceID
		all := append([]string{gone}, hosts...)
		var set []eim.EdgeWorkloadTarget
		for _, h := range all {
			set = append(set, eim.EdgeWorkloadTarget{Workload: "keep", HostID: h, Revision: 1}, eim.EdgeWorkloadTarget{Workload: name, HostID: h, Revision: 1})
		}
		if err := s.SetEdgeWorkloadTargets(ctx(t), p, set); err != nil {
			t.Fatal(err)
		}

		start := make(chan struct{})
		var deleted atomic.Bool
		var wg sync.WaitGroup
		for _, h := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Until the deletes are done, and twice after.
				for after := 0; after < 2; {
					if deleted.Load() {
						after++
					}
					err := s.RecordEdgeWorkloadStatus(ctx(t), p, h, 0, []eim.EdgeWorkloadStatus{
						{Workload: "keep", Revision: 1, Phase: eim.PhaseRunning},
						{Workload: name, Revision: 1, Phase: eim.PhaseRunning}})
					if err != nil && !(h == gone && eim.ErrorCode(err) == eim.ENOTFOUND) {
						t.Errorf("round %d: status report of %s: %v", round, h, err)
						return
					}
					err = s.RecordEdgeWorkloadUploads(ctx(t), p, h, name, time.Now(), nil)
					if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
						t.Errorf("round %d: uploads of %s: %v", round, h, err)
						return
					}
					err = s.CreateEdgeWorkloadLogRequest(ctx(t), &eim.EdgeWorkloadLogRequest{Project: p, ID: fmt.Sprintf("log-%d", logs.Add(1)), Workload: name, HostID: h})
					if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
						t.Errorf("round %d: log request of %s: %v", round, h, err)
						return
					}
					if err := s.SetEdgeWorkloadTargets(ctx(t), p, []eim.EdgeWorkloadTarget{{Workload: name, HostID: h, Revision: 1}}); err != nil {
						t.Errorf("round %d: target of %s: %v", round, h, err)
						return
					}
					// The rollout's devices (eim.EdgeWorkloadRolloutStore):
					// saves of several devices conflict with each other.
					r := &eim.EdgeWorkloadRollout{Project: p, Workload: name, ID: 1, ToRevision: 1, State: eim.RolloutProgressing}
					if cur, err := s.FindEdgeWorkloadRollout(ctx(t), p, name); err == nil {
						r = cur
					}
					err = s.SaveEdgeWorkloadRollout(ctx(t), r, false, []eim.EdgeWorkloadRolloutDevice{{HostID: h, State: eim.RolloutDeviceWaiting}}, nil)
					if c := eim.ErrorCode(err); err != nil && c != eim.ENOTFOUND && c != eim.ECONFLICT {
						t.Errorf("round %d: rollout device %s: %v", round, h, err)
						return
					}
				}
			}()
		}
		var dels sync.WaitGroup
		dels.Add(2)
		go func() {
			defer dels.Done()
			<-start
			if err := s.DeleteEdgeWorkload(ctx(t), p, name); err != nil {
				t.Errorf("round %d: delete %s: %v", round, name, err)
			}
		}()
		go func() {
			defer dels.Done()
			<-start
			if err := s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, gone) }); err != nil {
				t.Errorf("round %d: delete host %s: %v", round, gone, err)
			}
		}()
		close(start)
		dels.Wait()
		deleted.Store(true)
		wg.Wait()
		if t.Failed() {
			return
		}

		_, err := s.FindEdgeWorkload(ctx(t), p, name)
		wantCode(t, err, eim.ENOTFOUND)
		if sts, err := s.EdgeWorkloadStatuses(ctx(t), p, name); err != nil || len(sts) != 0 {
			t.Fatalf("round %d: statuses of the deleted %s: %+v, %v", round, name, sts, err)
		}
		ts, err := s.EdgeWorkloadTargets(ctx(t), p, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range ts {
			if tg.Workload == name || tg.HostID == gone {
				t.Fatalf("round %d: a target of the deleted workload or host remains: %+v", round, tg)
			}
		}
		// The rest of every report was recorded.
		sts, err := s.EdgeWorkloadStatuses(ctx(t), p, "keep")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, st := range sts {
			seen[st.HostID] = true
		}
		for _, h := range hosts {
			if !seen[h] {
				t.Fatalf("round %d: %s's status of keep was not recorded: %+v", round, h, sts)
			}
		}
		if seen[gone] {
			t.Fatalf("round %d: the deleted host %s still has a status", round, gone)
		}
	}
}
