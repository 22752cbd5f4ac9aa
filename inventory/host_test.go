package inventory_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func TestCreateHostDefaults(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		u := strings.ToUpper(newUUID())
		in := &eim.Host{Name: "edge-1", UUID: u,
			// Read-only fields the API may not set: ignored.
			DesiredState: eim.HostStateUntrusted, Note: "x", SerialNumber: "SER12345", HostStatus: "Running", CPUCores: 8}
		h := e.create(in).(*eim.Host)
		checks := []struct{ name, got, want string }{
			{"desiredState", string(h.DesiredState), string(eim.HostStateOnboarded)},
			{"currentState", string(h.CurrentState), string(eim.HostStateUnspecified)},
			{"desiredPowerState", string(h.DesiredPowerState), string(eim.PowerStateOn)},
			{"powerCommandPolicy", string(h.PowerCommandPolicy), string(eim.PowerCommandPolicyOrdered)},
			{"hostStatus", h.HostStatus, "Not Connected"},
			{"hostStatusIndicator", string(h.HostStatusIndicator), string(eim.StatusUnspecified)},
			{"onboardingStatus", h.OnboardingStatus, "Not Connected"},
			{"registrationStatus", h.RegistrationStatus, "Unknown"},
			{"desiredAmtState", string(h.DesiredAmtState), string(eim.AmtStateUnspecified)},
			{"uuid", h.UUID, u}, // as written
			{"note", h.Note, ""},
			{"serialNumber", h.SerialNumber, ""},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
			}
		}
		if h.CPUCores != 0 {
			t.Errorf("cpuCores: got %d, want 0 (read-only)", h.CPUCores)
		}
		if !eim.ValidID(eim.KindHost, h.ResourceID) {
			t.Errorf("resourceId: got %q", h.ResourceID)
		}

		_, err := e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "no-uuid"})
		wantErr(t, err, eim.EINVALID, "uuid")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "bad;name", UUID: newUUID()})
		wantErr(t, err, eim.EINVALID, "name:")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "h", UUID: newUUID(), SiteID: "site-0000abcd"})
		wantErr(t, err, eim.ENOTFOUND, "siteId: site-0000abcd not found")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "dup", UUID: u})
		wantErr(t, err, eim.ECONFLICT)
		_, err = e.svc.Create(e.ctx, "", &eim.Host{Name: "h", UUID: newUUID()})
		wantErr(t, err, eim.EINVALID, "project")
	})
}

func TestRegisterHost(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		cases := []struct {
			name      string
			reg       inventory.HostRegistration
			wantState eim.HostState
			wantAmt   eim.AmtState
			code, msg string
		}{
			{"serial", inventory.HostRegistration{Name: "r1", SerialNumber: "SER00001"}, eim.HostStateRegistered, eim.AmtStateUnspecified, "", ""},
			{"uuid", inventory.HostRegistration{UUID: newUUID()}, eim.HostStateRegistered, eim.AmtStateUnspecified, "", ""},
			{"auto", inventory.HostRegistration{SerialNumber: "SER00002", AutoOnboard: true}, eim.HostStateOnboarded, eim.AmtStateUnspecified, "", ""},
			{"vpro", inventory.HostRegistration{SerialNumber: "SER00003", EnableVpro: true}, eim.HostStateRegistered, eim.AmtStateProvisioned, "", ""},
			{"neither", inventory.HostRegistration{Name: "x"}, "", "", eim.EINVALID, "uuid: a uuid or a serialNumber is required"},
			{"bad serial", inventory.HostRegistration{SerialNumber: "To Be Filled"}, "", "", eim.EINVALID, "serialNumber"},
			{"bad uuid", inventory.HostRegistration{UUID: "1234"}, "", "", eim.EINVALID, "uuid"},
			{"long name", inventory.HostRegistration{Name: strings.Repeat("n", 21), SerialNumber: "SER00004"}, "", "", eim.EINVALID, "name"},
			{"dup serial", inventory.HostRegistration{SerialNumber: "SER00001"}, "", "", eim.ECONFLICT, "serialNumber"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h, err := e.svc.RegisterHost(e.ctx, e.proj, c.reg)
				if c.code != "" {
					wantErr(t, err, c.code, c.msg)
					return
				}
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if h.DesiredState != c.wantState || h.DesiredAmtState != c.wantAmt {
					t.Errorf("got desired %s/%s, want %s/%s", h.DesiredState, h.DesiredAmtState, c.wantState, c.wantAmt)
				}
				if h.Name == "" {
					t.Errorf("name: got empty, want a default")
				}
				if h.DesiredPowerState != eim.PowerStateOn || h.HostStatus != "Not Connected" {
					t.Errorf("defaults: got %s %q", h.DesiredPowerState, h.HostStatus)
				}
			})
		}
	})
}

func TestUpdateRegistration(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "SERUPD01"})).get(t)
		u := newUUID()
		got := ok(e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{Name: "renamed", UUID: u, AutoOnboard: true})).get(t)
		if got.Name != "renamed" || got.UUID != u || got.DesiredState != eim.HostStateOnboarded {
			t.Fatalf("got %q %q %s, want renamed %s ONBOARDED", got.Name, got.UUID, got.DesiredState, u)
		}
		// Without autoOnboard the registration goes back to REGISTERED, as
		// in the original (the node has not onboarded yet).
		got = ok(e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{Name: "again"})).get(t)
		if got.DesiredState != eim.HostStateRegistered {
			t.Fatalf("autoOnboard false: got desired %s, want REGISTERED", got.DesiredState)
		}
		_, err := e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{UUID: newUUID()})
		wantErr(t, err, eim.EINVALID, "uuid: cannot be changed")
		_, err = e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{SerialNumber: "OTHER0001"})
		wantErr(t, err, eim.EINVALID, "serialNumber: cannot be changed")
		noErr(t, e.svc.InvalidateHost(e.ctx, e.proj, h.ResourceID, "stolen"))
		e.manager(eim.KindHost, h.ResourceID, func(r eim.Resource) { r.(*eim.Host).CurrentState = eim.HostStateUntrusted })
		_, err = e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{AutoOnboard: true})
		wantErr(t, err, eim.EPRECONDITION, "HOST_STATE_UNTRUSTED", "HOST_STATE_ONBOARDED")
	})
}

// TestHostTransitions: a host's desired state moves as the original's
// table allows from its CURRENT state; from UNSPECIFIED anything goes.
func TestHostTransitions(t *testing.T) {
	type step struct {
		op   string // onboard, register (autoOnboard false), invalidate, delete
		code string
	}
	cases := []struct {
		name       string
		registered bool
		current    eim.HostState
		steps      []step
		want       eim.HostState
	}{
		{"registered onboard", true, "", []step{{"onboard", ""}}, eim.HostStateOnboarded},
		{"registered invalidate", true, "", []step{{"invalidate", ""}}, eim.HostStateUntrusted},
		{"registered delete", true, "", []step{{"delete", ""}}, eim.HostStateDeleted},
		{"created register", false, "", []step{{"register", ""}}, eim.HostStateRegistered},
		{"created back and forth", false, "", []step{{"register", ""}, {"onboard", ""}, {"invalidate", ""}, {"register", ""}}, eim.HostStateRegistered},
		{"current registered", true, eim.HostStateRegistered, []step{{"invalidate", eim.EPRECONDITION}, {"register", ""}, {"onboard", ""}}, eim.HostStateOnboarded},
		{"current onboarded", false, eim.HostStateOnboarded, []step{{"onboard", ""}, {"register", eim.EPRECONDITION}, {"invalidate", ""}, {"invalidate", ""}}, eim.HostStateUntrusted},
		{"current onboarded delete", false, eim.HostStateOnboarded, []step{{"delete", ""}}, eim.HostStateDeleted},
		{"current untrusted", false, eim.HostStateUntrusted, []step{{"invalidate", ""}, {"onboard", eim.EPRECONDITION}, {"register", eim.EPRECONDITION}, {"invalidate", ""}}, eim.HostStateUntrusted},
		{"current untrusted delete", false, eim.HostStateUntrusted, []step{{"delete", ""}}, eim.HostStateDeleted},
		{"deleted stays", false, eim.HostStateOnboarded, []step{{"delete", ""}, {"onboard", eim.EPRECONDITION}, {"invalidate", eim.EPRECONDITION}, {"delete", ""}}, eim.HostStateDeleted},
	}
	run(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := e.with(t)
				var id string
				if c.registered {
					id = ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: newUUID()})).get(t).ResourceID
				} else {
					id = e.host("h", "").ResourceID
				}
				// With credentials, so that a delete is two-phase.
				e.issueCredentials(id)
				if c.current != "" {
					e.manager(eim.KindHost, id, func(r eim.Resource) { r.(*eim.Host).CurrentState = c.current })
				}
				for i, s := range c.steps {
					var err error
					switch s.op {
					case "onboard":
						err = e.svc.OnboardHost(e.ctx, e.proj, id)
					case "register":
						_, err = e.svc.UpdateRegistration(e.ctx, e.proj, id, inventory.HostRegistration{})
					case "invalidate":
						err = e.svc.InvalidateHost(e.ctx, e.proj, id, "why: test")
					case "delete":
						err = e.svc.Delete(e.ctx, e.proj, eim.KindHost, id)
					}
					if s.code == "" && err != nil {
						t.Fatalf("step %d %s: got %v, want nil", i, s.op, err)
					}
					if s.code != "" {
						wantErr(t, err, s.code, "desiredState: host "+id)
					}
				}
				if got := e.get(eim.KindHost, id).(*eim.Host).DesiredState; got != c.want {
					t.Fatalf("got %s, want %s", got, c.want)
				}
			})
		}
		h := e.host("n", "")
		noErr(t, e.svc.InvalidateHost(e.ctx, e.proj, h.ResourceID, "compromised: see ticket #12"))
		if got := e.get(eim.KindHost, h.ResourceID).(*eim.Host).Note; got != "compromised: see ticket #12" {
			t.Errorf("note: got %q", got)
		}
		wantErr(t, e.svc.InvalidateHost(e.ctx, e.proj, h.ResourceID, "bad `note`"), eim.EINVALID, "note")
		wantErr(t, e.svc.OnboardHost(e.ctx, e.proj, "host-0000beef"), eim.ENOTFOUND)
		wantErr(t, e.svc.OnboardHost(e.ctx, e.proj, "site-0000beef"), eim.EINVALID, "resourceId")
	})
}

func TestUpdateFieldMask(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		s1, s2 := e.site("s1", ""), e.site("s2", "")
		h := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: s1.ResourceID,
			Metadata: eim.Metadata{{Key: "a", Value: "1"}}}).(*eim.Host)

		// PATCH: only the named fields change.
		got := ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "renamed"}, []string{"name"})).get(t).(*eim.Host)
		if got.Name != "renamed" || got.SiteID != s1.ResourceID || len(got.Metadata) != 1 {
			t.Fatalf("PATCH name: got name %q site %q metadata %v", got.Name, got.SiteID, got.Metadata)
		}
		got = ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, SiteID: s2.ResourceID}, []string{"site_id"})).get(t).(*eim.Host)
		if got.SiteID != s2.ResourceID || got.Site == nil || got.Site.ResourceID != s2.ResourceID {
			t.Fatalf("PATCH site_id: got %q", got.SiteID)
		}
		// PUT: every writable field is replaced (metadata and site cleared),
		// the uuid left empty is kept.
		got = ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "put"}, nil)).get(t).(*eim.Host)
		if got.Name != "put" || got.SiteID != "" || len(got.Metadata) != 0 || got.UUID != h.UUID {
			t.Fatalf("PUT: got name %q site %q metadata %v uuid %q", got.Name, got.SiteID, got.Metadata, got.UUID)
		}
		if got.DesiredState != eim.HostStateOnboarded {
			t.Fatalf("PUT changed desiredState to %s", got.DesiredState)
		}
		cases := []struct {
			name  string
			r     *eim.Host
			mask  []string
			code  string
			subst string
		}{
			{"read-only in mask", &eim.Host{Name: "x"}, []string{"desiredState"}, eim.EINVALID, `fieldMask: field "desiredState" is read-only`},
			{"unknown in mask", &eim.Host{Name: "x"}, []string{"bogus"}, eim.EINVALID, `fieldMask: unknown field "bogus"`},
			{"uuid change", &eim.Host{Name: "x", UUID: newUUID()}, []string{"uuid"}, eim.EINVALID, "uuid: cannot be changed"},
			{"bad name", &eim.Host{Name: "x;y"}, []string{"name"}, eim.EINVALID, "name:"},
			{"missing site", &eim.Host{SiteID: "site-0000abcd"}, []string{"siteId"}, eim.ENOTFOUND, "siteId"},
			{"bad metadata", &eim.Host{Metadata: eim.Metadata{{Key: "A", Value: "b"}}}, []string{"metadata"}, eim.EINVALID, "metadata[0].key"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				c.r.ResourceID = h.ResourceID
				_, err := e.svc.Update(e.ctx, e.proj, c.r, c.mask)
				wantErr(t, err, c.code, c.subst)
			})
		}
		_, err := e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: "host-0000beef"}, Name: "x"}, nil)
		wantErr(t, err, eim.ENOTFOUND)
		if got := e.get(eim.KindHost, h.ResourceID).(*eim.Host).Name; got != "put" {
			t.Fatalf("failed updates changed the host: name %q", got)
		}
	})
}

func TestCreateRequiredFields(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		cases := []struct {
			name string
			r    eim.Resource
			msg  string
		}{
			{"provider kind", &eim.Provider{Name: "p", APIEndpoint: "https://x"}, "providerKind: is required"},
			{"provider bad kind", &eim.Provider{ProviderKind: "PROVIDER_KIND_CLOUD", Name: "p", APIEndpoint: "https://x"}, "providerKind:"},
			{"schedule status", &eim.SingleSchedule{StartSeconds: 5, TargetRegionID: "region-0000abcd"}, "scheduleStatus: is required"},
			{"os sha", &eim.OS{Name: "u"}, "sha256: is required"},
			{"account key", &eim.LocalAccount{Username: "u"}, "sshKey: is required"},
			{"config body", &eim.CustomConfig{Name: "c"}, "config: is required"},
			{"site lat", &eim.Site{Name: "s", SiteLat: 900000001}, "siteLat:"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := e.svc.Create(e.ctx, e.proj, c.r)
				wantErr(t, err, eim.EINVALID, c.msg)
			})
		}
		p := e.create(&eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", Name: "p", APIEndpoint: "https://x"}).(*eim.Provider)
		if p.ProviderVendor != "PROVIDER_VENDOR_UNSPECIFIED" || p.AliasID != p.ResourceID {
			t.Errorf("provider: got vendor %q alias %q, want PROVIDER_VENDOR_UNSPECIFIED and %q", p.ProviderVendor, p.AliasID, p.ResourceID)
		}
		_, err := e.svc.Create(e.ctx, e.proj, &eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", Name: "p", APIEndpoint: "https://y"})
		wantErr(t, err, eim.ECONFLICT)
	})
}

func TestHostSummary(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		s := e.site("s", "")
		var hs []*eim.Host
		for i := range 5 {
			site := ""
			if i < 3 {
				site = s.ResourceID
			}
			hs = append(hs, e.host("h"+string(rune('a'+i)), site))
		}
		e.manager(eim.KindHost, hs[0].ResourceID, func(r eim.Resource) {
			r.(*eim.Host).HostStatus, r.(*eim.Host).HostStatusIndicator = "Error", eim.StatusError
		})
		e.manager(eim.KindHost, hs[1].ResourceID, func(r eim.Resource) {
			r.(*eim.Host).HostStatus, r.(*eim.Host).HostStatusIndicator = "Running", eim.StatusIdle
		})
		e.manager(eim.KindHost, hs[3].ResourceID, func(r eim.Resource) {
			r.(*eim.Host).HostStatus, r.(*eim.Host).HostStatusIndicator = "Running", eim.StatusIdle
		})
		got := ok(e.svc.HostSummary(e.ctx, e.proj, "")).get(t)
		if want := (inventory.HostSummary{Total: 5, Error: 1, Running: 2, Unallocated: 2}); *got != want {
			t.Fatalf("got %+v, want %+v", *got, want)
		}
		got = ok(e.svc.HostSummary(e.ctx, e.proj, `name = "ha"`)).get(t)
		if want := (inventory.HostSummary{Total: 1, Error: 1}); *got != want {
			t.Fatalf("filtered: got %+v, want %+v", *got, want)
		}
		other := e.newProject()
		got = ok(e.svc.HostSummary(e.ctx, other, "")).get(t)
		if *got != (inventory.HostSummary{}) {
			t.Fatalf("other project: got %+v, want zeros", *got)
		}
	})
}

// Vendor placeholder serials ("0123456789", "00000000" …) are on thousands
// of boards: they identify nothing, so they never block a registration that
// has a UUID, and cannot be a host's only identity.
func TestRegisterPlaceholderSerial(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		for _, serial := range []string{"0123456789", "00000000", "DefaultString"} {
			for range 3 {
				h, err := e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: serial, UUID: newUUID()})
				if err != nil {
					t.Fatalf("register %s with a uuid: got %v, want nil", serial, err)
				}
				if h.SerialNumber != serial {
					t.Errorf("serialNumber: got %q, want %q (kept as given)", h.SerialNumber, serial)
				}
			}
			_, err := e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: serial})
			wantErr(t, err, eim.EINVALID, "serialNumber: "+serial, "vendor placeholder", "uuid")
		}

		// A host stored with only a placeholder serial before this rule
		// existed does not block hosts that have UUIDs.
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			return tx.Create(e.ctx, &eim.Host{Name: "legacy", SerialNumber: "OEM00", DesiredState: eim.HostStateRegistered})
		}))
		ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "OEM00", UUID: newUUID()})).get(t)

		// A placeholder serial may be added to a host that has a UUID.
		h := ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: newUUID()})).get(t)
		got := ok(e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{SerialNumber: "0123456789"})).get(t)
		if got.SerialNumber != "0123456789" {
			t.Errorf("serialNumber after update: got %q, want 0123456789", got.SerialNumber)
		}

		// A real serial still identifies one host of the project.
		ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "SERDUP01"})).get(t)
		_, err := e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "SERDUP01"})
		wantErr(t, err, eim.ECONFLICT, "serialNumber")
		_, err = e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "SERDUP01", UUID: newUUID()})
		wantErr(t, err, eim.ECONFLICT, "serialNumber")
	})
}

// Placeholder UUIDs are treated as onboarding treats them: they identify no
// machine, so no host is registered or created by one.
func TestPlaceholderUUIDRefused(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		for _, u := range []string{"00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "03000200-0400-0500-0006-000700080009"} {
			_, err := e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: u})
			wantErr(t, err, eim.EINVALID, "uuid: "+u, "vendor placeholder")
			_, err = e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: u, SerialNumber: "SERPH001"})
			wantErr(t, err, eim.EINVALID, "uuid: "+u, "vendor placeholder")
			_, err = e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "ph", UUID: u})
			wantErr(t, err, eim.EINVALID, "uuid: "+u, "vendor placeholder")
		}
		h := ok(e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{SerialNumber: "SERPH002"})).get(t)
		_, err := e.svc.UpdateRegistration(e.ctx, e.proj, h.ResourceID, inventory.HostRegistration{UUID: "00000000-0000-0000-0000-000000000000"})
		wantErr(t, err, eim.EINVALID, "uuid", "vendor placeholder")
		h.UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
		_, err = e.svc.Update(e.ctx, e.proj, h, nil)
		wantErr(t, err, eim.EINVALID, "uuid", "vendor placeholder")
	})
}

// TestUUIDCase: a UUID is kept as the client wrote it, and compared without
// regard to case for uniqueness, filters and lookups.
func TestUUIDCase(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		u := strings.ToUpper(newUUID())
		lower := strings.ToLower(u)
		h := e.create(&eim.Host{Name: "upper", UUID: u}).(*eim.Host)
		if got := e.get(eim.KindHost, h.ResourceID).(*eim.Host).UUID; got != u {
			t.Fatalf("uuid: got %q, want %q as written", got, u)
		}
		_, err := e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "lower", UUID: lower})
		wantErr(t, err, eim.ECONFLICT, "uuid")
		_, err = e.svc.RegisterHost(e.ctx, e.proj, inventory.HostRegistration{UUID: lower})
		wantErr(t, err, eim.ECONFLICT, "uuid")
		// Another project may claim it too (onboarding then needs the
		// device to prove its project: docs/compatibility.md).
		if _, err = e.svc.Create(e.ctx, e.newProject(), &eim.Host{Name: "other", UUID: lower}); err != nil {
			t.Fatalf("the same UUID in another project: %v", err)
		}

		for _, q := range []inventory.ListQuery{
			{Filter: `uuid="` + lower + `"`},
			{Where: []eim.Cond{{Field: "uuid", Value: lower}}},
			{Where: []eim.Cond{{Field: "uuid", Value: []string{lower, newUUID()}}}},
		} {
			p := ok(e.svc.List(e.ctx, e.proj, eim.KindHost, q)).get(t)
			if len(p.Items) != 1 || p.Items[0].Base().ResourceID != h.ResourceID {
				t.Errorf("list %+v: got %d hosts, want %s", q, len(p.Items), h.ResourceID)
			}
		}
		// The same UUID in another case in a PUT is no change.
		got := ok(e.svc.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "put", UUID: lower}, nil)).get(t).(*eim.Host)
		if got.UUID != u {
			t.Errorf("uuid after a PUT of %q: got %q, want %q kept", lower, got.UUID, u)
		}
	})
}
