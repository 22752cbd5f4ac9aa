package onboarding_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/onboarding"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var pgURL string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if base := os.Getenv(storetest.PostgresEnv); base != "" {
		u, drop, err := storetest.PostgresDB(base, "eim_onboarding")
		if err != nil {
			fmt.Fprintln(os.Stderr, "onboarding tests:", err)
			return 1
		}
		defer drop()
		pgURL = u
	}
	return m.Run()
}

// env is one test's store, inventory, batcher, service and project.
type env struct {
	t     *testing.T
	ctx   context.Context
	store eim.Store
	inv   *inventory.Service
	svc   *onboarding.Service
	proj  string
}

func run(t *testing.T, f func(t *testing.T, e *env)) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// As the store's capabilities decide: SQLite looks before it writes,
	// PostgreSQL writes directly; SQLite direct too (a store that says it
	// takes concurrent writers), so that both paths are tested without
	// PostgreSQL.
	engines := map[string]string{"sqlite": "", "sqlite-direct": ""}
	if pgURL != "" {
		engines["postgres"] = pgURL
	}
	for name, dsn := range engines {
		t.Run(name, func(t *testing.T) {
			if dsn == "" {
				dsn = filepath.Join(t.TempDir(), "eim.db")
			}
			st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := inventory.NewBatcher(st, inventory.BatcherOptions{})
			t.Cleanup(func() { b.Close(); st.Close() })
			e := &env{t: t, ctx: context.Background(), store: st, inv: inventory.New(st, inventory.Options{})}
			var svcStore eim.Store = st
			if name == "sqlite-direct" {
				svcStore = concurrentWriters{st}
			}
			e.svc = onboarding.New(onboarding.Options{Store: svcStore, Batcher: b, TokenURL: "https://eim.test/oauth2/token", Resync: time.Hour})
			e.proj = e.newProject()
			f(t, e)
		})
	}
}

// concurrentWriters is a store that says it takes concurrent writers.
type concurrentWriters struct{ eim.Store }

func (concurrentWriters) Capabilities() eim.Capabilities {
	return eim.Capabilities{ConcurrentWriters: true}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newUUID() string {
	h := randHex(16)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

func newSerial() string { return "SN" + randHex(6) }

func (e *env) newProject() string {
	e.t.Helper()
	name := "t-" + randHex(4)
	if _, err := e.inv.CreateProject(e.ctx, name, ""); err != nil {
		e.t.Fatal(err)
	}
	return name
}

func (e *env) setSettings(project string, edit func(*eim.ProjectSettings)) {
	e.t.Helper()
	p, err := e.store.FindProject(e.ctx, project)
	if err != nil {
		e.t.Fatal(err)
	}
	edit(&p.Settings)
	if err := e.store.UpdateProject(e.ctx, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) register(reg inventory.HostRegistration) *eim.Host {
	e.t.Helper()
	h, err := e.inv.RegisterHost(e.ctx, e.proj, reg)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *env) host(id string) *eim.Host {
	e.t.Helper()
	var h *eim.Host
	if err := e.store.View(e.ctx, "", func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, id)
		if err == nil {
			h = r.(*eim.Host)
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *env) discover(req *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
	resp, err := e.svc.Discover(e.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// namesOne matches a host ID or a test project's name.
var namesOne = regexp.MustCompile(`host-[0-9a-f]{8}|\bt-[0-9a-f]{8}\b`)

func wantCode(t *testing.T, err error, code connect.Code, what string) {
	t.Helper()
	if got := connect.CodeOf(err); err == nil || got != code {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, code)
	}
	// The caller is not authenticated: a refusal never names a host or
	// a project.
	if namesOne.MatchString(err.Error()) {
		t.Errorf("%s: refusal %q names a host or project", what, err)
	}
}

// checkOnboarded checks an ONBOARDED answer and the host's stored state.
func (e *env) checkOnboarded(resp *onboardingv1.DiscoverResponse, hostID string, gen int64) {
	e.t.Helper()
	if resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_ONBOARDED || resp.GetHostId() != hostID || resp.GetProject() != e.proj {
		e.t.Fatalf("answer: got %v, want ONBOARDED for %s in %s", resp, hostID, e.proj)
	}
	if resp.GetClientId() != southbound.ClientID(hostID) || resp.GetTokenUrl() != "https://eim.test/oauth2/token" || len(resp.GetClientSecret()) < 40 {
		e.t.Fatalf("credentials: got %v", resp)
	}
	h := e.host(hostID)
	if !southbound.CheckSecret(h.NodeSecretHash, resp.GetClientSecret()) || h.NodeCredGen != gen {
		e.t.Fatalf("stored credentials: hash matches %v, gen %d; want match and gen %d", southbound.CheckSecret(h.NodeSecretHash, resp.GetClientSecret()), h.NodeCredGen, gen)
	}
	if h.CurrentState != eim.HostStateOnboarded || h.OnboardingStatus != onboarding.StatusOnboarded || h.OnboardingStatusIndicator != eim.StatusIdle ||
		h.RegistrationStatus != onboarding.StatusRegistered || h.RegistrationStatusIndicator != eim.StatusIdle || h.OnboardingStatusTimestamp == 0 {
		e.t.Fatalf("host after onboarding: current %s, onboarding %q/%s/%d, registration %q/%s", h.CurrentState, h.OnboardingStatus, h.OnboardingStatusIndicator, h.OnboardingStatusTimestamp, h.RegistrationStatus, h.RegistrationStatusIndicator)
	}
}

func TestDiscoverRegisteredThenOnboarded(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		uuid := newUUID()
		h := e.register(inventory.HostRegistration{UUID: uuid})
		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: "To Be Filled By O.E.M."})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_REGISTERED || resp.GetHostId() != h.ResourceID || resp.GetClientSecret() != "" ||
			resp.GetRetryAfterSeconds() < 10 || resp.GetRetryAfterSeconds() > 30 {
			t.Fatalf("registered host: got %v, want REGISTERED, retry in 10..30 s, no secret", resp)
		}
		if got := e.host(h.ResourceID); got.RegistrationStatus != onboarding.StatusRegistered || got.CurrentState == eim.HostStateOnboarded || got.NodeSecretHash != "" {
			t.Fatalf("registered host after discover: %q, current %s", got.RegistrationStatus, got.CurrentState)
		}
		if err := e.inv.OnboardHost(e.ctx, e.proj, h.ResourceID); err != nil {
			t.Fatal(err)
		}
		serial := newSerial()
		resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, h.ResourceID, 1)
		if got := e.host(h.ResourceID); got.SerialNumber != serial {
			t.Errorf("serial recorded: got %q, want %q", got.SerialNumber, serial)
		}
		// Every call issues a new secret; the old one stops working.
		again, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(again, h.ResourceID, 2)
		if again.GetClientSecret() == resp.GetClientSecret() || southbound.CheckSecret(e.host(h.ResourceID).NodeSecretHash, resp.GetClientSecret()) {
			t.Fatal("a second discover kept the first secret valid")
		}
	})
}

// A UUID registered in capitals matches the device, which reports it in
// lower case (UUIDs compare without regard to case), and stays as written.
func TestDiscoverUUIDCase(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		uuid := newUUID()
		h := e.register(inventory.HostRegistration{UUID: strings.ToUpper(uuid), AutoOnboard: true})
		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, h.ResourceID, 1)
		if got := e.host(h.ResourceID).UUID; got != strings.ToUpper(uuid) {
			t.Errorf("uuid: got %q, want %q as registered", got, strings.ToUpper(uuid))
		}
	})
}

func TestDiscoverBySerial(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		serial := newSerial()
		h := e.register(inventory.HostRegistration{SerialNumber: serial, AutoOnboard: true})
		uuid := newUUID()
		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, h.ResourceID, 1)
		if got := e.host(h.ResourceID); got.UUID != uuid {
			t.Errorf("uuid recorded: got %q, want %q", got.UUID, uuid)
		}
		// Placeholder UUIDs never match; the serial does.
		h2 := e.register(inventory.HostRegistration{SerialNumber: newSerial(), AutoOnboard: true})
		resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: "00000000-0000-0000-0000-000000000000", Serial: h2.SerialNumber})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetHostId() != h2.ResourceID {
			t.Fatalf("placeholder uuid: got host %s, want %s", resp.GetHostId(), h2.ResourceID)
		}
		if got := e.host(h2.ResourceID); got.UUID != "" {
			t.Errorf("placeholder uuid recorded: %q", got.UUID)
		}
	})
}

// A placeholder serial identifies nothing: a device presenting one with an
// unknown UUID is an unknown device, not the host that has the same
// placeholder; and a placeholder in a registration never disagrees with the
// device's real serial.
func TestDiscoverPlaceholderSerial(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		const placeholder = "0123456789"
		withUUID := e.register(inventory.HostRegistration{UUID: newUUID(), SerialNumber: placeholder, AutoOnboard: true})
		// A host stored with only the placeholder (as the inventory allowed
		// before refusing it) is not found by it either.
		if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			return tx.Create(e.ctx, &eim.Host{Name: "legacy", SerialNumber: placeholder, DesiredState: eim.HostStateOnboarded})
		}); err != nil {
			t.Fatal(err)
		}
		for _, serial := range []string{placeholder, "00000000", "Default string"} {
			_, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: newUUID(), Serial: serial})
			wantCode(t, err, connect.CodeNotFound, "unknown uuid with placeholder serial "+serial)
		}

		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: withUUID.UUID, Serial: placeholder})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, withUUID.ResourceID, 1)

		real := e.register(inventory.HostRegistration{UUID: newUUID(), SerialNumber: "00000000", AutoOnboard: true})
		resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: real.UUID, Serial: newSerial()})
		if err != nil {
			t.Fatalf("registered placeholder serial, device with a real one: got %v, want onboarded", err)
		}
		e.checkOnboarded(resp, real.ResourceID, 1)
	})
}

func TestDiscoverRefusals(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		// Malformed input.
		_, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: "not-a-uuid"})
		wantCode(t, err, connect.CodeInvalidArgument, "malformed uuid")
		_, err = e.discover(&onboardingv1.DiscoverRequest{Serial: "Default string"})
		wantCode(t, err, connect.CodeInvalidArgument, "no usable identity")
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: "ffffffff-ffff-ffff-ffff-ffffffffffff", Serial: "00000000"})
		wantCode(t, err, connect.CodeInvalidArgument, "placeholders only")

		// Unknown device without a token.
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: newUUID()})
		wantCode(t, err, connect.CodeNotFound, "unknown device")
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: newUUID(), EnrollmentToken: "wrong"})
		wantCode(t, err, connect.CodePermissionDenied, "wrong enrollment token")

		// UUID and serial of different hosts: error status on both.
		a := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		b := e.register(inventory.HostRegistration{SerialNumber: newSerial(), AutoOnboard: true})
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: a.UUID, Serial: b.SerialNumber})
		wantCode(t, err, connect.CodeInvalidArgument, "uuid and serial of different hosts")
		for _, id := range []string{a.ResourceID, b.ResourceID} {
			h := e.host(id)
			if h.RegistrationStatus != onboarding.StatusMismatch || h.RegistrationStatusIndicator != eim.StatusError || h.NodeSecretHash != "" || h.CurrentState == eim.HostStateOnboarded {
				t.Errorf("host %s after a mismatch: %q/%s, onboarded %s", id, h.RegistrationStatus, h.RegistrationStatusIndicator, h.CurrentState)
			}
		}
		// A UUID whose registration names another serial.
		c := e.register(inventory.HostRegistration{UUID: newUUID(), SerialNumber: newSerial(), AutoOnboard: true})
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: c.UUID, Serial: newSerial()})
		wantCode(t, err, connect.CodeInvalidArgument, "serial differs from the registration")

		// Duplicate serials in one project (hosts with distinct UUIDs, a
		// device that reports none): onboard nothing.
		serial := newSerial()
		d1 := e.register(inventory.HostRegistration{UUID: newUUID(), SerialNumber: serial, AutoOnboard: true})
		d2 := e.register(inventory.HostRegistration{UUID: newUUID(), SerialNumber: serial, AutoOnboard: true})
		_, err = e.discover(&onboardingv1.DiscoverRequest{Serial: serial})
		wantCode(t, err, connect.CodeInvalidArgument, "duplicate serial")
		for _, id := range []string{d1.ResourceID, d2.ResourceID} {
			if h := e.host(id); h.NodeSecretHash != "" {
				t.Errorf("duplicate %s got credentials", id)
			}
		}

		// Untrusted, deleted, already running.
		u := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		if err := e.inv.InvalidateHost(e.ctx, e.proj, u.ResourceID, "stolen"); err != nil {
			t.Fatal(err)
		}
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: u.UUID})
		wantCode(t, err, connect.CodeFailedPrecondition, "untrusted host")

		del := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		e.edit(del.ResourceID, func(h *eim.Host) { h.DesiredState = eim.HostStateDeleted })
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: del.UUID})
		wantCode(t, err, connect.CodeFailedPrecondition, "host being deleted")

		run := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		osr, err := e.inv.Create(e.ctx, e.proj, &eim.OS{Name: "os-" + randHex(3), ImageURL: "https://x/img", Sha256: randHex(32)})
		if err != nil {
			t.Fatal(err)
		}
		inst, err := e.inv.Create(e.ctx, e.proj, &eim.Instance{Kind: eim.InstanceKindMetal, HostID: run.ResourceID, OSID: osr.Base().ResourceID})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			r, err := tx.Get(e.ctx, eim.KindInstance, inst.Base().ResourceID)
			if err != nil {
				return err
			}
			r.(*eim.Instance).CurrentState = eim.InstanceStateRunning
			return tx.Update(e.ctx, r)
		}); err != nil {
			t.Fatal(err)
		}
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: run.UUID})
		wantCode(t, err, connect.CodeFailedPrecondition, "already provisioned")
	})
}

func (e *env) edit(id string, f func(*eim.Host)) {
	e.t.Helper()
	e.edit2(e.proj, id, f)
}

func (e *env) edit2(project, id string, f func(*eim.Host)) {
	e.t.Helper()
	if err := e.store.Update(e.ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		f(r.(*eim.Host))
		return tx.Update(e.ctx, r)
	}); err != nil {
		e.t.Fatal(err)
	}
}

func tokenHash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// An unknown device with the project's token waits in the lobby: one
// request however often it calls, nothing written by its quiet calls;
// denied, it is told so and to wait long, still writing nothing;
// approved, it onboards into a host with the approval's name, site and
// labels; its host deleted, it waits again in the same request.
func TestDiscoverLobby(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		tok := randHex(16)
		e.setSettings(e.proj, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash(tok) })
		other := e.newProject()
		e.setSettings(other, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash("other-token") })

		uuid, serial := newUUID(), newSerial()
		dev := &onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial, EnrollmentToken: tok, Hostname: "cam",
			Interfaces: []*onboardingv1.NetworkInterface{{Name: "eth0", Mac: "52:54:00:AA:00:01"}},
			Labels:     []*onboardingv1.Label{{Key: "line", Value: "1"}},
			Hardware:   &onboardingv1.HardwareSummary{CpuModel: "Atom", CpuCores: 4, MemoryBytes: 4 << 30, Architecture: "amd64"}}
		resp, err := e.discover(dev)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_PENDING || resp.GetProject() != e.proj || resp.GetClientSecret() != "" ||
			resp.GetEnrollmentId() == "" || !strings.Contains(resp.GetMessage(), "waiting for approval") {
			t.Fatalf("unknown device: got %v, want PENDING in %s", resp, e.proj)
		}
		reqID := resp.GetEnrollmentId()
		rev, audits := e.writes()
		for range 20 {
			r, err := e.discover(dev)
			if err != nil || r.GetStatus() != onboardingv1.DiscoverResponse_STATUS_PENDING || r.GetEnrollmentId() != reqID {
				t.Fatalf("retry: got %v, %v; want PENDING in request %s", r, err, reqID)
			}
		}
		if r2, a2 := e.writes(); r2 != rev || a2 != audits {
			t.Fatalf("20 retries: revision %d → %d, audit records %d → %d; want no writes", rev, r2, audits, a2)
		}
		list, total, err := e.store.ListEnrollmentRequests(e.ctx, e.proj, eim.EnrollmentQuery{})
		if err != nil || total != 1 {
			t.Fatalf("requests: got %d, %v; want 1", total, err)
		}
		got := list[0]
		if got.UUID != uuid || got.SerialNumber != serial || got.MACs[0] != "52:54:00:aa:00:01" || got.Hardware.CPUCores != 4 ||
			got.Labels[0].Value != "1" || got.Hostname != "cam" || got.Attempts != 1 {
			t.Fatalf("request: got %+v", got)
		}
		if _, total, _ := e.store.ListEnrollmentRequests(e.ctx, other, eim.EnrollmentQuery{}); total != 0 {
			t.Fatalf("another project's lobby: got %d requests, want 0", total)
		}

		// Denied: a clear answer, a long wait, still no writes.
		if _, err := e.store.DecideEnrollment(e.ctx, e.proj, reqID, eim.EnrollmentDecision{State: eim.EnrollmentDenied, By: "user:ops", Reason: "not ours", At: time.Now()}, nil); err != nil {
			t.Fatal(err)
		}
		rev, audits = e.writes()
		for range 20 {
			r, err := e.discover(dev)
			want := "enrollment denied by project " + e.proj + ": not ours"
			if err != nil || r.GetStatus() != onboardingv1.DiscoverResponse_STATUS_DENIED || r.GetMessage() != want || r.GetRetryAfterSeconds() < 600 {
				t.Fatalf("denied device: got %v, %v; want DENIED %q, retry after 10 min or more", r, err, want)
			}
		}
		if r2, a2 := e.writes(); r2 != rev || a2 != audits {
			t.Fatalf("20 denied calls: revision %d → %d, audit records %d → %d; want no writes", rev, r2, audits, a2)
		}

		// Approved (as the API does it): onboarded at the next call.
		site := e.site()
		appr := eim.EnrollmentApproval{Name: "cam-1", SiteID: site, Metadata: eim.Metadata{{Key: "role", Value: "camera"}}}
		ok, err := e.store.DecideEnrollment(e.ctx, e.proj, reqID, eim.EnrollmentDecision{State: eim.EnrollmentApproved, By: "user:ops", Approval: appr, At: time.Now()}, e.admit(appr))
		if err != nil {
			t.Fatal(err)
		}
		resp, err = e.discover(dev)
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, ok.HostID, 1)
		h := e.host(ok.HostID)
		if h.Name != "cam-1" || h.SiteID != site || len(h.Metadata) != 1 || h.Metadata[0].Value != "camera" || h.UUID != uuid {
			t.Fatalf("approved host: got %+v", h)
		}

		// Its host deleted, the device enrolls afresh: the same request,
		// pending again.
		if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindHost, ok.HostID) }); err != nil {
			t.Fatal(err)
		}
		resp, err = e.discover(dev)
		if err != nil || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_PENDING || resp.GetEnrollmentId() != reqID {
			t.Fatalf("after its host's deletion: got %v, %v; want PENDING in request %s", resp, err, reqID)
		}
		if r, _ := e.store.FindEnrollmentRequest(e.ctx, e.proj, reqID); r.State != eim.EnrollmentPending || !strings.Contains(r.Reason, "deleted") {
			t.Fatalf("reopened request: got %+v", r)
		}
	})
}

// Auto-approval rules admit matching devices at their first call (audited
// as the rule), and only those; a site's token admits at its site.
func TestDiscoverLobbyRules(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		tok := randHex(16)
		e.setSettings(e.proj, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash(tok) })
		site := e.site()
		listed := newSerial()
		rules := []*eim.EnrollmentRule{
			{Project: e.proj, Name: "serials", Kind: eim.RuleSerial, SerialNumbers: []string{listed}, Metadata: eim.Metadata{{Key: "by", Value: "serial"}}},
			{Project: e.proj, Name: "line-7", Kind: eim.RuleLabels, MatchLabels: eim.Metadata{{Key: "line", Value: "7"}}},
			{Project: e.proj, Name: "plant", Kind: eim.RuleToken, TokenHash: tokenHash("site-token"), SiteID: site},
		}
		for _, r := range rules {
			if err := e.store.CreateEnrollmentRule(e.ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		admitted := func(req *onboardingv1.DiscoverRequest) *eim.Host {
			t.Helper()
			resp, err := e.discover(req)
			if err != nil || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_ONBOARDED {
				t.Fatalf("device %s: got %v, %v; want ONBOARDED by a rule", req.GetSerial(), resp, err)
			}
			return e.host(resp.GetHostId())
		}
		if h := admitted(&onboardingv1.DiscoverRequest{Uuid: newUUID(), Serial: listed, EnrollmentToken: tok}); h.Metadata[0].Value != "serial" {
			t.Fatalf("admitted by serial: got %+v", h)
		}
		admitted(&onboardingv1.DiscoverRequest{Serial: newSerial(), EnrollmentToken: tok, Labels: []*onboardingv1.Label{{Key: "line", Value: "7"}}})
		if h := admitted(&onboardingv1.DiscoverRequest{Uuid: newUUID(), EnrollmentToken: "site-token"}); h.SiteID != site || h.Project != e.proj {
			t.Fatalf("admitted by the site's token: got %+v, want at %s", h, site)
		}
		for _, req := range []*onboardingv1.DiscoverRequest{
			{Uuid: newUUID(), Serial: newSerial(), EnrollmentToken: tok},
			{Serial: newSerial(), EnrollmentToken: tok, Labels: []*onboardingv1.Label{{Key: "line", Value: "8"}}},
		} {
			if resp, err := e.discover(req); err != nil || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_PENDING {
				t.Fatalf("device matching no rule: got %v, %v; want PENDING", resp, err)
			}
		}
		all, _, err := e.store.Audit(e.ctx, e.proj, eim.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var approvals int
		for _, r := range all {
			if r.Kind != eim.KindEnrollment {
				continue
			}
			approvals++
			if !strings.HasPrefix(r.Principal, "rule:enrollmentrule-") || r.Action != string(eim.OpUpdated) {
				t.Fatalf("approval audited as %q %s, want the rule's update", r.Principal, r.Action)
			}
		}
		if approvals != 3 {
			t.Fatalf("audit: got %d approvals, want 3", approvals)
		}
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: newUUID(), EnrollmentToken: "no-such-token"})
		wantCode(t, err, connect.CodePermissionDenied, "an unknown token")
	})
}

// writes returns the feed's revision and the project's audit records.
func (e *env) writes() (int64, int) {
	e.t.Helper()
	rev, err := e.store.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	_, n, err := e.store.Audit(e.ctx, e.proj, eim.AuditQuery{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rev, n
}

func (e *env) site() string {
	e.t.Helper()
	r, err := e.inv.Create(e.ctx, e.proj, &eim.Site{Name: "plant-" + randHex(2)})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.(*eim.Site).ResourceID
}

func (e *env) admit(a eim.EnrollmentApproval) func(eim.Tx, *eim.EnrollmentRequest) (string, error) {
	return func(tx eim.Tx, req *eim.EnrollmentRequest) (string, error) {
		h, err := inventory.AdmitHost(e.ctx, tx, e.proj, inventory.HostRegistration{Name: a.Name, UUID: req.UUID, SerialNumber: req.SerialNumber}, a.SiteID, a.Metadata)
		if err != nil {
			return "", err
		}
		return h.ResourceID, nil
	}
}

// A project being deleted issues no credentials to its nodes (they were
// deauthorized first: onboarded hosts invalidated, the others back to
// registered), and its enrollment token enrols no device.
func TestDiscoverProjectBeingDeleted(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		tok := randHex(16)
		e.setSettings(e.proj, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash(tok) })
		uuid := newUUID()
		h := e.register(inventory.HostRegistration{UUID: uuid, AutoOnboard: true})
		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, h.ResourceID, 1)
		if _, err := e.inv.StartProjectDeletion(e.ctx, e.proj, true); err != nil {
			t.Fatal(err)
		}
		waiting := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		if _, _, err := e.inv.DeauthorizeHosts(e.ctx, e.proj, 10); err != nil {
			t.Fatal(err)
		}
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid})
		wantCode(t, err, connect.CodeFailedPrecondition, "discover of an onboarded host of a project being deleted")
		if got := e.host(h.ResourceID); got.NodeSecretHash != "" || got.DesiredState != eim.HostStateUntrusted {
			t.Errorf("onboarded host of a project being deleted: got desired %s, secret %q; want untrusted, none", got.DesiredState, got.NodeSecretHash)
		}
		resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: e.host(waiting.ResourceID).UUID})
		if err != nil || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_REGISTERED || resp.GetClientSecret() != "" {
			t.Errorf("discover of a host waiting to be onboarded in a project being deleted: got %v, %v; want REGISTERED without credentials", resp, err)
		}
		_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: newUUID(), EnrollmentToken: tok})
		wantCode(t, err, connect.CodePermissionDenied, "enrollment into a project being deleted")
	})
}

// 100 distinct devices discover at once; two discovers of one device race.
func TestDiscoverConcurrent(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		const n = 100
		hosts := make([]*eim.Host, n)
		for i := range hosts {
			hosts[i] = e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		}
		var wg sync.WaitGroup
		resps := make([]*onboardingv1.DiscoverResponse, n)
		errs := make([]error, n)
		for i, h := range hosts {
			wg.Go(func() { resps[i], errs[i] = e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID}) })
		}
		wg.Wait()
		for i, h := range hosts {
			if errs[i] != nil {
				t.Fatalf("discover %d: %v", i, errs[i])
			}
			e.checkOnboarded(resps[i], h.ResourceID, 1)
		}

		same := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		var two [2]*onboardingv1.DiscoverResponse
		for i := range two {
			wg.Go(func() {
				var err error
				two[i], err = e.discover(&onboardingv1.DiscoverRequest{Uuid: same.UUID})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		h := e.host(same.ResourceID)
		valid := 0
		for _, r := range two {
			if r != nil && southbound.CheckSecret(h.NodeSecretHash, r.GetClientSecret()) {
				valid++
			}
		}
		if h.NodeCredGen != 2 || valid != 1 {
			t.Fatalf("same device twice: gen %d, %d valid secrets; want gen 2 and exactly 1 valid", h.NodeCredGen, valid)
		}
	})
}

// A device's identity is claimed per project: any project may register it,
// whatever UUID or serial number each registered and in whichever order.
// Registered in two projects, the device is held without proof: both hosts
// show it (without naming the other project) and the device is told to
// retry, as a registered one is; a token of neither project proves
// nothing. With one project's enrollment token it onboards into that
// project only, and the other's host shows it went to another project.
// Once one registration is left, the device onboards without a token.
func TestDiscoverClaimedInTwoProjects(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		other, third := e.newProject(), e.newProject()
		e.setSettings(e.proj, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash("token-of-a") })
		e.setSettings(other, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash("token-of-b") })
		e.setSettings(third, func(s *eim.ProjectSettings) { s.EnrollmentTokenHash = tokenHash("token-of-c") })
		regIn := func(project string, reg inventory.HostRegistration) *eim.Host {
			t.Helper()
			h, err := e.inv.RegisterHost(e.ctx, project, reg)
			if err != nil {
				t.Fatalf("register in %s: %v", project, err)
			}
			return h
		}
		wantStatus := func(h *eim.Host, status string) {
			t.Helper()
			got := e.host(h.ResourceID)
			if got.RegistrationStatus != status || got.RegistrationStatusIndicator != eim.StatusError || got.NodeSecretHash != "" || got.CurrentState == eim.HostStateOnboarded {
				t.Errorf("host %s of %s: registration %q/%s, current %s, credentials %v; want %q ERROR, not onboarded",
					h.ResourceID, h.Project, got.RegistrationStatus, got.RegistrationStatusIndicator, got.CurrentState, got.NodeSecretHash != "", status)
			}
		}
		tests := []struct {
			name          string
			first, second inventory.HostRegistration
			token         string // the token that proves the device's project
			secondWins    bool   // it is the second registration's project
		}{
			{"same serial, the first's token", inventory.HostRegistration{SerialNumber: "SERIALA"}, inventory.HostRegistration{SerialNumber: "SERIALA"}, "token-of-a", false},
			{"same uuid, the later's token", inventory.HostRegistration{UUID: "UUIDA"}, inventory.HostRegistration{UUID: "UUIDA"}, "token-of-b", true},
			{"uuid first, then serial", inventory.HostRegistration{UUID: "UUIDA"}, inventory.HostRegistration{SerialNumber: "SERIALA"}, "token-of-a", false},
			{"serial first, then uuid", inventory.HostRegistration{SerialNumber: "SERIALA"}, inventory.HostRegistration{UUID: "UUIDA"}, "token-of-b", true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				uuid, serial := newUUID(), newSerial()
				fill := func(r inventory.HostRegistration) inventory.HostRegistration {
					if r.UUID != "" {
						r.UUID = uuid
					}
					if r.SerialNumber != "" {
						r.SerialNumber = serial
					}
					r.AutoOnboard = true
					return r
				}
				a := regIn(e.proj, fill(tt.first))
				b := regIn(other, fill(tt.second))
				for _, token := range []string{"", "", "token-of-c", "no-such-token"} { // the answer holds, the status is written once
					req := &onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial, EnrollmentToken: token}
					resp, err := e.discover(req)
					if err != nil {
						t.Fatalf("discover (token %q): %v, want the device held (REGISTERED, retry)", token, err)
					}
					if resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_REGISTERED || resp.GetRetryAfterSeconds() == 0 || resp.GetHostId() != "" || resp.GetProject() != "" || resp.GetClientSecret() != "" {
						t.Fatalf("discover (token %q): got %v, want REGISTERED with a retry and no host or project", token, resp)
					}
					wantStatus(a, onboarding.StatusHeld)
					wantStatus(b, onboarding.StatusHeld)
				}
				if strings.Contains(onboarding.StatusHeld, other) || strings.Contains(onboarding.StatusHeld, e.proj) {
					t.Errorf("the held status names a project: %q", onboarding.StatusHeld)
				}

				// The proof: one project's token.
				win, winP, lose := a, e.proj, b
				if tt.secondWins {
					win, winP, lose = b, other, a
				}
				req := &onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial, EnrollmentToken: tt.token}
				resp, err := e.discover(req)
				if err != nil || resp.GetHostId() != win.ResourceID || resp.GetProject() != winP || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_ONBOARDED {
					t.Fatalf("discover with %s: got %v, %v; want %s of %s onboarded", tt.token, resp, err, win.ResourceID, winP)
				}
				if got := e.host(win.ResourceID); got.RegistrationStatus != onboarding.StatusRegistered || got.CurrentState != eim.HostStateOnboarded {
					t.Errorf("the proved registration: %q, current %s; want %q, onboarded", got.RegistrationStatus, got.CurrentState, onboarding.StatusRegistered)
				}
				wantStatus(lose, onboarding.StatusClaimed)
				// Onboarded, the registration keeps the device: a call
				// without the token is its project's, not held.
				resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial})
				if err != nil || resp.GetHostId() != win.ResourceID {
					t.Fatalf("discover without the token once onboarded: got %v, %v; want %s", resp, err, win.ResourceID)
				}
				wantStatus(lose, onboarding.StatusClaimed)

				// The proved registration goes: the other one, alone now,
				// has the device without a token.
				e.edit2(winP, win.ResourceID, func(h *eim.Host) { h.DesiredState = eim.HostStateDeleted })
				if err := e.inv.ConfirmDeleted(e.ctx, winP, eim.KindHost, win.ResourceID); err != nil {
					t.Fatal(err)
				}
				resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: uuid, Serial: serial})
				if err != nil || resp.GetHostId() != lose.ResourceID || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_ONBOARDED {
					t.Fatalf("after the proved registration was deleted: got %v, %v; want %s onboarded", resp, err, lose.ResourceID)
				}
				if got := e.host(lose.ResourceID); got.RegistrationStatus != onboarding.StatusRegistered || got.CurrentState != eim.HostStateOnboarded {
					t.Errorf("the other registration once alone: %q, current %s", got.RegistrationStatus, got.CurrentState)
				}
			})
		}
	})
}
