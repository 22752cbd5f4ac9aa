package inventory_test

import (
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func TestCreateInstance(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h, o := e.host("h", ""), e.os("ubuntu")
		in := e.create(&eim.Instance{Name: "i", HostID: h.ResourceID, OSID: o.ResourceID,
			DesiredState: eim.InstanceStateUntrusted, ProvisioningStatus: "Provisioned"}).(*eim.Instance)
		checks := []struct{ name, got, want string }{
			{"desiredState", string(in.DesiredState), string(eim.InstanceStateRunning)},
			{"instanceStatus", in.InstanceStatus, "Not Installed"},
			{"provisioningStatus", in.ProvisioningStatus, "Not Provisioned"},
			{"updateStatus", in.UpdateStatus, "No Current Update"},
			{"provisioningStatusIndicator", string(in.ProvisioningStatusIndicator), string(eim.StatusUnspecified)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
			}
		}

		h2 := e.host("h2", "")
		cases := []struct {
			name, host, os, code, msg string
		}{
			{"second on host", h.ResourceID, o.ResourceID, eim.ECONFLICT, "host " + h.ResourceID + " already has instance " + in.ResourceID},
			{"no host", "", o.ResourceID, eim.EINVALID, "hostID: is required"},
			{"no os", h2.ResourceID, "", eim.EINVALID, "osID: is required"},
			{"unknown host", "host-0000beef", o.ResourceID, eim.ENOTFOUND, "hostID: host-0000beef not found"},
			{"unknown os", h2.ResourceID, "os-0000beef", eim.ENOTFOUND, "osID: os-0000beef not found"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := e.svc.Create(e.ctx, e.proj, &eim.Instance{HostID: c.host, OSID: c.os})
				wantErr(t, err, c.code, c.msg)
			})
		}
		// Resources of another project are invisible.
		other := e.newProject()
		_, err := e.svc.Create(e.ctx, other, &eim.Instance{HostID: h2.ResourceID, OSID: o.ResourceID})
		wantErr(t, err, eim.ENOTFOUND, "hostID")
		_, err = e.svc.Get(e.ctx, other, eim.KindInstance, in.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)

		// Not on a host being deleted or invalidated.
		noErr(t, e.svc.InvalidateHost(e.ctx, e.proj, h2.ResourceID, ""))
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Instance{HostID: h2.ResourceID, OSID: o.ResourceID})
		wantErr(t, err, eim.EPRECONDITION, "invalidated")
	})
}

func TestInstanceFrozenFields(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h, o := e.host("h", ""), e.os("ubuntu")
		la1 := e.create(&eim.LocalAccount{Username: "one", SSHKey: sshKey}).(*eim.LocalAccount)
		la2 := e.create(&eim.LocalAccount{Username: "two", SSHKey: sshKey}).(*eim.LocalAccount)
		cc := e.create(&eim.CustomConfig{Name: "cfg", Config: "#cloud-config"}).(*eim.CustomConfig)
		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: o.ResourceID, LocalAccountID: la1.ResourceID}).(*eim.Instance)
		if in.LocalAccount == nil || in.LocalAccount.Username != "one" {
			t.Fatalf("localaccount: got %+v", in.LocalAccount)
		}
		patch := func(r *eim.Instance, fields ...string) error {
			r.ResourceID = in.ResourceID
			_, err := e.svc.Update(e.ctx, e.proj, r, fields)
			return err
		}
		// Before provisioning, both may change.
		noErr(t, patch(&eim.Instance{LocalAccountID: la2.ResourceID}, "localAccountID"))
		noErr(t, patch(&eim.Instance{CustomConfigIDs: []string{cc.ResourceID}}, "customConfigID"))
		wantErr(t, patch(&eim.Instance{CustomConfigIDs: []string{"customconfig-0000beef"}}, "customConfigID"), eim.ENOTFOUND, "customConfigID[0]")
		wantErr(t, patch(&eim.Instance{HostID: e.host("h2", "").ResourceID}, "hostID"), eim.EINVALID, "hostID: cannot be changed")
		wantErr(t, patch(&eim.Instance{OSID: e.os("other").ResourceID}, "osID"), eim.EINVALID, "osID: cannot be changed")

		e.manager(eim.KindInstance, in.ResourceID, func(r eim.Resource) {
			r.(*eim.Instance).ProvisioningStatus = "Provisioning In Progress: 3/11: Streaming OS image"
			r.(*eim.Instance).ProvisioningStatusIndicator = eim.StatusInProgress
		})
		wantErr(t, patch(&eim.Instance{LocalAccountID: la1.ResourceID}, "localAccountID"), eim.EPRECONDITION, "localAccountID: cannot be changed once provisioning")
		wantErr(t, patch(&eim.Instance{}, "customConfigID"), eim.EPRECONDITION, "customConfigID: cannot be changed once provisioning")
		// Other fields still may; a PUT keeping the frozen ones is fine.
		got := ok(e.svc.Update(e.ctx, e.proj, &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, Name: "renamed",
			LocalAccountID: la2.ResourceID, CustomConfigIDs: []string{cc.ResourceID}}, nil)).get(t).(*eim.Instance)
		if got.Name != "renamed" || len(got.CustomConfigs) != 1 || got.CustomConfigs[0].Name != "cfg" {
			t.Fatalf("PUT: got name %q configs %v", got.Name, got.CustomConfigs)
		}
	})
}

func TestTwoPhaseDelete(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h, o := e.host("h", ""), e.os("ubuntu")
		e.issueCredentials(h.ResourceID)
		in := e.instance(h.ResourceID, o.ResourceID)

		wantErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID), eim.EPRECONDITION, "not being deleted")

		noErr(t, e.svc.InvalidateInstance(e.ctx, e.proj, in.ResourceID))
		if got := e.get(eim.KindInstance, in.ResourceID).(*eim.Instance).DesiredState; got != eim.InstanceStateUntrusted {
			t.Fatalf("invalidate instance: got %s", got)
		}
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		// Phase one: still there, desired DELETED.
		if got := e.get(eim.KindInstance, in.ResourceID).(*eim.Instance).DesiredState; got != eim.InstanceStateDeleted {
			t.Fatalf("after delete: got desired %s, want DELETED", got)
		}
		wantErr(t, e.svc.InvalidateInstance(e.ctx, e.proj, in.ResourceID), eim.EPRECONDITION, "cannot go from INSTANCE_STATE_DELETED")
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID)) // idempotent
		// Phase two.
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		_, err := e.svc.Get(e.ctx, e.proj, eim.KindInstance, in.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID)) // already gone: fine

		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		if got := e.get(eim.KindHost, h.ResourceID).(*eim.Host).DesiredState; got != eim.HostStateDeleted {
			t.Fatalf("host after delete: got %s", got)
		}
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Instance{HostID: h.ResourceID, OSID: o.ResourceID})
		wantErr(t, err, eim.EPRECONDITION, "being deleted")
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		_, err = e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)

		wantErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindSite, "site-0000abcd"), eim.EINVALID)
		wantErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, "host-0000beef"), eim.ENOTFOUND)
		wantErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, "host-XYZ"), eim.EINVALID)
	})
}

func TestImmediateDeletes(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		parent := e.region("parent", "")
		child := e.region("child", parent.ResourceID)
		site := e.site("s", child.ResourceID)
		h := e.host("h", site.ResourceID)
		o := e.os("ubuntu")
		la := e.create(&eim.LocalAccount{Username: "ops", SSHKey: sshKey}).(*eim.LocalAccount)
		cc := e.create(&eim.CustomConfig{Name: "cfg", Config: "#cloud-config"}).(*eim.CustomConfig)
		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: o.ResourceID, LocalAccountID: la.ResourceID, CustomConfigIDs: []string{cc.ResourceID}}).(*eim.Instance)
		sched := e.create(&eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 10, TargetRegionID: parent.ResourceID})

		blocked := []struct {
			name string
			k    eim.Kind
			id   string
			msg  []string
		}{
			{"region with child", eim.KindRegion, parent.ResourceID, []string{"region " + parent.ResourceID + " is in use by", "1 child regions (" + child.ResourceID + ")", "1 single schedules (" + sched.Base().ResourceID + ")"}},
			{"region with site", eim.KindRegion, child.ResourceID, []string{"1 sites (" + site.ResourceID + ")"}},
			{"site with host", eim.KindSite, site.ResourceID, []string{"1 hosts (" + h.ResourceID + ")"}},
			{"os in use", eim.KindOS, o.ResourceID, []string{"OS " + o.ResourceID + " is in use by 1 instances (" + in.ResourceID + ")"}},
			{"account in use", eim.KindLocalAccount, la.ResourceID, []string{"local account", in.ResourceID}},
			{"config in use", eim.KindCustomConfig, cc.ResourceID, []string{"custom config", in.ResourceID}},
		}
		for _, c := range blocked {
			t.Run(c.name, func(t *testing.T) {
				e := e.with(t)
				wantErr(t, e.svc.Delete(e.ctx, e.proj, c.k, c.id), eim.EPRECONDITION, c.msg...)
				e.get(c.k, c.id) // still there
			})
		}
		// A host's schedules go with it; none can be added while it goes.
		h2 := e.host("h2", "")
		e.issueCredentials(h2.ResourceID)
		hs := e.create(&eim.RepeatedSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 60, CronMinutes: "0",
			CronHours: "*", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetHostID: h2.ResourceID})
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h2.ResourceID))
		_, err := e.svc.Create(e.ctx, e.proj, &eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 1, TargetHostID: h2.ResourceID})
		wantErr(t, err, eim.EPRECONDITION, "targetHostId: host "+h2.ResourceID+" is being deleted")
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, h2.ResourceID))
		_, err = e.svc.Get(e.ctx, e.proj, eim.KindRepeatedSchedule, hs.Base().ResourceID)
		wantErr(t, err, eim.ENOTFOUND)

		// Unblock bottom-up; each delete is immediate.
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID)) // nothing to clean up: removed at once
		for _, r := range []struct {
			k  eim.Kind
			id string
		}{
			{eim.KindOS, o.ResourceID}, {eim.KindLocalAccount, la.ResourceID}, {eim.KindCustomConfig, cc.ResourceID},
			{eim.KindSite, site.ResourceID}, {eim.KindRegion, child.ResourceID},
			{eim.KindSingleSchedule, sched.Base().ResourceID}, {eim.KindRegion, parent.ResourceID},
		} {
			noErr(t, e.svc.Delete(e.ctx, e.proj, r.k, r.id))
			_, err := e.svc.Get(e.ctx, e.proj, r.k, r.id)
			wantErr(t, err, eim.ENOTFOUND)
		}
	})
}

// TestDeleteHostWithInstance: deleting a host with an instance is accepted,
// as in the original, and deletes the instance too (two phases each); the
// host goes once its instance is gone.
func TestDeleteHostWithInstance(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		o := e.os("ubuntu")
		for _, invalidated := range []bool{false, true} {
			h := e.host("h", "")
			in := e.instance(h.ResourceID, o.ResourceID)
			if invalidated {
				noErr(t, e.svc.InvalidateInstance(e.ctx, e.proj, in.ResourceID))
			}
			noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
			if got := e.get(eim.KindInstance, in.ResourceID).(*eim.Instance).DesiredState; got != eim.InstanceStateDeleted {
				t.Fatalf("instance after its host's delete: got desired %s, want DELETED", got)
			}
			if got := e.get(eim.KindHost, h.ResourceID).(*eim.Host).DesiredState; got != eim.HostStateDeleted {
				t.Fatalf("host after delete: got desired %s, want DELETED", got)
			}
			noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID)) // idempotent
			wantErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, h.ResourceID), eim.EPRECONDITION, "still has instance "+in.ResourceID)
			noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
			noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, h.ResourceID))
			_, err := e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)
			wantErr(t, err, eim.ENOTFOUND)
		}
	})
}

// TestDeleteThenRegisterAgain: a host with nothing to clean up is removed
// within its delete, so its UUID may be registered again at once; a host
// still being cleaned up keeps its UUID, and the conflict says why.
func TestDeleteThenRegisterAgain(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		for i := range 20 {
			u := newUUID()
			h := ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: u})).get(t)
			noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
			_, err := e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)
			wantErr(t, err, eim.ENOTFOUND)
			if i%2 == 0 {
				ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: u})).get(t)
			} else {
				e.create(&eim.Host{Name: "again", UUID: u})
			}
		}

		h := e.host("onboarded", "")
		e.issueCredentials(h.ResourceID)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		want := h.ResourceID + " with this UUID is being deleted; retry"
		_, err := e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: h.UUID})
		wantErr(t, err, eim.ECONFLICT, want)
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "again", UUID: h.UUID})
		wantErr(t, err, eim.ECONFLICT, want)
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		e.create(&eim.Host{Name: "again", UUID: h.UUID})
	})
}

// TestInstanceNoneRefs: empty optional references mean none, in lists too
// (customConfigID [""] from a client reusing its request object).
func TestInstanceNoneRefs(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h, o := e.host("h", ""), e.os("ubuntu")
		cc := e.create(&eim.CustomConfig{Name: "cfg", Config: "#cloud-config"}).(*eim.CustomConfig)
		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: o.ResourceID, LocalAccountID: "", OSUpdatePolicyID: "",
			CustomConfigIDs: []string{""}}).(*eim.Instance)
		if len(in.CustomConfigIDs) != 0 || in.LocalAccountID != "" {
			t.Errorf("created: customConfigID %q localAccountID %q, want none", in.CustomConfigIDs, in.LocalAccountID)
		}
		ids := []string{"", cc.ResourceID, ""}
		up, err := e.svc.Update(e.ctx, e.proj, &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, CustomConfigIDs: ids}, []string{"customConfigID"})
		noErr(t, err)
		if got := up.(*eim.Instance).CustomConfigIDs; len(got) != 1 || got[0] != cc.ResourceID {
			t.Errorf("patched: customConfigID %q, want [%s]", got, cc.ResourceID)
		}
		if ids[0] != "" || len(ids) != 3 {
			t.Errorf("the caller's list changed: %q", ids)
		}
	})
}
