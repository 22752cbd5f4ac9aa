package storetest

import (
	"testing"

	"github.com/eimhq/eim"
)

// testWorkloads checks the store's part of workloads: an external ID names
// one workload per project, an instance is a member of one workload at
// most, a workload with members cannot be deleted, and a member goes with
// its instance (with an event).
func testWorkloads(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)

	create(t, s, p1, &eim.Workload{ExternalID: "cluster-a"})
	err := s.Update(ctx(t), p1, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Workload{ExternalID: "cluster-a"}) })
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "externalId", "cluster-a")
	create(t, s, p2, &eim.Workload{ExternalID: "cluster-a"}) // another project
	create(t, s, p1, &eim.Workload{})                        // no external ID: no clash
	create(t, s, p1, &eim.Workload{})

	w1 := create(t, s, p1, &eim.Workload{Name: "w1"}).(*eim.Workload)
	w2 := create(t, s, p1, &eim.Workload{Name: "w2"}).(*eim.Workload)
	host := create(t, s, p1, &eim.Host{}).(*eim.Host)
	inst := create(t, s, p1, &eim.Instance{HostID: host.ResourceID}).(*eim.Instance)
	m := create(t, s, p1, &eim.WorkloadMember{WorkloadID: w1.ResourceID, InstanceID: inst.ResourceID}).(*eim.WorkloadMember)
	err = s.Update(ctx(t), p1, func(tx eim.Tx) error {
		return tx.Create(ctx(t), &eim.WorkloadMember{WorkloadID: w2.ResourceID, InstanceID: inst.ResourceID})
	})
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "instanceId")

	// Back edges reach the members from both ends.
	for _, c := range []struct {
		k      eim.Kind
		filter string
		want   string
	}{
		{eim.KindInstance, "has(workloadMembers)", inst.ResourceID},
		{eim.KindInstance, `workload_members.workload.name = "w1"`, inst.ResourceID},
		{eim.KindWorkload, "has(members)", w1.ResourceID},
		{eim.KindWorkloadMember, `instance.host.resourceId = "` + host.ResourceID + `"`, m.ResourceID},
	} {
		var items []eim.Resource
		err := s.View(ctx(t), p1, func(tx eim.Tx) error {
			var err error
			items, _, err = tx.List(ctx(t), c.k, eim.Query{Filter: c.filter})
			return err
		})
		if err != nil {
			t.Fatalf("%s %s: %v", c.k, c.filter, err)
		}
		if len(items) != 1 || items[0].Base().ResourceID != c.want {
			t.Errorf("%s %s: got %d items, want only %s", c.k, c.filter, len(items), c.want)
		}
	}

	err = s.Update(ctx(t), p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindWorkload, w1.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
	mustContain(t, err, w1.ResourceID)

	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, inst.ResourceID) })
	_, err = get(t, s, p1, eim.KindWorkloadMember, m.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)
	evs, err := s.Events(ctx(t), rev, 100)
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, e := range evs {
		deleted[e.ID] = e.Op == eim.OpDeleted
	}
	if !deleted[m.ResourceID] {
		t.Errorf("no DELETED event of member %s after its instance went (events %+v)", m.ResourceID, evs)
	}
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindWorkload, w1.ResourceID) })
}
