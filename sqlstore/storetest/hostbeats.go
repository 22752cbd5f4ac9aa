package storetest

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim"
)

// countingRunner runs each transaction through the store's Update and
// counts them.
type countingRunner struct {
	s eim.Store
	n atomic.Int64
}

func (r *countingRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	r.n.Add(1)
	return r.s.Update(ctx, project, fn)
}

// testHostBeats: the host module's typed operations read a host's
// liveness, write only what the decision changes, through the runner
// given, and record the write as a field write of the same fields does
// (the same event, the same audit record).
func testHostBeats(t *testing.T, s eim.Store) {
	p := project(t, s)
	run := &countingRunner{s: s}
	hb := s.HostBeats(run)
	hostMod := eim.WithActor(ctx(t), eim.ModuleActor("host"))
	base := func(name string) *eim.Host {
		return create(t, s, p, &eim.Host{Name: name, HostStatus: "Not Connected", HostStatusIndicator: eim.StatusUnspecified,
			BmcKind: eim.BaremetalControllerKindNone, DesiredPowerState: eim.PowerStateReset, CurrentPowerState: eim.PowerStateOn,
			HardwareDigest: "sha256:" + strings.Repeat("a", 64)}).(*eim.Host)
	}
	typed, generic := base("typed"), base("generic")

	// What the decision is given.
	var seen eim.HostLiveness
	running := eim.StatusValue{Text: "Running", Indicator: eim.StatusIdle, Timestamp: 1700000000}
	after, err := hb.RecordBeat(hostMod, p, typed.ResourceID, func(l eim.HostLiveness) eim.LivenessChange {
		seen = l
		return eim.LivenessChange{Status: &running}
	})
	if err != nil {
		t.Fatalf("RecordBeat: %v", err)
	}
	want := eim.HostLiveness{ID: typed.ResourceID, Project: p,
		Status:  eim.StatusValue{Text: "Not Connected", Indicator: eim.StatusUnspecified},
		Power:   eim.HostPower{Current: eim.PowerStateOn},
		BmcKind: eim.BaremetalControllerKindNone, DesiredPowerState: eim.PowerStateReset, HardwareDigest: typed.HardwareDigest}
	if seen.Power.Status.Indicator == "" {
		want.Power.Status.Indicator = "" // a host created without one
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("decide was given %+v, want %+v", seen, want)
	}
	want.Status = running
	if !reflect.DeepEqual(after, want) {
		t.Errorf("RecordBeat returned %+v, want %+v", after, want)
	}
	if run.n.Load() == 0 {
		t.Errorf("the runner ran no transaction")
	}
	// The same write as the field write a module made before.
	update(t, s, p, func(tx eim.Tx) error {
		w := &eim.Host{Meta: eim.Meta{ResourceID: generic.ResourceID}, HostStatus: running.Text, HostStatusIndicator: running.Indicator, HostStatusTimestamp: running.Timestamp}
		return tx.UpdateFieldsIf(hostMod, w, []eim.Cond{{Field: "hostStatus", Value: "Not Connected"}, {Field: "hostStatusIndicator", Value: eim.StatusUnspecified}},
			"hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
	})
	r, err := get(t, s, p, eim.KindHost, typed.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	got := r.(*eim.Host)
	if got.HostStatus != "Running" || got.HostStatusIndicator != eim.StatusIdle || got.HostStatusTimestamp != running.Timestamp ||
		got.Name != "typed" || got.CurrentPowerState != eim.PowerStateOn || got.HardwareDigest != typed.HardwareDigest {
		t.Errorf("stored host: got status %q %q %d, name %q, power %q; want Running IDLE %d, the rest unchanged",
			got.HostStatus, got.HostStatusIndicator, got.HostStatusTimestamp, got.Name, got.CurrentPowerState, running.Timestamp)
	}
	if !got.Timestamps.UpdatedAt.After(typed.Timestamps.UpdatedAt.Time) {
		t.Errorf("updatedAt: got %v, want after %v", got.Timestamps.UpdatedAt, typed.Timestamps.UpdatedAt)
	}
	recs, _ := audit(t, s, p, eim.AuditQuery{Filter: `action="UPDATED"`})
	byID := map[string]eim.AuditRecord{}
	for _, r := range recs {
		byID[r.ResourceID] = r
	}
	tr, gr := byID[typed.ResourceID], byID[generic.ResourceID]
	if tr.Principal != "module:host" || tr.Kind != eim.KindHost || changesJSON(tr.Changes) != changesJSON(gr.Changes) || gr.Principal != tr.Principal {
		t.Errorf("audit record: got %s %s %s, want as the field write's: %s %s %s", tr.Principal, tr.Kind, changesJSON(tr.Changes), gr.Principal, gr.Kind, changesJSON(gr.Changes))
	}
	if string(tr.Changes["hostStatus"].Old) != `"Not Connected"` || string(tr.Changes["hostStatus"].New) != `"Running"` {
		t.Errorf("audit changes: got %s, want hostStatus \"Not Connected\" → \"Running\"", changesJSON(tr.Changes))
	}
	evs, err := s.Events(ctx(t), 0, 1000, eim.KindHost)
	if err != nil {
		t.Fatal(err)
	}
	updated := 0
	for _, ev := range evs {
		if ev.ID == typed.ResourceID && ev.Op == eim.OpUpdated && ev.Project == p {
			updated++
		}
	}
	if updated != 1 {
		t.Errorf("feed: got %d update events of the host, want 1", updated)
	}

	// Nothing to change: nothing written, no event.
	rev, _ := s.Revision(ctx(t))
	after, err = hb.RecordBeat(hostMod, p, typed.ResourceID, func(l eim.HostLiveness) eim.LivenessChange { return eim.LivenessChange{} })
	if err != nil || after.Status != running {
		t.Fatalf("RecordBeat without a change: got %+v, %v; want the status as stored", after.Status, err)
	}
	if rev2, _ := s.Revision(ctx(t)); rev2 != rev {
		t.Errorf("revision after no change: got %d, want %d", rev2, rev)
	}

	// Power and status together.
	rebooting := eim.HostPower{Current: eim.PowerStateReset, Status: eim.StatusValue{Text: "Rebooting", Indicator: eim.StatusInProgress, Timestamp: 1700000100}}
	st := eim.StatusValue{Text: "Rebooting", Indicator: eim.StatusInProgress, Timestamp: 1700000100}
	after, err = hb.RecordBeat(hostMod, p, typed.ResourceID, func(eim.HostLiveness) eim.LivenessChange {
		return eim.LivenessChange{Status: &st, Power: &rebooting}
	})
	if err != nil || after.Power != rebooting || after.Status != st {
		t.Fatalf("RecordBeat of power: got %+v, %v", after, err)
	}
	r, _ = get(t, s, p, eim.KindHost, typed.ResourceID)
	if got := r.(*eim.Host); got.CurrentPowerState != eim.PowerStateReset || got.PowerStatus != "Rebooting" || got.PowerStatusIndicator != eim.StatusInProgress ||
		got.PowerStatusTimestamp != 1700000100 || got.HostStatus != "Rebooting" || got.DesiredPowerState != eim.PowerStateReset {
		t.Errorf("stored power: got %q %q %q %d, status %q", got.CurrentPowerState, got.PowerStatus, got.PowerStatusIndicator, got.PowerStatusTimestamp, got.HostStatus)
	}

	// Bad changes are refused, naming the field; nothing is written.
	for _, tc := range []struct {
		ch    eim.LivenessChange
		field string
	}{
		{eim.LivenessChange{Status: &eim.StatusValue{Text: "x", Indicator: "BOGUS"}}, "hostStatusIndicator"},
		{eim.LivenessChange{Status: &eim.StatusValue{Text: strings.Repeat("x", eim.MaxStatusText+1), Indicator: eim.StatusIdle}}, "hostStatus"},
		{eim.LivenessChange{Status: &eim.StatusValue{Text: "\xff", Indicator: eim.StatusIdle}}, "hostStatus"},
		{eim.LivenessChange{Power: &eim.HostPower{Current: "HALF_ON", Status: eim.StatusValue{Indicator: eim.StatusIdle}}}, "currentPowerState"},
		{eim.LivenessChange{Power: &eim.HostPower{Current: eim.PowerStateOn, Status: eim.StatusValue{Indicator: "IDLE"}}}, "powerStatusIndicator"},
	} {
		_, err := hb.RecordBeat(hostMod, p, typed.ResourceID, func(eim.HostLiveness) eim.LivenessChange { return tc.ch })
		wantCode(t, err, eim.EINVALID)
		if !strings.HasPrefix(eim.ErrorMessage(err), tc.field+":") {
			t.Errorf("error: got %q, want it to name %s", eim.ErrorMessage(err), tc.field)
		}
	}
	if r, _ = get(t, s, p, eim.KindHost, typed.ResourceID); r.(*eim.Host).HostStatus != "Rebooting" {
		t.Errorf("status after refused changes: got %q, want Rebooting", r.(*eim.Host).HostStatus)
	}

	// A status without an indicator is stored as unspecified, as the
	// inventory's writes store it.
	after, err = hb.RecordBeat(hostMod, p, typed.ResourceID, func(eim.HostLiveness) eim.LivenessChange {
		return eim.LivenessChange{Power: &eim.HostPower{Current: eim.PowerStateOn}}
	})
	if err != nil || after.Power.Status.Indicator != eim.StatusUnspecified {
		t.Errorf("power without an indicator: got %+v, %v; want STATUS_INDICATION_UNSPECIFIED", after.Power, err)
	}
	if r, _ = get(t, s, p, eim.KindHost, typed.ResourceID); r.(*eim.Host).PowerStatusIndicator != eim.StatusUnspecified {
		t.Errorf("stored power status indicator: got %q, want STATUS_INDICATION_UNSPECIFIED", r.(*eim.Host).PowerStatusIndicator)
	}

	// A host that is not there, or not the project's.
	decideNothing := func(eim.HostLiveness) eim.LivenessChange { return eim.LivenessChange{} }
	_, err = hb.RecordBeat(hostMod, p, "host-0000abcd", decideNothing)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = hb.RecordBeat(hostMod, project(t, s), typed.ResourceID, decideNothing)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = hb.RecordBeat(hostMod, p, "not-an-id", decideNothing)
	wantCode(t, err, eim.EINVALID)

	// A silence sees the update of the host's instance.
	var silent eim.HostLiveness
	if _, err := hb.RecordSilence(hostMod, p, generic.ResourceID, func(l eim.HostLiveness) eim.LivenessChange { silent = l; return eim.LivenessChange{} }); err != nil {
		t.Fatal(err)
	}
	if silent.Updating || silent.Status != running {
		t.Errorf("silence without an instance: got %+v, want not updating, Running", silent)
	}
	create(t, s, p, &eim.Instance{Name: "i", HostID: generic.ResourceID, UpdateStatus: "Updating", UpdateStatusIndicator: eim.StatusInProgress, UpdateStatusTimestamp: 1700000050})
	if _, err := hb.RecordSilence(hostMod, p, generic.ResourceID, func(l eim.HostLiveness) eim.LivenessChange { silent = l; return eim.LivenessChange{} }); err != nil {
		t.Fatal(err)
	}
	if !silent.Updating || silent.UpdateTimestamp != 1700000050 {
		t.Errorf("silence of an updating host: got updating %v since %d, want true since 1700000050", silent.Updating, silent.UpdateTimestamp)
	}

	// Concurrent decisions on one host each see the one before's write:
	// a counter kept in the status timestamp loses no increment.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := hb.RecordBeat(ctx(t), p, generic.ResourceID, func(l eim.HostLiveness) eim.LivenessChange {
				next := l.Status
				next.Timestamp++
				return eim.LivenessChange{Status: &next}
			})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent RecordBeat: %v", err)
	}
	r, _ = get(t, s, p, eim.KindHost, generic.ResourceID)
	if got := r.(*eim.Host).HostStatusTimestamp; got != running.Timestamp+16 {
		t.Errorf("after 16 concurrent increments: got %d, want %d", got, running.Timestamp+16)
	}

	// Hosts by status, oldest first, up to a time.
	for i, ts := range []uint64{300, 100, 200, 900} {
		h := base("r" + string(rune('a'+i)))
		st := eim.StatusValue{Text: "Rebooting", Indicator: eim.StatusInProgress, Timestamp: ts}
		if _, err := hb.RecordBeat(ctx(t), p, h.ResourceID, func(eim.HostLiveness) eim.LivenessChange { return eim.LivenessChange{Status: &st} }); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := hb.HostsInStatus(ctx(t), p, "Rebooting", 300, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var stamps []uint64
	for _, l := range ls {
		stamps = append(stamps, l.Status.Timestamp)
	}
	if !reflect.DeepEqual(stamps, []uint64{100, 200, 300}) {
		t.Errorf("HostsInStatus: got timestamps %v, want [100 200 300]", stamps)
	}
	if ls, err := hb.HostsInStatus(ctx(t), p, "Rebooting", 300, 1, 1); err != nil || len(ls) != 1 || ls[0].Status.Timestamp != 200 {
		t.Errorf("HostsInStatus offset 1 limit 1: got %+v, %v; want the host of 200", ls, err)
	}
	_, err = hb.HostsInStatus(ctx(t), p, "Rebooting", 300, 0, 0)
	wantCode(t, err, eim.EINVALID)

	// A runner over another store is refused, not trusted.
	foreign := s.HostBeats(foreignRunner{})
	_, err = foreign.RecordBeat(ctx(t), p, typed.ResourceID, decideNothing)
	wantCode(t, err, eim.EINTERNAL)
}

// foreignRunner gives a transaction that is not the store's.
type foreignRunner struct{}

func (foreignRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return fn(nil)
}
