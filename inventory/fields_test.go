package inventory_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The modules' writes refuse what is wrong, naming it, and write nothing.
func TestModuleWritesValidate(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "h", UUID: newUUID()})).get(t).(*eim.Host)
		o := ok(e.svc.Create(e.ctx, e.proj, &eim.OS{Name: "os", ImageURL: "https://example.com/os.img", Sha256: strings.Repeat("a", 64),
			ProfileName: "p", SecurityFeature: "SECURITY_FEATURE_NONE"})).get(t).(*eim.OS)
		in := ok(e.svc.Create(e.ctx, e.proj, &eim.Instance{Name: "i", HostID: h.ResourceID, OSID: o.ResourceID})).get(t).(*eim.Instance)
		long := strings.Repeat("x", 1025)
		for _, tc := range []struct {
			name, want string
			code       string
			fn         func(tx eim.Tx) error
		}{
			{"status indicator", "hostStatusIndicator", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetHostStatus(e.ctx, tx, h, inventory.Status{Text: "Running", Indicator: "STATUS_INDICATION_OK"})
			}},
			{"status too long", "hostStatus", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetHostStatus(e.ctx, tx, h, inventory.Status{Text: long})
			}},
			{"status not UTF-8", "hostStatus", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetHostStatus(e.ctx, tx, h, inventory.Status{Text: "\xff"})
			}},
			{"hardware digest", "hardwareDigest", eim.EINVALID, func(tx eim.Tx) error {
				hw := *h
				hw.HardwareDigest = "md5:1"
				return inventory.RecordHardware(e.ctx, tx, &hw, h.HardwareDigest, eim.NewTime(time.Now()))
			}},
			{"hardware enum", "hostNics[0].ipaddresses[0].status", eim.EINVALID, func(tx eim.Tx) error {
				hw := *h
				hw.HardwareDigest = "sha256:" + strings.Repeat("0", 64)
				hw.HostNics = eim.List[eim.HostNic]{{DeviceName: "eth0", IPAddresses: eim.List[eim.IPAddress]{{Address: "10.0.0.1/8", Status: "FINE"}}}}
				return inventory.RecordHardware(e.ctx, tx, &hw, h.HardwareDigest, eim.NewTime(time.Now()))
			}},
			{"provisioning indicator", "provisioningStatusIndicator", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetProvisioningStatus(e.ctx, tx, in, inventory.Status{Indicator: "x"})
			}},
			{"update status", "updateStatus", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetUpdateStatus(e.ctx, tx, in, inventory.Status{Text: long})
			}},
			{"attestation status", "trustedAttestationStatus", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetAttestationStatus(e.ctx, tx, in, inventory.Status{Text: long})
			}},
			{"attestation indicator", "trustedAttestationStatusIndicator", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetAttestationStatus(e.ctx, tx, in, inventory.Status{Text: "Verified", Indicator: "STATUS_INDICATION_OK"})
			}},
			{"OS switch", "osID", eim.EINVALID, func(tx eim.Tx) error { return inventory.SwitchInstanceOS(e.ctx, tx, in, "host-12345678") }},
			{"update available", "osUpdateAvailable", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.SetOSUpdateAvailable(e.ctx, tx, in, long)
			}},
			{"workflow state", "state", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.CreateWorkflow(e.ctx, tx, &eim.Workflow{Meta: eim.Meta{Project: e.proj}, InstanceID: in.ResourceID, HostID: h.ResourceID, Attempt: 1, State: "DONE"})
			}},
			{"workflow instance", "instanceId", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.CreateWorkflow(e.ctx, tx, &eim.Workflow{Meta: eim.Meta{Project: e.proj}, HostID: h.ResourceID, Attempt: 1, State: eim.WorkflowPending})
			}},
			{"workflow action", "actions[0].state", eim.EINVALID, func(tx eim.Tx) error {
				return inventory.CreateWorkflow(e.ctx, tx, &eim.Workflow{Meta: eim.Meta{Project: e.proj}, InstanceID: in.ResourceID, HostID: h.ResourceID,
					Attempt: 1, State: eim.WorkflowPending, Actions: []eim.WorkflowAction{{Name: "a", State: "maybe"}}})
			}},
			{"catalog OS", "sha256", eim.EINVALID, func(tx eim.Tx) error {
				bad := *o
				bad.Sha256 = "nope"
				return inventory.UpdateCatalogOS(e.ctx, tx, &bad)
			}},
		} {
			err := e.store.Update(e.ctx, e.proj, tc.fn)
			if eim.ErrorCode(err) != tc.code || !strings.Contains(eim.ErrorMessage(err), tc.want) {
				t.Errorf("%s: got %v, want %s naming %q", tc.name, err, tc.code, tc.want)
			}
		}
		got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host)
		if got.HostStatus != h.HostStatus || got.Hostname != h.Hostname || got.RegistrationStatus != h.RegistrationStatus || got.NodeCredGen != h.NodeCredGen {
			t.Errorf("host after refused writes: %+v, want it unchanged", got)
		}
	})
}

// A module writes its fields and only those: a host it read before the
// API renamed it keeps the new name; its write of a status it read stale
// (another module set its own since) is not made, and its transaction
// runs again on the status as it is.
func TestModuleWritesKeepOthersFields(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "before", UUID: newUUID()})).get(t).(*eim.Host)
		stale := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host)
		staler := *stale // SetHostStatus brings stale up to date
		ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "renamed"}, []string{"name"})).get(t)
		err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			return inventory.SetHostStatus(e.ctx, tx, stale, inventory.StatusAt("Running", eim.StatusIdle, time.Now()))
		})
		if err != nil {
			t.Fatalf("status over a stale copy of other fields: %v", err)
		}
		got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host)
		if got.Name != "renamed" || got.HostStatus != "Running" {
			t.Fatalf("host: name %q status %q, want renamed and Running", got.Name, got.HostStatus)
		}

		// Another module's status since the read: not written over.
		var runs atomic.Int32
		err = e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			h := &staler // first run: the status read before "Running" was set
			if runs.Add(1) > 1 {
				r, err := tx.Get(e.ctx, eim.KindHost, stale.ResourceID)
				if err != nil {
					return err
				}
				h = r.(*eim.Host)
			}
			if h.HostStatus != staler.HostStatus {
				return nil // not what it decided on: leave it
			}
			return inventory.SetHostStatus(e.ctx, tx, h, inventory.StatusAt("No Connection", eim.StatusError, time.Now()))
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host); got.HostStatus != "Running" || runs.Load() != 2 {
			t.Fatalf("status %q after %d runs; want Running kept and the transaction run again once", got.HostStatus, runs.Load())
		}
	})
}

// The attestation status is written with its indicator and time, and
// nothing else of the instance: not its name, which the API changed after
// the module read it.
func TestSetAttestationStatus(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "h", UUID: newUUID()})).get(t).(*eim.Host)
		o := ok(e.svc.Create(e.ctx, e.proj, &eim.OS{Name: "os", ImageURL: "https://example.com/os.img", Sha256: strings.Repeat("a", 64),
			ProfileName: "p", SecurityFeature: "SECURITY_FEATURE_NONE"})).get(t).(*eim.OS)
		in := ok(e.svc.Create(e.ctx, e.proj, &eim.Instance{Name: "before", HostID: h.ResourceID, OSID: o.ResourceID})).get(t).(*eim.Instance)
		ok(e.svc.Update(e.ctx, e.proj, &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, Name: "renamed"}, []string{"name"})).get(t)
		at := time.Unix(1767225600, 0)
		err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			return inventory.SetAttestationStatus(e.ctx, tx, in, inventory.StatusAt("Mismatch: PCR 4: unexpected boot code", eim.StatusError, at))
		})
		if err != nil {
			t.Fatal(err)
		}
		got := ok(e.svc.Get(e.ctx, e.proj, eim.KindInstance, in.ResourceID)).get(t).(*eim.Instance)
		if got.Name != "renamed" || got.TrustedAttestationStatus != "Mismatch: PCR 4: unexpected boot code" ||
			got.TrustedAttestationStatusIndicator != eim.StatusError || got.TrustedAttestationStatusTimestamp != uint64(at.Unix()) {
			t.Fatalf("got name %q, attestation %q %s %d; want renamed, the mismatch, ERROR, %d", got.Name, got.TrustedAttestationStatus,
				got.TrustedAttestationStatusIndicator, got.TrustedAttestationStatusTimestamp, at.Unix())
		}
	})
}

// The Secure Boot state a node reports is written with when it was read,
// and nothing else of the host; an unchanged state only once its recorded
// time is SecureBootRefresh old; UNSPECIFIED never (it would hide what was
// reported); a value that is not a state is refused, naming the field. The
// API shows it and ignores it in a write.
func TestRecordSecureBoot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "before", UUID: newUUID()})).get(t).(*eim.Host)
		if h.SecureBootState != eim.SecureBootStateUnspecified || h.SecureBootStateTimestamp != 0 {
			t.Fatalf("a new host: %q at %d, want UNSPECIFIED at 0", h.SecureBootState, h.SecureBootStateTimestamp)
		}
		ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "renamed"}, []string{"name"})).get(t)
		record := func(state eim.SecureBootState, at uint64) (int64, error) {
			before, err := e.store.Revision(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
				return inventory.RecordSecureBoot(e.ctx, tx, h, state, at)
			})
			after, rerr := e.store.Revision(e.ctx)
			if rerr != nil {
				t.Fatal(rerr)
			}
			return after - before, err
		}
		const t0 = 1767225600
		for _, c := range []struct {
			state  eim.SecureBootState
			at     uint64
			writes bool
			want   eim.SecureBootState
			wantAt uint64
		}{
			{eim.SecureBootStateEnabled, t0, true, eim.SecureBootStateEnabled, t0},
			{eim.SecureBootStateEnabled, t0 + 30, false, eim.SecureBootStateEnabled, t0},
			{eim.SecureBootStateUnspecified, t0 + 40, false, eim.SecureBootStateEnabled, t0},
			{eim.SecureBootStateEnabled, t0 + inventory.SecureBootRefresh, true, eim.SecureBootStateEnabled, t0 + inventory.SecureBootRefresh},
			{eim.SecureBootStateSetupMode, t0 + inventory.SecureBootRefresh + 1, true, eim.SecureBootStateSetupMode, t0 + inventory.SecureBootRefresh + 1},
		} {
			n, err := record(c.state, c.at)
			if err != nil {
				t.Fatalf("%s at %d: %v", c.state, c.at, err)
			}
			if (n > 0) != c.writes {
				t.Errorf("%s at %d: %d revisions written, want a write: %v", c.state, c.at, n, c.writes)
			}
			got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host)
			if got.Name != "renamed" || got.SecureBootState != c.want || got.SecureBootStateTimestamp != c.wantAt {
				t.Errorf("%s at %d: got name %q, %q at %d; want renamed, %q at %d", c.state, c.at, got.Name, got.SecureBootState, got.SecureBootStateTimestamp, c.want, c.wantAt)
			}
		}
		_, err := record("SECURE_BOOT_STATE_MAYBE", t0+2000)
		wantErr(t, err, eim.EINVALID, "secureBootState", "SECURE_BOOT_STATE_MAYBE")
		// A client writing the read-only field: ignored.
		ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "again", SecureBootState: eim.SecureBootStateDisabled}, []string{"name"})).get(t)
		if got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host); got.SecureBootState != eim.SecureBootStateSetupMode {
			t.Errorf("after an API write: %q, want SETUP_MODE kept", got.SecureBootState)
		}
	})
}

// The API renaming hosts while a module records their statuses, at once:
// nothing is lost, and no transaction of either is run again (on
// PostgreSQL, where they overlap; SQLite has one writer).
func TestAPIAndModuleWritesDoNotRace(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		const hosts, rounds = 8, 40
		ids := make([]string, hosts)
		for i := range ids {
			ids[i] = ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "h", UUID: newUUID()})).get(t).(*eim.Host).ResourceID
		}
		races := func() int64 {
			if r, ok := e.store.(interface{ Races() int64 }); ok {
				return r.Races()
			}
			return 0
		}
		before := races()
		var moduleRuns atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for k := range rounds {
				for _, id := range ids {
					err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
						moduleRuns.Add(1)
						r, err := tx.Get(e.ctx, eim.KindHost, id)
						if err != nil {
							return err
						}
						return inventory.SetHostStatus(e.ctx, tx, r.(*eim.Host), inventory.Status{Text: fmt.Sprint("Running ", k), Indicator: eim.StatusIdle})
					})
					if err != nil {
						t.Errorf("module: %v", err)
						return
					}
				}
			}
		})
		wg.Go(func() {
			for k := range rounds {
				for _, id := range ids {
					if _, err := e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: id}, Name: fmt.Sprint("n", k)}, []string{"name"}); err != nil {
						t.Errorf("API: %v", err)
						return
					}
				}
			}
		})
		wg.Wait()
		for _, id := range ids {
			got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, id)).get(t).(*eim.Host)
			if want := fmt.Sprint("n", rounds-1); got.Name != want || got.HostStatus != fmt.Sprint("Running ", rounds-1) {
				t.Errorf("host %s: name %q, status %q; want %s and Running %d", id, got.Name, got.HostStatus, want, rounds-1)
			}
		}
		if n := races() - before; n != 0 || moduleRuns.Load() != hosts*rounds {
			t.Errorf("%d transactions run again, the module's ran %d times for %d writes; want none again", n, moduleRuns.Load(), hosts*rounds)
		}
	})
}
