package storetest

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim"
)

// countingViewer counts the read-only transactions it runs.
type countingViewer struct {
	s eim.Store
	n atomic.Int64
}

func (v *countingViewer) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	v.n.Add(1)
	return v.s.View(ctx, project, fn)
}

// foreignViewer gives a transaction that is not the store's.
type foreignViewer struct{}

func (foreignViewer) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return fn(nil)
}

// testHostFacts: the per-host view's reads give, of hosts and instances,
// exactly what the whole rows have of the fields they hold (every one of
// them set), by IDs (scoped to a project or not, the missing ones left
// out) and in pages of the fleet in ID order, each in a transaction of
// the viewer given.
func testHostFacts(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	site := create(t, s, p1, &eim.Site{Name: "s"}).(*eim.Site)
	os := create(t, s, p1, &eim.OS{Name: "os"}).(*eim.OS)
	full := create(t, s, p1, &eim.Host{Name: "full", SiteID: site.ResourceID,
		SerialNumber: "SNFULL01", UUID: "4c4c4544-0000-4000-8000-00000000ff01", Hostname: "full.local",
		BootID: "boot-1", HardwareDigest: "digest-1", NodeSecretHash: strings.Repeat("cd", 32), NodeCredGen: 3,
		DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded,
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: 11,
		OnboardingStatus: "Onboarded", OnboardingStatusIndicator: eim.StatusIdle, OnboardingStatusTimestamp: 12,
		RegistrationStatus: "Host is Registered", RegistrationStatusIndicator: eim.StatusInProgress, RegistrationStatusTimestamp: 13,
		BmcKind: eim.BaremetalControllerKindIPMI, DesiredPowerState: eim.PowerStateOn, CurrentPowerState: eim.PowerStateOff,
		PowerStatus: "Powered off", PowerStatusIndicator: eim.StatusError, PowerStatusTimestamp: 14}).(*eim.Host)
	bare := create(t, s, p2, &eim.Host{Name: "bare"}).(*eim.Host)
	inst := create(t, s, p1, &eim.Instance{Name: "i", HostID: full.ResourceID, OSID: os.ResourceID,
		CurrentState: eim.InstanceStateRunning, InstanceStatusTimestamp: 21,
		ProvisioningStatus: "Provisioned", ProvisioningStatusIndicator: eim.StatusIdle, ProvisioningStatusTimestamp: 22,
		UpdateStatus: "Updating", UpdateStatusIndicator: eim.StatusInProgress, UpdateStatusTimestamp: 23,
		OsUpdateAvailable: "emt 3.1"}).(*eim.Instance)
	lone := create(t, s, p2, &eim.Instance{Name: "lone"}).(*eim.Instance)

	hostRow := func(p, id string) eim.HostRow {
		t.Helper()
		r, err := get(t, s, p, eim.KindHost, id)
		if err != nil {
			t.Fatal(err)
		}
		return eim.HostRowOf(r.(*eim.Host))
	}
	instRow := func(p, id string) eim.InstanceRow {
		t.Helper()
		r, err := get(t, s, p, eim.KindInstance, id)
		if err != nil {
			t.Fatal(err)
		}
		return eim.InstanceRowOf(r.(*eim.Instance))
	}
	wantFull, wantBare := hostRow(p1, full.ResourceID), hostRow(p2, bare.ResourceID)
	if wantFull.SiteID == "" || wantFull.CreatedAt == 0 || wantFull.Status.Timestamp != 11 || wantFull.PowerStatusTimestamp != 14 {
		t.Fatalf("the whole row lacks what was written: %+v", wantFull)
	}
	wantInst, wantLone := instRow(p1, inst.ResourceID), instRow(p2, lone.ResourceID)
	if !wantInst.UpdateAvailable || wantInst.OSID == "" || wantInst.Update.Timestamp != 23 {
		t.Fatalf("the whole instance row lacks what was written: %+v", wantInst)
	}

	v := &countingViewer{s: s}
	f := s.HostFacts(v)
	byID := func(rows []eim.HostRow) map[string]eim.HostRow {
		m := map[string]eim.HostRow{}
		for _, r := range rows {
			m[r.ID] = r
		}
		return m
	}
	rows, err := f.Hosts(ctx(t), "", []string{bare.ResourceID, "host-00000000", full.ResourceID})
	if err != nil {
		t.Fatal(err)
	}
	if got := byID(rows); len(rows) != 2 || got[full.ResourceID] != wantFull || got[bare.ResourceID] != wantBare {
		t.Errorf("Hosts of both and a missing one:\n got %+v\nwant %+v\n and %+v", rows, wantFull, wantBare)
	}
	if n := v.n.Load(); n != 1 {
		t.Errorf("Hosts ran %d transactions of the viewer, want 1", n)
	}
	rows, err = f.Hosts(ctx(t), p2, []string{full.ResourceID, bare.ResourceID})
	if err != nil || len(rows) != 1 || rows[0] != wantBare {
		t.Errorf("Hosts in %s: got %+v, %v; want only %s", p2, rows, err, bare.ResourceID)
	}
	if rows, err := f.Hosts(ctx(t), p1, nil); err != nil || len(rows) != 0 {
		t.Errorf("Hosts of no IDs: got %+v, %v; want none", rows, err)
	}

	// Pages, in ID order, of every project.
	ids := []string{full.ResourceID, bare.ResourceID}
	slices.Sort(ids)
	var paged []eim.HostRow
	for after := ""; ; {
		page, err := f.HostsAfter(ctx(t), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 1 {
			t.Fatalf("HostsAfter(%q, 1): %d rows", after, len(page))
		}
		paged = append(paged, page...)
		after = page[0].ID
	}
	if len(paged) != 2 || paged[0].ID != ids[0] || paged[1].ID != ids[1] || byID(paged)[full.ResourceID] != wantFull {
		t.Errorf("HostsAfter, one by one: got %+v, want %v in order", paged, ids)
	}
	if page, err := f.HostsAfter(ctx(t), "", 10); err != nil || len(page) != 2 {
		t.Errorf("HostsAfter(\"\", 10): got %d rows, %v; want 2", len(page), err)
	}

	irows, err := f.Instances(ctx(t), []string{inst.ResourceID, lone.ResourceID, "inst-00000000"})
	if err != nil {
		t.Fatal(err)
	}
	gotInst := map[string]eim.InstanceRow{}
	for _, r := range irows {
		gotInst[r.ID] = r
	}
	if len(irows) != 2 || gotInst[inst.ResourceID] != wantInst || gotInst[lone.ResourceID] != wantLone {
		t.Errorf("Instances:\n got %+v\nwant %+v\n and %+v", irows, wantInst, wantLone)
	}
	ipage, err := f.InstancesAfter(ctx(t), "", 10)
	if err != nil || len(ipage) != 2 || ipage[0].ID > ipage[1].ID {
		t.Errorf("InstancesAfter(\"\", 10): got %+v, %v; want both in ID order", ipage, err)
	}
	if ipage, err := f.InstancesAfter(ctx(t), ipage[0].ID, 10); err != nil || len(ipage) != 1 {
		t.Errorf("InstancesAfter the first: got %+v, %v; want one", ipage, err)
	}

	// A change is read as it is now.
	update(t, s, p1, func(tx eim.Tx) error {
		return tx.UpdateFields(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: full.ResourceID}, HostStatus: "Error", HostStatusIndicator: eim.StatusError, HostStatusTimestamp: 30},
			"hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
	})
	if rows, err := f.Hosts(ctx(t), p1, []string{full.ResourceID}); err != nil || len(rows) != 1 || rows[0] != hostRow(p1, full.ResourceID) || rows[0].Status.Text != "Error" {
		t.Errorf("Hosts after a change: got %+v, %v; want the row as changed", rows, err)
	}

	_, err = s.HostFacts(foreignViewer{}).Hosts(ctx(t), "", []string{full.ResourceID})
	wantCode(t, err, eim.EINTERNAL)
	if rows, err := s.HostFacts(nil).Hosts(ctx(t), "", []string{full.ResourceID}); err != nil || len(rows) != 1 {
		t.Errorf("Hosts through the store's own View: got %+v, %v", rows, err)
	}
}
