package storetest

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testEdgeWorkloadRollouts checks eim.EdgeWorkloadRolloutStore: a rollout
// written only over the generation read (a user's state change between
// the engine's read and write wins), a fresh rollout replacing the rows
// of the last, device rows upserted and removed, state moves only from
// the states named, a policy changed without a new revision, isolation
// between projects, and the cascades of a host's and a workload's
// deletion.
func testEdgeWorkloadRollouts(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	h1 := create(t, s, p1, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	spec := eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}},
		Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/cam:1"}}}}}
	if err := s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p1, Name: "cam", Spec: spec}); err != nil {
		t.Fatal(err)
	}

	// The policy alone: no new revision.
	pol := &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "10%"}}, SuccessThreshold: "90%"}
	w, err := s.SetEdgeWorkloadRolloutPolicy(ctx(t), p1, "cam", 1, pol)
	if err != nil {
		t.Fatal(err)
	}
	if w.Revision != 1 || w.Spec.RolloutPolicy == nil || w.Spec.RolloutPolicy.Batches[0].Limit != "10%" {
		t.Fatalf("policy set: got revision %d policy %+v, want revision 1 with the policy", w.Revision, w.Spec.RolloutPolicy)
	}
	if got, _ := s.FindEdgeWorkload(ctx(t), p1, "cam"); got.Spec.RolloutPolicy == nil || got.Spec.RolloutPolicy.SuccessThreshold != "90%" {
		t.Fatalf("policy read back: got %+v", got.Spec.RolloutPolicy)
	}
	if revs, _ := s.EdgeWorkloadRevisions(ctx(t), p1, "cam"); len(revs) != 1 {
		t.Fatalf("revisions after a policy change: got %d, want 1", len(revs))
	}
	_, err = s.SetEdgeWorkloadRolloutPolicy(ctx(t), p1, "cam", 2, pol)
	wantCode(t, err, eim.ECONFLICT)
	_, err = s.SetEdgeWorkloadRolloutPolicy(ctx(t), p1, "nope", 1, pol)
	wantCode(t, err, eim.ENOTFOUND)

	_, err = s.FindEdgeWorkloadRollout(ctx(t), p1, "cam")
	wantCode(t, err, eim.ENOTFOUND)
	now := eim.NewTime(time.Now())
	r := &eim.EdgeWorkloadRollout{Project: p1, Workload: "cam", ID: 1, ToRevision: 1, State: eim.RolloutProgressing, Since: now, Total: 2, BatchStartedAt: now}
	if err := s.SaveEdgeWorkloadRollout(ctx(t), r, true, []eim.EdgeWorkloadRolloutDevice{
		{HostID: h1, Batch: 0, State: eim.RolloutDeviceUpdating, Since: now},
		{HostID: h2, Batch: 1, State: eim.RolloutDeviceWaiting, Since: now},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if r.Generation != 1 {
		t.Fatalf("generation after the first save: got %d, want 1", r.Generation)
	}
	got, err := s.FindEdgeWorkloadRollout(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != eim.RolloutProgressing || got.Total != 2 || got.ToRevision != 1 || !got.Since.Equal(now.Time) || !got.BatchStartedAt.Equal(now.Time) || got.Generation != 1 {
		t.Fatalf("rollout read back: got %+v", got)
	}
	rows, err := s.EdgeWorkloadRolloutDevices(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].State == rows[1].State {
		t.Fatalf("rows: got %+v", rows)
	}

	// A state change by a user between the engine's read and write wins.
	stale := *got
	if _, err := s.SetEdgeWorkloadRolloutState(ctx(t), p1, "cam", []string{eim.RolloutProgressing}, eim.RolloutPaused, "by a user"); err != nil {
		t.Fatal(err)
	}
	stale.Batch = 1
	wantCode(t, s.SaveEdgeWorkloadRollout(ctx(t), &stale, false, nil, nil), eim.ECONFLICT)
	if got, _ := s.FindEdgeWorkloadRollout(ctx(t), p1, "cam"); got.State != eim.RolloutPaused || got.Reason != "by a user" || got.Batch != 0 {
		t.Fatalf("after a stale write: got %+v, want the user's pause", got)
	}
	_, err = s.SetEdgeWorkloadRolloutState(ctx(t), p1, "cam", []string{eim.RolloutProgressing}, eim.RolloutPaused, "again")
	wantCode(t, err, eim.ECONFLICT)
	_, err = s.SetEdgeWorkloadRolloutState(ctx(t), p1, "cam", []string{eim.RolloutPaused}, "SIDEWAYS", "")
	wantCode(t, err, eim.EINVALID)
	_, err = s.SetEdgeWorkloadRolloutState(ctx(t), p2, "cam", []string{eim.RolloutPaused}, eim.RolloutProgressing, "")
	wantCode(t, err, eim.ENOTFOUND)
	if rs, err := s.EdgeWorkloadRollouts(ctx(t), p2); err != nil || len(rs) != 0 {
		t.Fatalf("another project's rollouts: got %v %v, want none", rs, err)
	}

	// Rows upserted and removed over the current generation.
	cur, _ := s.FindEdgeWorkloadRollout(ctx(t), p1, "cam")
	cur.State = eim.RolloutProgressing
	if err := s.SaveEdgeWorkloadRollout(ctx(t), cur, false, []eim.EdgeWorkloadRolloutDevice{{HostID: h1, State: eim.RolloutDeviceDone, Since: now}}, []string{h2}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.EdgeWorkloadRolloutDevices(ctx(t), p1, "cam"); len(rows) != 1 || rows[0].HostID != h1 || rows[0].State != eim.RolloutDeviceDone {
		t.Fatalf("rows after an upsert and a removal: got %+v", rows)
	}
	wantCode(t, s.SaveEdgeWorkloadRollout(ctx(t), cur, false, []eim.EdgeWorkloadRolloutDevice{{HostID: h1, State: "bogus"}}, nil), eim.EINVALID)

	// A fresh rollout replaces the rows of the last.
	if _, err := s.ReviseEdgeWorkload(ctx(t), p1, "cam", 1, spec); err != nil {
		t.Fatal(err)
	}
	next := &eim.EdgeWorkloadRollout{Project: p1, Workload: "cam", ID: 2, FromRevision: 1, ToRevision: 2, State: eim.RolloutProgressing, Since: now, Generation: cur.Generation}
	if err := s.SaveEdgeWorkloadRollout(ctx(t), next, true, []eim.EdgeWorkloadRolloutDevice{{HostID: h2, State: eim.RolloutDeviceWaiting, Since: now}}, nil); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.EdgeWorkloadRolloutDevices(ctx(t), p1, "cam"); len(rows) != 1 || rows[0].HostID != h2 {
		t.Fatalf("rows of a fresh rollout: got %+v, want h2's only", rows)
	}
	if got, _ := s.FindEdgeWorkloadRollout(ctx(t), p1, "cam"); got.ID != 2 || got.FromRevision != 1 || got.ToRevision != 2 {
		t.Fatalf("fresh rollout: got %+v", got)
	}

	// A host's row goes with the host; the rollout with its workload.
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, h2) })
	if rows, _ := s.EdgeWorkloadRolloutDevices(ctx(t), p1, "cam"); len(rows) != 0 {
		t.Fatalf("rows after the host's deletion: got %+v", rows)
	}
	if err := s.DeleteEdgeWorkloadRollout(ctx(t), p1, "cam"); err != nil {
		t.Fatal(err)
	}
	_, err = s.FindEdgeWorkloadRollout(ctx(t), p1, "cam")
	wantCode(t, err, eim.ENOTFOUND)
	next.Generation = 0
	if err := s.SaveEdgeWorkloadRollout(ctx(t), next, true, []eim.EdgeWorkloadRolloutDevice{{HostID: h1, State: eim.RolloutDeviceUpdating, Since: now}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEdgeWorkload(ctx(t), p1, "cam"); err != nil {
		t.Fatal(err)
	}
	_, err = s.FindEdgeWorkloadRollout(ctx(t), p1, "cam")
	wantCode(t, err, eim.ENOTFOUND)
	wantCode(t, s.SaveEdgeWorkloadRollout(ctx(t), next, false, nil, nil), eim.ENOTFOUND)
}
