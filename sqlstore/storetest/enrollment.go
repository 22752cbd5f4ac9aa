package storetest

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// testEnrollmentLobby checks eim.EnrollmentStore: one request per device
// and project whatever the calls (racing ones too), quiet calls writing
// nothing, decisions atomic with the host an approval creates, reopening,
// rules with their token lookup, tenancy, and the project's deletion.
func testEnrollmentLobby(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	now := time.Now()
	dev := func(uuid, serial string) *eim.EnrollmentRequest {
		return &eim.EnrollmentRequest{UUID: uuid, SerialNumber: serial, MACs: []string{"52:54:00:00:00:01"}, Hostname: "dev",
			Hardware: eim.EnrollmentHardware{CPUModel: "x", CPUCores: 4, MemoryBytes: 8 << 30, Architecture: "amd64"},
			Labels:   eim.Metadata{{Key: "line", Value: "1"}}}
	}
	uuid := "6f3ad1f3-8c2b-4a8e-9d55-0c6a55c8f001"
	r1, wrote, err := s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: dev(uuid, "SER00001"), Now: now, Quiet: time.Minute})
	if err != nil || !wrote || r1.State != eim.EnrollmentPending || r1.Attempts != 1 || !eim.ValidID(eim.KindEnrollment, r1.ID) {
		t.Fatalf("first call: got %+v, %v, %v; want a PENDING request written with 1 attempt", r1, wrote, err)
	}
	// A quiet call (within Quiet, nothing new) writes nothing.
	r, wrote, err := s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: dev(uuid, "SER00001"), Now: now.Add(time.Second), Quiet: time.Minute})
	if err != nil || wrote || r.ID != r1.ID || r.Attempts != 1 {
		t.Fatalf("quiet call: got %+v, wrote %v, %v; want the same request, unwritten", r, wrote, err)
	}
	// Past Quiet, the unsaved calls are added.
	r, wrote, err = s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: dev(uuid, "SER00001"), Now: now.Add(2 * time.Minute), Quiet: time.Minute, Unsaved: 5})
	if err != nil || !wrote || r.ID != r1.ID || r.Attempts != 7 {
		t.Fatalf("later call: got %+v, wrote %v, %v; want 7 attempts on the same request", r, wrote, err)
	}
	// Other facts within Quiet are not written either (a device cannot
	// make a write per call); past it they are.
	d := dev(uuid, "SER00001")
	d.Labels = eim.Metadata{{Key: "line", Value: "2"}}
	if r, wrote, _ = s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: d, Now: now.Add(2*time.Minute + time.Second), Quiet: time.Minute}); wrote || r.Labels[0].Value != "1" {
		t.Fatalf("call with new labels within Quiet: got %+v, wrote %v; want nothing written", r, wrote)
	}
	if r, wrote, _ = s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: d, Now: now.Add(4 * time.Minute), Quiet: time.Minute}); !wrote || r.Labels[0].Value != "2" {
		t.Fatalf("call with new labels past Quiet: got %+v, wrote %v; want them saved", r, wrote)
	}
	// Racing first calls of one device make one request.
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, _, err := s.RecordEnrollmentCall(ctx(t), p1, eim.EnrollmentCall{Request: dev("", "SERRACE01"), Now: now, Quiet: time.Minute})
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("racing calls: %v", err)
		}
	}
	list, total, err := s.ListEnrollmentRequests(ctx(t), p1, eim.EnrollmentQuery{Serial: "SERRACE01"})
	if err != nil || total != 1 || len(list) != 1 {
		t.Fatalf("racing calls: got %d requests (%d), %v; want 1", len(list), total, err)
	}
	// The same device in another project is another request; neither
	// project sees the other's.
	r2, _, err := s.RecordEnrollmentCall(ctx(t), p2, eim.EnrollmentCall{Request: dev(uuid, "SER00001"), Now: now})
	if err != nil || r2.ID == r1.ID {
		t.Fatalf("other project: got %+v, %v", r2, err)
	}
	if _, err := s.FindEnrollmentRequest(ctx(t), p2, r1.ID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("another project's request: got %v, want not found", err)
	}
	if _, total, _ := s.ListEnrollmentRequests(ctx(t), p2, eim.EnrollmentQuery{}); total != 1 {
		t.Fatalf("p2's list: got %d, want 1", total)
	}
	if list, total, _ := s.ListEnrollmentRequests(ctx(t), p1, eim.EnrollmentQuery{State: eim.EnrollmentPending, Limit: 1}); total != 2 || len(list) != 1 {
		t.Fatalf("p1's pending, a page of 1: got %d of %d, want 1 of 2", len(list), total)
	}

	// Deny, then approve: the approval creates the host in the same
	// transaction, and an admit that fails leaves the request as it was.
	at := now.Add(3 * time.Minute)
	den, err := s.DecideEnrollment(ctx(t), p1, r1.ID, eim.EnrollmentDecision{State: eim.EnrollmentDenied, By: "user:ops", Reason: "unknown vendor", At: at}, nil)
	if err != nil || den.State != eim.EnrollmentDenied || den.Reason != "unknown vendor" || den.DecidedAt == nil {
		t.Fatalf("deny: got %+v, %v", den, err)
	}
	_, err = s.DecideEnrollment(ctx(t), p1, r1.ID, eim.EnrollmentDecision{State: eim.EnrollmentDenied, At: at}, nil)
	wantCode(t, err, eim.EPRECONDITION)
	_, err = s.DecideEnrollment(ctx(t), p1, r1.ID, eim.EnrollmentDecision{State: eim.EnrollmentApproved, At: at}, func(tx eim.Tx, _ *eim.EnrollmentRequest) (string, error) {
		return "", eim.Errorf(eim.EINVALID, "siteId: no such site")
	})
	wantCode(t, err, eim.EINVALID)
	if got, _ := s.FindEnrollmentRequest(ctx(t), p1, r1.ID); got.State != eim.EnrollmentDenied {
		t.Fatalf("after a failed approval: got %s, want DENIED", got.State)
	}
	appr := eim.EnrollmentApproval{Name: "cam-1", Metadata: eim.Metadata{{Key: "role", Value: "camera"}}}
	ok, err := s.DecideEnrollment(ctx(t), p1, r1.ID, eim.EnrollmentDecision{State: eim.EnrollmentApproved, By: "user:ops", Approval: appr, At: at},
		func(tx eim.Tx, req *eim.EnrollmentRequest) (string, error) {
			h, err := inventory.EnrollHost(ctx(t), tx, p1, inventory.HostRegistration{Name: req.Approval.Name, UUID: req.UUID, SerialNumber: req.SerialNumber, AutoOnboard: true})
			if err != nil {
				return "", err
			}
			return h.ResourceID, nil
		})
	if err != nil || ok.State != eim.EnrollmentApproved || ok.HostID == "" || ok.Reason != "" || ok.Approval.Name != "cam-1" {
		t.Fatalf("approve: got %+v, %v", ok, err)
	}
	if got, err := s.FindEnrollmentRequestOfHost(ctx(t), p1, ok.HostID); err != nil || got.ID != r1.ID {
		t.Fatalf("request of the host: got %+v, %v", got, err)
	}
	if err := s.View(ctx(t), p1, func(tx eim.Tx) error { _, err := tx.Get(ctx(t), eim.KindHost, ok.HostID); return err }); err != nil {
		t.Fatalf("the approved host: %v", err)
	}
	_, err = s.DecideEnrollment(ctx(t), p1, r1.ID, eim.EnrollmentDecision{State: eim.EnrollmentDenied, At: at}, nil)
	wantCode(t, err, eim.EPRECONDITION)
	// Reopened once its host is gone: back to PENDING, the same request.
	if done, err := s.ReopenEnrollment(ctx(t), p1, r1.ID, "host-00000000", "x"); err != nil || done {
		t.Fatalf("reopen naming another host: got %v, %v; want false", done, err)
	}
	if done, err := s.ReopenEnrollment(ctx(t), p1, r1.ID, ok.HostID, "its host was deleted"); err != nil || !done {
		t.Fatalf("reopen: got %v, %v", done, err)
	}
	if got, _ := s.FindEnrollmentRequest(ctx(t), p1, r1.ID); got.State != eim.EnrollmentPending || got.HostID != "" || got.Reason != "its host was deleted" {
		t.Fatalf("reopened: got %+v", got)
	}
	recs, _ := audit(t, s, p1, eim.AuditQuery{Filter: `kind="enrollment"`})
	if len(recs) != 3 {
		t.Fatalf("audit: got %d records, want 3 (deny, approve, reopen; calls are not audited)", len(recs))
	}

	// Rules: created, listed, found by token across projects, deleted.
	site := create(t, s, p1, &eim.Site{Name: "plant"}).(*eim.Site).ResourceID
	rules := []*eim.EnrollmentRule{
		{Project: p1, Name: "serials", Kind: eim.RuleSerial, SerialNumbers: []string{"SER00001"}},
		{Project: p1, Name: "plant-token", Kind: eim.RuleToken, TokenHash: "abc123", SiteID: site, Metadata: eim.Metadata{{Key: "k", Value: "v"}}},
	}
	for _, r := range rules {
		if err := s.CreateEnrollmentRule(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, s.CreateEnrollmentRule(ctx(t), &eim.EnrollmentRule{Project: p1, Name: "serials", Kind: eim.RuleAny}), eim.ECONFLICT)
	wantCode(t, s.CreateEnrollmentRule(ctx(t), &eim.EnrollmentRule{Project: p2, Name: "x", Kind: eim.RuleToken, SiteID: site}), eim.EINVALID)
	got, err := s.ListEnrollmentRules(ctx(t), p1)
	if err != nil || len(got) != 2 {
		t.Fatalf("rules: got %d, %v; want 2", len(got), err)
	}
	if got[0].Name == "serials" {
		got[0], got[1] = got[1], got[0]
	}
	if got[1].Name != "serials" || got[1].SerialNumbers[0] != "SER00001" || got[0].SiteID != site || got[0].Metadata[0].Key != "k" || got[0].TokenHash != "abc123" {
		t.Fatalf("rules: got %+v and %+v", got[0], got[1])
	}
	byTok, err := s.FindEnrollmentRuleByToken(ctx(t), "abc123")
	if err != nil || byTok.Project != p1 || byTok.ID != rules[1].ID {
		t.Fatalf("rule by token: got %+v, %v", byTok, err)
	}
	if _, err := s.FindEnrollmentRuleByToken(ctx(t), "nope"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("unknown token: %v", err)
	}
	if _, err := s.FindEnrollmentRule(ctx(t), p2, rules[0].ID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("another project's rule: %v", err)
	}
	wantCode(t, s.DeleteEnrollmentRule(ctx(t), p2, rules[0].ID), eim.ENOTFOUND)
	if err := s.DeleteEnrollmentRule(ctx(t), p1, rules[0].ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteEnrollmentRequest(ctx(t), p2, r1.ID), eim.ENOTFOUND)
	if err := s.DeleteEnrollmentRequest(ctx(t), p1, r1.ID); err != nil {
		t.Fatal(err)
	}
	// They go with their project.
	if err := s.CreateEnrollmentRule(ctx(t), &eim.EnrollmentRule{Project: p2, Name: "all", Kind: eim.RuleAny}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProject(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	if l, total, err := s.ListEnrollmentRequests(ctx(t), p2, eim.EnrollmentQuery{}); err != nil || total != 0 || len(l) != 0 {
		t.Fatalf("after the project's deletion: %d requests, %v", total, err)
	}
	if l, _ := s.ListEnrollmentRules(ctx(t), p2); len(l) != 0 {
		t.Fatalf("after the project's deletion: %d rules", len(l))
	}
}
