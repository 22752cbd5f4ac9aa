package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
)

// The enrollment lobby end to end: the real server through Main and
// simulated devices running the real agent code (agent.Provisioner's
// Enroll, agent.Node's report-in) over HTTPS. An unknown device with an
// OS installed enrolls and waits — one request however often it calls,
// invisible to another project — is approved with labels and reaches
// RUNNING with no provisioning, its host carrying the labels; a denied
// device is told why and backs off, and the server writes nothing for its
// calls; an auto-approval rule admits a matching device and not the other;
// a deleted host's device enrolls afresh in its old request.
func TestLobbySQLite(t *testing.T) { testLobby(t, startDay0(t)) }

func TestLobbyPostgres(t *testing.T) { testLobby(t, startDay0(t, "--database", freshPostgres(t))) }

// lobbyDevice runs one simulated device in the background.
type lobbyDevice struct {
	pending, denied atomic.Int64
	mu              sync.Mutex
	message         string
	done            chan *sim.Report
	cancel          context.CancelFunc
}

func (s *day0Server) enrollDevice(t *testing.T, id sim.Identity, token string, installed bool, labels ...string) *lobbyDevice {
	t.Helper()
	d := &lobbyDevice{done: make(chan *sim.Report, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	o := sim.Options{EnrollToken: token, Installed: installed, Seed: 27, LobbyPoll: 100 * time.Millisecond,
		OnLobby: func(_ int, denied bool, msg string) {
			if denied {
				d.denied.Add(1)
			} else {
				d.pending.Add(1)
			}
			d.mu.Lock()
			d.message = msg
			d.mu.Unlock()
		}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		o.Labels = append(o.Labels, agent.Label{Key: k, Value: v})
	}
	go func() { d.done <- s.fleet(t, ctx, []sim.Identity{id}, o) }()
	t.Cleanup(func() {
		cancel()
		<-d.done
	})
	return d
}

func (d *lobbyDevice) lastMessage() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.message
}

// wait returns the device's report once it is done (RUNNING or given up).
func (d *lobbyDevice) wait(t *testing.T) *sim.Report {
	t.Helper()
	select {
	case rep := <-d.done:
		d.done <- rep // for the cleanup
		return rep
	case <-time.After(90 * time.Second):
		t.Fatal("the device did not finish within 90 s")
		return nil
	}
}

// request waits for the device's request in project.
func (s *day0Server) request(t *testing.T, project string, id sim.Identity) *client.EnrollmentRequest {
	t.Helper()
	var found *client.EnrollmentRequest
	waitFor(t, "the enrollment request of "+id.Serial, func() bool {
		page, err := s.admin.ListEnrollmentRequests(context.Background(), project, client.EnrollmentListOptions{SerialNumber: id.Serial})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.EnrollmentRequests) > 0 {
			found = page.EnrollmentRequests[0]
		}
		return found != nil
	})
	return found
}

func testLobby(t *testing.T, s *day0Server) {
	ctx := context.Background()
	tokens := map[string]string{}
	for _, p := range []string{"lobbya", "lobbyb"} {
		if _, err := s.admin.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		ps, err := s.admin.UpdateProjectSettings(ctx, p, client.SettingsChange{EnrollmentToken: "new"})
		if err != nil {
			t.Fatal(err)
		}
		tokens[p] = ps.EnrollmentToken
	}
	ids := sim.Generate(5, 27)
	site := &eim.Site{}
	if err := s.admin.Create(ctx, "lobbya", eim.KindSite, map[string]string{"name": "plant-1"}, site); err != nil {
		t.Fatal(err)
	}

	// 1. An unknown device with an OS installed enrolls and waits.
	dev := s.enrollDevice(t, ids[0], tokens["lobbya"], true, "line=1")
	req := s.request(t, "lobbya", ids[0])
	if req.State != eim.EnrollmentPending || !req.Installed || req.Labels[0].Key != "line" || req.UUID != strings.ToLower(ids[0].UUID) {
		t.Fatalf("request: got %+v, want PENDING, installed, with its label and UUID", req)
	}
	waitFor(t, "five calls of the waiting device", func() bool { return dev.pending.Load() >= 5 })
	if !strings.Contains(dev.lastMessage(), "waiting for approval in project lobbya") {
		t.Fatalf("the waiting device was told %q", dev.lastMessage())
	}
	// One request per device across its retries.
	if page, err := s.admin.ListEnrollmentRequests(ctx, "lobbya", client.EnrollmentListOptions{}); err != nil || page.TotalElements != 1 {
		t.Fatalf("lobbya's requests after %d calls: %v, %v; want 1", dev.pending.Load(), page, err)
	}
	// Tenancy: project B sees nothing of A's requests.
	if page, err := s.admin.ListEnrollmentRequests(ctx, "lobbyb", client.EnrollmentListOptions{}); err != nil || page.TotalElements != 0 {
		t.Fatalf("lobbyb's requests: %v, %v; want none", page, err)
	}
	if _, err := s.admin.GetEnrollmentRequest(ctx, "lobbyb", req.ID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("A's request read in B: got %v, want 404", err)
	}
	if _, err := s.admin.ApproveEnrollment(ctx, "lobbyb", req.ID, client.Approval{}); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("A's request approved in B: got %v, want 404", err)
	}

	// Approved with labels, a name and a site: RUNNING with no
	// provisioning, its host carrying the labels.
	appr, err := s.admin.ApproveEnrollment(ctx, "lobbya", req.ID, client.Approval{Name: "camera-1", SiteID: site.ResourceID,
		Metadata: eim.Metadata{{Key: "role", Value: "camera"}, {Key: "line", Value: "1"}}})
	if err != nil || appr.State != eim.EnrollmentApproved || appr.HostID == "" {
		t.Fatalf("approve: %+v, %v", appr, err)
	}
	if rep := dev.wait(t); rep.Final["running"] != 1 {
		t.Fatalf("approved device: got %v, want running", rep.Final)
	}
	var h eim.Host
	waitFor(t, "the approved host running", func() bool {
		if err := s.admin.Get(ctx, "lobbya", eim.KindHost, appr.HostID, &h); err != nil {
			t.Fatal(err)
		}
		return h.HostStatus == "Running"
	})
	if h.Name != "camera-1" || h.SiteID != site.ResourceID || len(h.Metadata) != 2 || h.Metadata[0].Value != "camera" || h.Instance != nil || h.CurrentState != eim.HostStateOnboarded {
		t.Fatalf("approved host: got name %q, site %q, metadata %v, instance %v, current %s", h.Name, h.SiteID, h.Metadata, h.Instance != nil, h.CurrentState)
	}

	// 2. A denied device is told why and backs off; the server writes
	// nothing for its calls.
	denied := s.enrollDevice(t, ids[1], tokens["lobbya"], false)
	dreq := s.request(t, "lobbya", ids[1])
	if _, err := s.admin.DenyEnrollment(ctx, "lobbya", dreq.ID, "not on the delivery note"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the device told it is denied", func() bool { return denied.denied.Load() >= 1 })
	if want := "enrollment denied by project lobbya: not on the delivery note"; denied.lastMessage() != want {
		t.Fatalf("denied device told %q, want %q", denied.lastMessage(), want)
	}
	audits := func() int {
		// The lobby's records (other modules write the approved host's).
		p, err := s.admin.Audit(ctx, "lobbya", `kind="enrollment"`, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.TotalElements
	}
	before, calls := audits(), denied.denied.Load()
	seen, _ := s.admin.GetEnrollmentRequest(ctx, "lobbya", dreq.ID)
	// A misbehaving device (or an old agent) calling 50 times in a row:
	// each a DENIED answer, none a write.
	ob := onboardingv1connect.NewOnboardingServiceClient(s.agentClient(t), s.agentURL)
	for range 50 {
		resp, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: ids[1].UUID, Serial: ids[1].Serial, EnrollmentToken: tokens["lobbya"]}))
		if err != nil || resp.Msg.GetStatus() != onboardingv1.DiscoverResponse_STATUS_DENIED || resp.Msg.GetRetryAfterSeconds() < 600 {
			t.Fatalf("denied device's call: got %v, %v; want DENIED, retry after 10 min or more", resp, err)
		}
	}
	// Over a window of 3 s the agent itself called no more (it waits ten
	// minutes or more), and nothing was written.
	time.Sleep(3 * time.Second) // a window of the device's life, not a wait for a condition
	if got := denied.denied.Load(); got != calls {
		t.Fatalf("the denied agent called %d times in the window, want none (it backs off)", got-calls)
	}
	after, _ := s.admin.GetEnrollmentRequest(ctx, "lobbya", dreq.ID)
	if a := audits(); a != before || !after.LastSeen.Equal(seen.LastSeen.Time) || after.Attempts != seen.Attempts {
		t.Fatalf("50 denied calls: audit records %d → %d, lastSeen %v → %v, attempts %d → %d; want no writes",
			before, a, seen.LastSeen, after.LastSeen, seen.Attempts, after.Attempts)
	}

	// 3. An auto-approval rule admits a matching device and not the other.
	rule, err := s.admin.CreateEnrollmentRule(ctx, "lobbya", client.RuleInput{Name: "delivery-7", Kind: "SERIAL", SerialNumbers: []string{ids[2].Serial},
		Metadata: eim.Metadata{{Key: "batch", Value: "7"}}})
	if err != nil {
		t.Fatal(err)
	}
	other := s.enrollDevice(t, ids[3], tokens["lobbya"], true)
	matching := s.enrollDevice(t, ids[2], tokens["lobbya"], true)
	if rep := matching.wait(t); rep.Final["running"] != 1 {
		t.Fatalf("device admitted by the rule: got %v, want running", rep.Final)
	}
	mreq := s.request(t, "lobbya", ids[2])
	if mreq.State != eim.EnrollmentApproved || mreq.RuleID != rule.ID || !strings.HasPrefix(mreq.DecidedBy, "rule:"+rule.ID) {
		t.Fatalf("request approved by the rule: got %+v", mreq)
	}
	recs, err := s.admin.Audit(ctx, "lobbya", `resourceId="`+mreq.ID+`"`, 10, 0)
	if err != nil || len(recs.Records) != 1 || !strings.HasPrefix(recs.Records[0].Principal, "rule:"+rule.ID) {
		t.Fatalf("audit of the rule's approval: %+v, %v", recs, err)
	}
	waitFor(t, "the other device's calls", func() bool { return other.pending.Load() >= 3 })
	if oreq := s.request(t, "lobbya", ids[3]); oreq.State != eim.EnrollmentPending {
		t.Fatalf("device matching no rule: got %s, want PENDING", oreq.State)
	}

	// The CLI: list the pending requests, deny the other device, list
	// the rules.
	eimCLI := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		base := []string{"--server", s.api, "--token-file", filepath.Join(s.dataDir, adminTokenFile), "--project", "lobbya"}
		if err := Main(ctx, append(base, args...), &out, &errOut); err != nil {
			t.Fatalf("eim %v: %v; stderr: %s", args, err, errOut.String())
		}
		return out.String()
	}
	oreq := s.request(t, "lobbya", ids[3])
	if got := eimCLI("-o", "id", "enrollment", "list", "--state", "PENDING"); strings.TrimSpace(got) != oreq.ID {
		t.Fatalf("eim enrollment list --state PENDING: got %q, want %s", got, oreq.ID)
	}
	if got := eimCLI("enrollment", "deny", oreq.ID, "--reason", "wrong line"); !strings.Contains(got, "DENIED") || !strings.Contains(got, "wrong line") {
		t.Fatalf("eim enrollment deny: %q", got)
	}
	if got := eimCLI("enrollment", "rules", "list"); !strings.Contains(got, "delivery-7") || !strings.Contains(got, ids[2].Serial) {
		t.Fatalf("eim enrollment rules list: %q", got)
	}
	waitFor(t, "the other device told it is denied", func() bool { return other.denied.Load() >= 1 })

	// 4. A deleted host's device enrolls afresh, in its old request.
	if err := s.admin.Delete(ctx, "lobbya", eim.KindHost, appr.HostID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host gone", func() bool {
		return eim.ErrorCode(s.admin.Get(ctx, "lobbya", eim.KindHost, appr.HostID, &eim.Host{})) == eim.ENOTFOUND
	})
	again := s.enrollDevice(t, ids[0], tokens["lobbya"], true, "line=1")
	waitFor(t, "the returning device waiting", func() bool { return again.pending.Load() >= 1 })
	back, err := s.admin.GetEnrollmentRequest(ctx, "lobbya", req.ID)
	if err != nil || back.State != eim.EnrollmentPending || !strings.Contains(back.Reason, "deleted") {
		t.Fatalf("the returning device's request: got %+v, %v; want %s PENDING again", back, err, req.ID)
	}
	appr2, err := s.admin.ApproveEnrollment(ctx, "lobbya", req.ID, client.Approval{Name: "camera-1b"})
	if err != nil || appr2.HostID == appr.HostID {
		t.Fatalf("second approval: %+v, %v; want a new host", appr2, err)
	}
	if rep := again.wait(t); rep.Final["running"] != 1 {
		t.Fatalf("re-enrolled device: got %v, want running", rep.Final)
	}
	if page, _ := s.admin.ListEnrollmentRequests(ctx, "lobbya", client.EnrollmentListOptions{}); page.TotalElements != 4 {
		t.Fatalf("lobbya's requests: got %d, want 4 (one per device)", page.TotalElements)
	}
	if page, _ := s.admin.ListEnrollmentRequests(ctx, "lobbyb", client.EnrollmentListOptions{}); page.TotalElements != 0 {
		t.Fatalf("lobbyb's requests: got %d, want none", page.TotalElements)
	}
}
