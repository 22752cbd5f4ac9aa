package inventory_test

import (
	"fmt"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func (e *env) workload(name, externalID string) *eim.Workload {
	e.t.Helper()
	return e.create(&eim.Workload{Kind: eim.WorkloadKindCluster, Name: name, ExternalID: externalID}).(*eim.Workload)
}

func (e *env) member(workload, instance string) *eim.WorkloadMember {
	e.t.Helper()
	return e.create(&eim.WorkloadMember{Kind: eim.WorkloadMemberKindClusterNode, WorkloadID: workload, InstanceID: instance}).(*eim.WorkloadMember)
}

// The rules of workloads and their members, as the original's inventory
// has them: an instance is in one workload at most, a workload with
// members cannot be deleted, a member is never changed and goes with its
// instance; both ends show the membership.
func TestWorkloadRules(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		o := e.os("ubuntu")
		w1, w2 := e.workload("one", "c1"), e.workload("two", "")
		i1 := e.instance(e.host("h1", "").ResourceID, o.ResourceID)
		i2 := e.instance(e.host("h2", "").ResourceID, o.ResourceID)
		m := e.member(w1.ResourceID, i1.ResourceID)
		if m.Workload == nil || m.Workload.ExternalID != "c1" || m.Instance == nil || m.Instance.OS == nil || m.Member == nil ||
			m.Member.ResourceID != i1.ResourceID || m.AliasID != m.ResourceID {
			t.Fatalf("created member: %+v", m)
		}

		in := e.get(eim.KindInstance, i1.ResourceID).(*eim.Instance)
		if len(in.WorkloadMembers) != 1 || in.WorkloadMembers[0].ResourceID != m.ResourceID ||
			in.WorkloadMembers[0].Workload == nil || in.WorkloadMembers[0].Workload.Name != "one" {
			t.Fatalf("instance's memberships: %+v", in.WorkloadMembers)
		}
		w := e.get(eim.KindWorkload, w1.ResourceID).(*eim.Workload)
		if len(w.Members) != 1 || w.Members[0].Instance == nil || w.Members[0].Instance.ResourceID != i1.ResourceID || w.AliasID != w1.ResourceID {
			t.Fatalf("workload's members: %+v", w.Members)
		}

		_, err := e.svc.Create(e.ctx, e.proj, &eim.WorkloadMember{Kind: eim.WorkloadMemberKindClusterNode, WorkloadID: w2.ResourceID, InstanceID: i1.ResourceID})
		wantErr(t, err, eim.ECONFLICT, "instanceId", i1.ResourceID, w1.ResourceID)
		_, err = e.svc.Create(e.ctx, e.proj, &eim.WorkloadMember{WorkloadID: w2.ResourceID, InstanceID: i2.ResourceID})
		wantErr(t, err, eim.EINVALID, "kind: is required")
		_, err = e.svc.Update(e.ctx, e.proj, &eim.WorkloadMember{Meta: eim.Meta{ResourceID: m.ResourceID}, Kind: eim.WorkloadMemberKindClusterNode}, nil)
		wantErr(t, err, eim.EINVALID, "cannot be changed")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Workload{Kind: eim.WorkloadKindCluster, ExternalID: "c1"})
		wantErr(t, err, eim.ECONFLICT, "externalId")
		wantErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindWorkload, w1.ResourceID), eim.EPRECONDITION, w1.ResourceID, m.ResourceID)

		// The member goes with its instance, once the instance is removed.
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, i1.ResourceID))
		e.get(eim.KindWorkloadMember, m.ResourceID)
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, i1.ResourceID))
		_, err = e.svc.Get(e.ctx, e.proj, eim.KindWorkloadMember, m.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindWorkload, w1.ResourceID))

		// A project with workloads is not empty; force deletes them.
		e.member(w2.ResourceID, i2.ResourceID)
		wantErr(t, e.svc.DeleteProject(e.ctx, e.proj, false), eim.EPRECONDITION, "workloads", "workload_members")
		noErr(t, e.svc.DeleteProject(e.ctx, e.proj, true))
	})
}

// Listing instances or workloads loads the memberships of a page in a
// fixed number of queries, however many there are.
func TestWorkloadListsBatch(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		o := e.os("ubuntu")
		w := e.workload("w", "")
		for i := range 12 {
			in := e.instance(e.host(fmt.Sprint("h", i), "").ResourceID, o.ResourceID)
			if i%2 == 0 {
				e.member(w.ResourceID, in.ResourceID)
			}
		}
		counting := &countingStore{Store: e.store}
		svc := inventory.New(counting, inventory.Options{})
		p := ok(svc.List(e.ctx, e.proj, eim.KindInstance, inventory.ListQuery{PageSize: 100})).get(t)
		members := 0
		for _, it := range p.Items {
			in := it.(*eim.Instance)
			members += len(in.WorkloadMembers)
			if len(in.WorkloadMembers) == 1 && in.WorkloadMembers[0].Workload == nil {
				t.Errorf("instance %s: membership without its workload", in.ResourceID)
			}
		}
		if members != 6 {
			t.Errorf("memberships shown: got %d, want 6", members)
		}
		if n := counting.calls.Load(); n > 10 {
			t.Errorf("listing 12 instances: got %d store calls, want ≤ 10", n)
		}
		counting.calls.Store(0)
		wp := ok(svc.List(e.ctx, e.proj, eim.KindWorkload, inventory.ListQuery{})).get(t)
		if got := len(wp.Items[0].(*eim.Workload).Members); got != 6 {
			t.Errorf("workload members: got %d, want 6", got)
		}
		if n := counting.calls.Load(); n > 3 {
			t.Errorf("listing a workload of 6 members: got %d store calls, want ≤ 3", n)
		}
	})
}
