package inventory_test

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func (e *env) immutableOS(name string) *eim.OS {
	e.t.Helper()
	return e.create(&eim.OS{Name: name, Sha256: sha, OsType: "OS_TYPE_IMMUTABLE"}).(*eim.OS)
}

// Policies of each type are created and read back with their target OS;
// the original's rules between their fields hold; they cannot be changed.
func TestOSUpdatePolicies(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		emt := e.immutableOS("emt 3.1")
		ubuntu := e.os("ubuntu")
		latest := e.create(&eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest}).(*eim.OSUpdatePolicy)
		if latest.TargetOs != nil || latest.UpdatePolicy != eim.UpdatePolicyLatest || !eim.ValidID(eim.KindOSUpdatePolicy, latest.ResourceID) {
			t.Fatalf("latest: %+v", latest)
		}
		target := e.create(&eim.OSUpdatePolicy{Name: "to 3.1", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: emt.ResourceID}).(*eim.OSUpdatePolicy)
		if target.TargetOs == nil || target.TargetOs.ResourceID != emt.ResourceID || target.TargetOs.AliasID != emt.ResourceID {
			t.Fatalf("target OS not expanded: %+v", target.TargetOs)
		}
		got := e.get(eim.KindOSUpdatePolicy, target.ResourceID).(*eim.OSUpdatePolicy)
		if got.TargetOs == nil || got.TargetOs.Name != "emt 3.1" || got.TargetOsID != emt.ResourceID {
			t.Fatalf("get: %+v", got)
		}
		apt := e.create(&eim.OSUpdatePolicy{Name: "apt", UpdatePolicy: eim.UpdatePolicyTarget,
			UpdateSources: []string{"Types: deb\nURIs: http://x/ubuntu\nSuites: noble\nComponents: main"}, UpdatePackages: "curl\nvim"}).(*eim.OSUpdatePolicy)
		if apt.TargetOs != nil || len(apt.UpdateSources) != 1 {
			t.Fatalf("mutable: %+v", apt)
		}

		for _, c := range []struct {
			name string
			p    *eim.OSUpdatePolicy
			code string
			msg  string
		}{
			{"latest with packages", &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyLatest, UpdatePackages: "vim"}, eim.EINVALID, "updatePackages: must not be set with UPDATE_POLICY_LATEST"},
			{"both", &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: emt.ResourceID, UpdateKernelCommand: "quiet"}, eim.EINVALID, "targetOsId: cannot be combined"},
			{"neither", &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyTarget}, eim.EINVALID, "UPDATE_POLICY_TARGET needs"},
			{"unspecified", &eim.OSUpdatePolicy{Name: "x"}, eim.EINVALID, "updatePolicy: is required"},
			{"no name", &eim.OSUpdatePolicy{UpdatePolicy: eim.UpdatePolicyLatest}, eim.EINVALID, "name: is required"},
			{"missing OS", &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: "os-00000000"}, eim.ENOTFOUND, "targetOsId: os-00000000 not found"},
			{"mutable OS", &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: ubuntu.ResourceID}, eim.EINVALID, "targetOsId: OS " + ubuntu.ResourceID + " is mutable"},
		} {
			_, err := e.svc.Create(e.ctx, e.proj, c.p)
			wantErr(t, err, c.code, c.msg)
		}
		// Another project's OS is not found.
		other := e.newProject()
		foreignOS := ok(e.svc.Create(e.ctx, other, &eim.OS{Name: "f", Sha256: sha, OsType: "OS_TYPE_IMMUTABLE"})).get(t)
		_, err := e.svc.Create(e.ctx, e.proj, &eim.OSUpdatePolicy{Name: "x", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: foreignOS.Base().ResourceID})
		wantErr(t, err, eim.ENOTFOUND, "targetOsId")

		_, err = e.svc.Update(e.ctx, e.proj, &eim.OSUpdatePolicy{Meta: eim.Meta{ResourceID: latest.ResourceID}, Name: "renamed", UpdatePolicy: eim.UpdatePolicyLatest}, nil)
		wantErr(t, err, eim.EINVALID, "cannot be changed")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.OSUpdateRun{})
		wantErr(t, err, eim.EINVALID, "maintenance module")

		// The target OS of a policy cannot be deleted.
		err = e.svc.Delete(e.ctx, e.proj, eim.KindOS, emt.ResourceID)
		wantErr(t, err, eim.EPRECONDITION, "1 OS update policies ("+target.ResourceID+")")

		page := ok(e.svc.List(e.ctx, e.proj, eim.KindOSUpdatePolicy, inventory.ListQuery{Filter: "updatePolicy=UPDATE_POLICY_TARGET", OrderBy: "name"})).get(t)
		if page.Total != 2 || page.Items[0].Base().ResourceID != apt.ResourceID || page.Items[1].(*eim.OSUpdatePolicy).TargetOs == nil {
			t.Fatalf("list: %+v", page)
		}
		page = ok(e.svc.List(e.ctx, e.proj, eim.KindOSUpdatePolicy, inventory.ListQuery{Filter: `targetOs.name="emt*"`})).get(t)
		if page.Total != 1 || page.Items[0].Base().ResourceID != target.ResourceID {
			t.Fatalf("list by target OS name: %+v", page)
		}
	})
}

// An instance names its policy (which must exist); reads show it with its
// target OS; a policy in use by an instance or a run cannot be deleted.
func TestInstanceUpdatePolicy(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		emt := e.immutableOS("emt 3.0")
		next := e.immutableOS("emt 3.1")
		pol := e.create(&eim.OSUpdatePolicy{Name: "to 3.1", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: next.ResourceID}).(*eim.OSUpdatePolicy)
		h := e.host("h", "")
		_, err := e.svc.Create(e.ctx, e.proj, &eim.Instance{HostID: h.ResourceID, OSID: emt.ResourceID, OSUpdatePolicyID: "osupdatepolicy-00000000"})
		wantErr(t, err, eim.ENOTFOUND, "osUpdatePolicyID: osupdatepolicy-00000000 not found")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Instance{HostID: h.ResourceID, OSID: emt.ResourceID, OSUpdatePolicyID: "osupdatepolicy-1"})
		wantErr(t, err, eim.EINVALID, "osUpdatePolicyID")

		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: emt.ResourceID, OSUpdatePolicyID: pol.ResourceID}).(*eim.Instance)
		if in.UpdatePolicy == nil || in.UpdatePolicy.ResourceID != pol.ResourceID || in.UpdatePolicy.TargetOs == nil || in.UpdatePolicy.TargetOs.ResourceID != next.ResourceID {
			t.Fatalf("instance's updatePolicy: %+v", in.UpdatePolicy)
		}
		page := ok(e.svc.List(e.ctx, e.proj, eim.KindInstance, inventory.ListQuery{Filter: `updatePolicy.updatePolicy=UPDATE_POLICY_TARGET`})).get(t)
		if page.Total != 1 || page.Items[0].(*eim.Instance).UpdatePolicy == nil {
			t.Fatalf("instances by policy: %+v", page)
		}

		err = e.svc.Delete(e.ctx, e.proj, eim.KindOSUpdatePolicy, pol.ResourceID)
		wantErr(t, err, eim.EPRECONDITION, "OS update policy "+pol.ResourceID+" is in use by 1 instances ("+in.ResourceID+")")

		// Cleared (PATCH osUpdatePolicyID ""), the policy is still applied by a run.
		in = ok(e.svc.Update(e.ctx, e.proj, &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}}, []string{"osUpdatePolicyID"})).get(t).(*eim.Instance)
		if in.OSUpdatePolicyID != "" || in.UpdatePolicy != nil {
			t.Fatalf("cleared policy: %q %+v", in.OSUpdatePolicyID, in.UpdatePolicy)
		}
		var run eim.OSUpdateRun
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			run = eim.OSUpdateRun{InstanceID: in.ResourceID, AppliedPolicyID: pol.ResourceID}
			return inventory.CreateOSUpdateRun(e.ctx, tx, &run, time.Unix(1000, 0))
		}))
		err = e.svc.Delete(e.ctx, e.proj, eim.KindOSUpdatePolicy, pol.ResourceID)
		wantErr(t, err, eim.EPRECONDITION, "1 OS update runs ("+run.ResourceID+")")
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindOSUpdateRun, run.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindOSUpdatePolicy, pol.ResourceID))
	})
}

// The maintenance module's side: read an instance's policy, open a run,
// report on it, close it, write the instance's update status.
func TestOSUpdateRunsByManager(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		emt := e.immutableOS("emt 3.0")
		next := e.immutableOS("emt 3.1")
		pol := e.create(&eim.OSUpdatePolicy{Name: "to 3.1", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: next.ResourceID}).(*eim.OSUpdatePolicy)
		h := e.host("h", "")
		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: emt.ResourceID, OSUpdatePolicyID: pol.ResourceID}).(*eim.Instance)
		bare := e.instance(e.host("h2", "").ResourceID, emt.ResourceID)
		start := time.Unix(1_800_000_000, 0)

		var run eim.OSUpdateRun
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			p, err := inventory.OSUpdatePolicyOf(e.ctx, tx, in)
			if err != nil {
				return err
			}
			if p == nil || p.ResourceID != pol.ResourceID || p.TargetOs == nil || p.TargetOs.ImageURL != next.ImageURL || p.TargetOs.ResourceID != next.ResourceID {
				t.Errorf("policy of the instance: %+v", p)
			}
			if p, err := inventory.OSUpdatePolicyOf(e.ctx, tx, bare); err != nil || p != nil {
				t.Errorf("policy of an instance without one: %+v, %v", p, err)
			}
			if r, err := inventory.OpenOSUpdateRun(e.ctx, tx, in.ResourceID); err != nil || r != nil {
				t.Errorf("open run before any: %+v, %v", r, err)
			}
			run = eim.OSUpdateRun{InstanceID: in.ResourceID, AppliedPolicyID: p.ResourceID}
			if err := inventory.CreateOSUpdateRun(e.ctx, tx, &run, start); err != nil {
				return err
			}
			_, err = inventory.SetInstanceUpdateStatus(e.ctx, tx, in.ResourceID, eim.UpdateStatusUpdating, eim.StatusInProgress, start)
			return err
		}))
		if run.HostID != h.ResourceID || run.StartTime != uint64(start.Unix()) || run.StatusTimestamp != run.StartTime ||
			run.Status != eim.UpdateStatusUpdating || run.StatusIndicator != eim.StatusInProgress || run.Name != "OS update 2027-01-15T08:00:00Z" || !run.Open() {
			t.Fatalf("new run: %+v", run)
		}

		got := e.get(eim.KindOSUpdateRun, run.ResourceID).(*eim.OSUpdateRun)
		if got.Instance == nil || got.Instance.ResourceID != in.ResourceID || got.Instance.Host == nil || got.Instance.OS == nil ||
			got.AppliedPolicy == nil || got.AppliedPolicy.TargetOs == nil || got.AppliedPolicy.TargetOs.ResourceID != next.ResourceID {
			t.Fatalf("run read through the API: %+v", got)
		}
		inst := e.get(eim.KindInstance, in.ResourceID).(*eim.Instance)
		if inst.UpdateStatus != eim.UpdateStatusUpdating || inst.UpdateStatusIndicator != eim.StatusInProgress || inst.UpdateStatusTimestamp != uint64(start.Unix()) {
			t.Fatalf("instance update status: %q %s %d", inst.UpdateStatus, inst.UpdateStatusIndicator, inst.UpdateStatusTimestamp)
		}

		end := start.Add(10 * time.Minute)
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			r, err := inventory.OpenOSUpdateRun(e.ctx, tx, in.ResourceID)
			if err != nil {
				return err
			}
			if r == nil || r.ResourceID != run.ResourceID {
				t.Errorf("open run: got %+v, want %s", r, run.ResourceID)
				return nil
			}
			// The run's references and start cannot move.
			r.InstanceID, r.AppliedPolicyID, r.StartTime = bare.ResourceID, "", 1
			r.Status, r.StatusIndicator, r.StatusDetails = eim.UpdateStatusDone, eim.StatusIdle, `{"log":"ok"}`
			r.StatusTimestamp, r.EndTime = uint64(end.Unix()), uint64(end.Unix())
			if err := inventory.UpdateOSUpdateRun(e.ctx, tx, r); err != nil {
				return err
			}
			run = *r
			_, err = inventory.SetInstanceUpdateStatus(e.ctx, tx, in.ResourceID, eim.UpdateStatusDone, eim.StatusIdle, end)
			return err
		}))
		if run.InstanceID != in.ResourceID || run.AppliedPolicyID != pol.ResourceID || run.StartTime != uint64(start.Unix()) ||
			run.EndTime != uint64(end.Unix()) || run.Open() || run.StatusDetails != `{"log":"ok"}` {
			t.Fatalf("ended run: %+v", run)
		}
		noErr(t, e.store.View(e.ctx, e.proj, func(tx eim.Tx) error {
			if r, err := inventory.OpenOSUpdateRun(e.ctx, tx, in.ResourceID); err != nil || r != nil {
				t.Errorf("open run after the end: %+v, %v", r, err)
			}
			return nil
		}))

		// Bad input names the field and writes nothing.
		for _, c := range []struct {
			run  eim.OSUpdateRun
			code string
			msg  string
		}{
			{eim.OSUpdateRun{}, eim.EINVALID, "instance: is required"},
			{eim.OSUpdateRun{InstanceID: "inst-00000000"}, eim.ENOTFOUND, "instance: inst-00000000 not found"},
			{eim.OSUpdateRun{InstanceID: in.ResourceID, AppliedPolicyID: "osupdatepolicy-00000000"}, eim.ENOTFOUND, "appliedPolicy"},
			{eim.OSUpdateRun{InstanceID: in.ResourceID, StatusIndicator: "DONE"}, eim.EINVALID, "statusIndicator"},
		} {
			err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return inventory.CreateOSUpdateRun(e.ctx, tx, &c.run, start) })
			wantErr(t, err, c.code, c.msg)
		}
		err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			_, err := inventory.SetInstanceUpdateStatus(e.ctx, tx, in.ResourceID, "x", "STATUS_INDICATION_OK", end)
			return err
		})
		wantErr(t, err, eim.EINVALID, "updateStatusIndicator")
		page := ok(e.svc.List(e.ctx, e.proj, eim.KindOSUpdateRun, inventory.ListQuery{})).get(t)
		if page.Total != 1 {
			t.Fatalf("runs: got %d, want 1", page.Total)
		}

		// A run goes with its instance.
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		_, err = e.svc.Get(e.ctx, e.proj, eim.KindOSUpdateRun, run.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)
	})
}

// The fleet-wide view: instances per OS profile by update state, from
// grouped counts, with a filter.
func TestUpdatesSummary(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		empty := ok(e.svc.UpdatesSummary(e.ctx, e.proj, "")).get(t)
		if empty.Total != 0 || empty.OperatingSystems == nil || len(empty.OperatingSystems) != 0 {
			t.Fatalf("empty project: %+v", empty)
		}
		b := e.immutableOS("b emt")
		a := e.os("a ubuntu")
		site := e.site("s", "")
		mk := func(os *eim.OS, status string, ind eim.StatusIndication, available, site string) *eim.Instance {
			in := e.instance(e.host("h", site).ResourceID, os.ResourceID)
			e.manager(eim.KindInstance, in.ResourceID, func(r eim.Resource) {
				r.(*eim.Instance).UpdateStatus, r.(*eim.Instance).UpdateStatusIndicator, r.(*eim.Instance).OsUpdateAvailable = status, ind, available
			})
			return in
		}
		mk(a, eim.UpdateStatusDone, eim.StatusIdle, "", site.ResourceID)
		mk(a, eim.UpdateStatusUpToDate, eim.StatusIdle, "", "")
		mk(a, eim.UpdateStatusFailed, eim.StatusError, "newer: ubuntu 24.04.2", site.ResourceID)
		mk(a, "Downloading artifacts", eim.StatusInProgress, "", "")
		mk(b, eim.UpdateStatusUpdating, eim.StatusInProgress, "", site.ResourceID)
		mk(b, eim.UpdateStatusNone, eim.StatusUnspecified, "emt 3.1", "")
		e.instance(e.host("fresh", "").ResourceID, b.ResourceID) // defaults: No Current Update

		sum := ok(e.svc.UpdatesSummary(e.ctx, e.proj, "")).get(t)
		want := inventory.UpdateCounts{Total: 7, UpToDate: 2, Updating: 2, Failed: 1, Unknown: 2, OSUpdateAvailable: 2}
		if sum.UpdateCounts != want {
			t.Errorf("project: got %+v, want %+v", sum.UpdateCounts, want)
		}
		if len(sum.OperatingSystems) != 2 {
			t.Fatalf("per OS: %+v", sum.OperatingSystems)
		}
		wantOS := []inventory.OSUpdateCounts{
			{OSResourceID: a.ResourceID, Name: "a ubuntu", UpdateCounts: inventory.UpdateCounts{Total: 4, UpToDate: 2, Updating: 1, Failed: 1, OSUpdateAvailable: 1}},
			{OSResourceID: b.ResourceID, Name: "b emt", UpdateCounts: inventory.UpdateCounts{Total: 3, Updating: 1, Unknown: 2, OSUpdateAvailable: 1}},
		}
		for i, w := range wantOS {
			if sum.OperatingSystems[i] != w {
				t.Errorf("OS %d: got %+v, want %+v", i, sum.OperatingSystems[i], w)
			}
		}

		sum = ok(e.svc.UpdatesSummary(e.ctx, e.proj, `host.site.resourceId="`+site.ResourceID+`"`)).get(t)
		if want := (inventory.UpdateCounts{Total: 3, UpToDate: 1, Updating: 1, Failed: 1, OSUpdateAvailable: 1}); sum.UpdateCounts != want || len(sum.OperatingSystems) != 2 {
			t.Errorf("site: got %+v (%d OSes), want %+v", sum.UpdateCounts, len(sum.OperatingSystems), want)
		}
		_, err := e.svc.UpdatesSummary(e.ctx, e.proj, "nosuch=1")
		wantErr(t, err, eim.EINVALID, "nosuch")
		// Another project's view is its own.
		if s := ok(e.svc.UpdatesSummary(e.ctx, e.newProject(), "")).get(t); s.Total != 0 {
			t.Errorf("other project: %+v", s)
		}
	})
}
