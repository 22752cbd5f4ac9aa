package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// audit returns the project's audit records matching q, newest first.
func audit(t *testing.T, s eim.Store, project string, q eim.AuditQuery) ([]eim.AuditRecord, int) {
	t.Helper()
	recs, total, err := s.Audit(ctx(t), project, q)
	if err != nil {
		t.Fatalf("Audit(%s, %+v): %v", project, q, err)
	}
	return recs, total
}

// testAudit: every write records who made it, what and the fields old →
// new, with secrets redacted, in its transaction; the log filters, pages,
// is per project and is pruned by age.
func testAudit(t *testing.T, s eim.Store) {
	p := project(t, s)
	alice := eim.WithActor(ctx(t), eim.UserActor("alice"))
	hostMod := eim.WithActor(ctx(t), eim.ModuleActor("host"))

	h := &eim.Host{Name: "h1", SerialNumber: "SN1"}
	if err := s.Update(alice, p, func(tx eim.Tx) error { return tx.Create(alice, h) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(hostMod, p, func(tx eim.Tx) error {
		w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, HostStatus: "Running", NodeSecretHash: "s3cr3t-hash"}
		return tx.UpdateFields(hostMod, w, "hostStatus", "node_secret_hash", "name")
	}); err != nil {
		t.Fatal(err)
	}
	// A rolled-back write leaves no record.
	boom := errors.New("boom")
	err := s.Update(alice, p, func(tx eim.Tx) error {
		if err := tx.Create(alice, &eim.Host{Name: "ghost"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rolled-back write: got %v, want boom", err)
	}
	// The transaction's actor when the write's context names none.
	if err := s.Update(alice, p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		r.(*eim.Host).Note = "noted"
		return tx.Update(ctx(t), r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(hostMod, p, func(tx eim.Tx) error { return tx.Delete(hostMod, eim.KindHost, h.ResourceID) }); err != nil {
		t.Fatal(err)
	}

	all, _ := audit(t, s, p, eim.AuditQuery{})
	if len(all) != 5 || all[4].Kind != eim.KindProject || all[4].Action != string(eim.OpCreated) || all[4].Principal != "system" {
		t.Fatalf("records: got %+v; want the host's 4 and, first, the project's creation by system", all)
	}
	recs, total := audit(t, s, p, eim.AuditQuery{Filter: `kind="host"`})
	if total != 4 || len(recs) != 4 {
		t.Fatalf("records: got %d (total %d): %+v; want 4 (create, update, update, delete; none of the rolled-back write)", len(recs), total, recs)
	}
	want := []struct {
		principal string
		action    eim.Op
	}{{"module:host", eim.OpDeleted}, {"user:alice", eim.OpUpdated}, {"module:host", eim.OpUpdated}, {"user:alice", eim.OpCreated}}
	for i, w := range want {
		r := recs[i]
		if r.Principal != w.principal || r.Action != string(w.action) || r.Kind != eim.KindHost || r.ResourceID != h.ResourceID || r.Time.IsZero() {
			t.Errorf("record %d: got %s %s %s %s at %v, want %s %s host %s", i, r.Principal, r.Action, r.Kind, r.ResourceID, r.Time, w.principal, w.action, h.ResourceID)
		}
		if i > 0 && recs[i-1].Seq <= r.Seq {
			t.Errorf("records not newest first: seq %d before %d", recs[i-1].Seq, r.Seq)
		}
	}
	created := recs[3].Changes
	if string(created["name"].New) != `"h1"` || string(created["name"].Old) != "null" || string(created["serialNumber"].New) != `"SN1"` {
		t.Errorf("create changes: got %s, want name null → \"h1\", serialNumber → \"SN1\"", changesJSON(created))
	}
	if _, ok := created["hostStatus"]; ok {
		t.Errorf("create changes: got %s; want fields left at their zero out", changesJSON(created))
	}
	upd := recs[2].Changes
	if string(upd["hostStatus"].Old) != `""` || string(upd["hostStatus"].New) != `"Running"` {
		t.Errorf("update changes: hostStatus got %s, want \"\" → \"Running\"", changesJSON(upd))
	}
	if string(upd["node_secret_hash"].New) != eim.Redacted || string(upd["node_secret_hash"].Old) != "null" {
		t.Errorf("update changes: node_secret_hash got %s, want null → %s (redacted)", changesJSON(upd), eim.Redacted)
	}
	if string(upd["name"].Old) != `"h1"` || string(upd["name"].New) != `""` {
		t.Errorf("update changes: name got %s, want \"h1\" → \"\"", changesJSON(upd))
	}
	if len(upd) != 3 {
		t.Errorf("update changes: got %s, want the 3 fields written", changesJSON(upd))
	}
	whole := recs[1].Changes
	if len(whole) != 1 || string(whole["note"].New) != `"noted"` {
		t.Errorf("whole-row update changes: got %s, want only note → \"noted\"", changesJSON(whole))
	}
	if b, _ := json.Marshal(recs); json.Valid(b) && containsString(string(b), "s3cr3t") {
		t.Errorf("a secret's value is in the audit log: %s", b)
	}

	// Filters and paging.
	for _, tc := range []struct {
		filter string
		want   int
	}{
		{`resourceId="` + h.ResourceID + `"`, 4},
		{`kind="host"`, 4},
		{`principal="user:alice"`, 2},
		{`principal="module:host" AND action="DELETED"`, 1},
		{`action="CREATED" OR action="DELETED"`, 3}, // the project's creation too
		{`time>="` + recs[3].Time.Add(-time.Second).Format(time.RFC3339Nano) + `" AND kind="host"`, 4},
		{`time<"` + recs[3].Time.Add(-time.Hour).Format(time.RFC3339Nano) + `"`, 0},
		{`resourceId="host-00000000"`, 0},
	} {
		got, total := audit(t, s, p, eim.AuditQuery{Filter: tc.filter})
		if len(got) != tc.want || total != tc.want {
			t.Errorf("filter %s: got %d records (total %d), want %d", tc.filter, len(got), total, tc.want)
		}
	}
	for _, bad := range []string{`nosuch="x"`, `principal=`, `time>"yesterday"`} {
		if _, _, err := s.Audit(ctx(t), p, eim.AuditQuery{Filter: bad}); eim.ErrorCode(err) != eim.EINVALID {
			t.Errorf("filter %s: got %v, want EINVALID", bad, err)
		}
	}
	page, total := audit(t, s, p, eim.AuditQuery{Limit: 2, Offset: 2, Filter: `kind="host"`})
	if len(page) != 2 || total != 4 || page[0].Seq != recs[2].Seq || page[1].Seq != recs[3].Seq {
		t.Errorf("page (limit 2, offset 2): got seq %v (total %d), want %v of 4", seqs(page), total, seqs(recs[2:]))
	}
	if page, _ := audit(t, s, p, eim.AuditQuery{Limit: 2}); len(page) != 2 || page[0].Seq != all[0].Seq {
		t.Errorf("first page: got seq %v, want the newest two %v", seqs(page), seqs(all[:2]))
	}

	// A grouped transaction (the Batcher's: its creates held back and
	// written together on PostgreSQL) records each of its writes, under
	// the actor of each write.
	bob := eim.WithActor(ctx(t), eim.UserActor("bob"))
	sequenced, err := s.UpdateGrouped(ctx(t), p, func(tx eim.Tx) error {
		if err := tx.Create(alice, &eim.Region{Name: "g1"}); err != nil {
			return err
		}
		return tx.Create(bob, &eim.Region{Name: "g2"})
	})
	if err != nil {
		t.Fatal(err)
	}
	sequenced()
	if got, _ := audit(t, s, p, eim.AuditQuery{Filter: `kind="region" AND action="CREATED"`}); len(got) != 2 || got[0].Principal != "user:bob" || got[1].Principal != "user:alice" || string(got[0].Changes["name"].New) != `"g2"` {
		t.Errorf("grouped creates: got %+v, want g1 by alice and g2 by bob", got)
	}

	// Per project.
	other := project(t, s)
	if got, total := audit(t, s, other, eim.AuditQuery{}); len(got) != 1 || total != 1 || got[0].Kind != eim.KindProject {
		t.Errorf("another project's log: got %+v, want only its own creation", got)
	}

	// Project settings, the enrollment token's hash redacted.
	if err := s.UpdateProject(alice, &eim.Project{Name: p, Settings: eim.ProjectSettings{EnrollmentTokenHash: "abcd", HeartbeatIntervalSeconds: 30}}); err != nil {
		t.Fatal(err)
	}
	got, _ := audit(t, s, p, eim.AuditQuery{Filter: `kind="project"`, Limit: 1})
	if len(got) != 1 || got[0].Action != string(eim.OpUpdated) || got[0].Principal != "user:alice" ||
		string(got[0].Changes["settings.enrollmentTokenHash"].New) != eim.Redacted || string(got[0].Changes["settings.heartbeatIntervalSeconds"].New) != "30" {
		t.Errorf("settings change: got %+v, want user:alice UPDATED with the hash redacted and the interval 30", got)
	}

	// Records of what is not a resource's change (a request through a
	// cluster's tunnel), appended as given, each to its project.
	req := map[string]eim.Change{"request": {Old: json.RawMessage("null"), New: json.RawMessage(`{"method":"GET","status":200}`)}}
	if err := s.AppendAudit(ctx(t), []eim.AuditRecord{
		{Project: p, Principal: "user:carol", Action: "REQUEST", Kind: eim.KindCluster, ResourceID: "edge", Changes: req},
		{Project: other, Principal: "user:carol", Action: "REQUEST", Kind: eim.KindCluster, ResourceID: "edge2", Changes: req},
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := audit(t, s, p, eim.AuditQuery{Filter: `action = "REQUEST"`}); len(got) != 1 || got[0].Principal != "user:carol" ||
		got[0].ResourceID != "edge" || got[0].Kind != eim.KindCluster || changesJSON(got[0].Changes) != changesJSON(req) {
		t.Errorf("appended record: got %+v, want carol's request to edge", got)
	}
	if err := s.AppendAudit(ctx(t), []eim.AuditRecord{{Project: p, Principal: "user:carol", Action: "REQUEST", Kind: eim.KindCluster}}); eim.ErrorCode(err) != eim.EINVALID {
		t.Errorf("a record without its resource: got %v, want EINVALID", err)
	}

	// Retention.
	if n, err := s.PruneAudit(ctx(t), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("PruneAudit(an hour ago): got %d, %v; want 0 deleted", n, err)
	}
	if n, err := s.PruneAudit(ctx(t), time.Now().Add(time.Second)); err != nil || n < 10 {
		t.Errorf("PruneAudit(now): got %d, %v; want every record (at least 10) deleted", n, err)
	}
	if got, total := audit(t, s, p, eim.AuditQuery{}); len(got) != 0 || total != 0 {
		t.Errorf("after pruning: got %d records, want none", len(got))
	}

	// A project's records go with it.
	if err := s.Update(alice, other, func(tx eim.Tx) error { return tx.Create(alice, &eim.Region{Name: "r"}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProject(ctx(t), other); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(ctx(t), &eim.Project{Name: other, ID: "00000000-0000-4000-8000-999999999999"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := audit(t, s, other, eim.AuditQuery{}); len(got) != 1 || got[0].Kind != eim.KindProject {
		t.Errorf("a project created again under a deleted one's name: got %+v, want only its own creation", got)
	}
}

func changesJSON(ch map[string]eim.Change) string {
	b, _ := json.Marshal(ch)
	return string(b)
}

func containsString(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func seqs(recs []eim.AuditRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// testWebhookQueue: webhooks are a project's; a resource's audit records
// are read after its cursor, and a cursor's move queues its events once,
// for the webhooks subscribed to them; deliveries of a resource are due
// one at a time, in order.
func testWebhookQueue(t *testing.T, s eim.Store) {
	p, other := project(t, s), project(t, s)
	alice := eim.WithActor(ctx(t), eim.UserActor("alice"))
	w1 := &eim.Webhook{Project: p, URL: "http://127.0.0.1:1/a", EventTypes: []string{eim.EventHostOnboarded, eim.EventHostConnectionLost}, Secret: "0123456789abcdef-secret"}
	w2 := &eim.Webhook{Project: p, URL: "http://127.0.0.1:1/b", EventTypes: []string{eim.EventInstanceRunning}, Secret: "0123456789abcdef-other"}
	for _, w := range []*eim.Webhook{w1, w2} {
		if err := s.CreateWebhook(alice, w); err != nil {
			t.Fatal(err)
		}
	}
	if !eim.ValidID(eim.KindWebhook, w1.ID) || w1.CreatedAt.IsZero() {
		t.Fatalf("created webhook: got ID %q created %v", w1.ID, w1.CreatedAt)
	}
	got, err := s.FindWebhook(ctx(t), p, w1.ID)
	if err != nil || got.URL != w1.URL || got.Secret != w1.Secret || len(got.EventTypes) != 2 {
		t.Fatalf("FindWebhook: got %+v, %v; want w1", got, err)
	}
	if _, err := s.FindWebhook(ctx(t), other, w1.ID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("FindWebhook in another project: got %v, want ENOTFOUND", err)
	}
	if ws, err := s.ListWebhooks(ctx(t), other); err != nil || len(ws) != 0 {
		t.Errorf("ListWebhooks(other): got %d, %v; want none", len(ws), err)
	}
	if ws, err := s.ListWebhooks(ctx(t), p); err != nil || len(ws) != 2 || (ws[0].ID != w1.ID && ws[1].ID != w1.ID) {
		t.Errorf("ListWebhooks: got %d, %v; want w1 and w2", len(ws), err)
	}
	if err := s.DeleteWebhook(ctx(t), other, w1.ID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("DeleteWebhook from another project: got %v, want ENOTFOUND", err)
	}
	if recs, _ := audit(t, s, p, eim.AuditQuery{Filter: `kind="webhook"`}); len(recs) != 2 || recs[0].Principal != "user:alice" || string(recs[0].Changes["secret"].New) != eim.Redacted {
		t.Errorf("webhook audit: got %+v, want two creations by user:alice, secrets redacted", recs)
	}

	// The audit records of some resources after their cursors.
	h := &eim.Host{Name: "h"}
	if err := s.Update(alice, p, func(tx eim.Tx) error { return tx.Create(alice, h) }); err != nil {
		t.Fatal(err)
	}
	h.HostStatus = "No Connection"
	update(t, s, p, func(tx eim.Tx) error { return tx.UpdateFields(ctx(t), h, "hostStatus") })
	recs, err := s.AuditAfter(ctx(t), p, map[string]int64{h.ResourceID: 0, "host-00000009": 0})
	if err != nil || len(recs) != 2 || recs[0].Action != string(eim.OpCreated) || recs[1].Seq <= recs[0].Seq || string(recs[1].Changes["hostStatus"].New) != `"No Connection"` {
		t.Fatalf("AuditAfter(0): got %+v, %v; want the host's creation and its status change, in order", recs, err)
	}
	if again, _ := s.AuditAfter(ctx(t), p, map[string]int64{h.ResourceID: recs[0].Seq}); len(again) != 1 || again[0].Seq != recs[1].Seq {
		t.Errorf("AuditAfter(first): got %+v, want the status change only", again)
	}
	if mine, _ := s.AuditAfter(ctx(t), other, map[string]int64{h.ResourceID: 0}); len(mine) != 0 {
		t.Errorf("AuditAfter in another project: got %+v, want none", mine)
	}

	// Cursor moves queue events once.
	note := func(et string) eim.Notification {
		id := eim.NewEventID()
		return eim.Notification{ID: id, Type: et, Body: []byte(`{"type":"` + et + `","id":"` + id + `"}`)}
	}
	queue := func(want int, moves ...eim.CursorMove) {
		t.Helper()
		n, err := s.QueueEvents(ctx(t), p, moves)
		if err != nil || n != want {
			t.Fatalf("QueueEvents(%+v): got %d, %v; want %d queued", moves, n, err, want)
		}
	}
	first := []eim.CursorMove{
		{ResourceID: "host-00000001", From: 0, Upto: 5, Events: []eim.Notification{note(eim.EventHostOnboarded)}},
		{ResourceID: "host-00000002", From: 0, Upto: 7, Events: []eim.Notification{note(eim.EventHostConnectionLost)}},
		{ResourceID: "host-00000003", From: 0, Upto: 3},
	}
	queue(2, first...)
	queue(0, first...) // handled again after a failure: nothing twice
	queue(2, eim.CursorMove{ResourceID: "host-00000001", From: 5, Upto: 9, Events: []eim.Notification{note(eim.EventHostConnectionLost), note(eim.EventHostConnectionLost)}})
	queue(0, eim.CursorMove{ResourceID: "host-00000003", From: 3, Upto: -1}) // deleted
	cursors, err := s.AuditCursors(ctx(t), p, []string{"host-00000001", "host-00000002", "host-00000003"})
	if err != nil || len(cursors) != 2 || cursors["host-00000001"] != 9 || cursors["host-00000002"] != 7 {
		t.Errorf("AuditCursors: got %v, %v; want host-1 at 9, host-2 at 7, host-3 dropped", cursors, err)
	}

	// host-1: onboarded, lost, lost; host-2: lost. Only the oldest of each
	// resource is due; none of w2 (not subscribed).
	due, err := s.DueDeliveries(ctx(t), time.Now().Add(time.Second), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[0].ResourceID != "host-00000001" || due[0].EventType != eim.EventHostOnboarded || due[1].ResourceID != "host-00000002" {
		t.Fatalf("due: got %v, want host-1's onboarding and host-2's loss", deliverySummary(due))
	}
	d := due[0]
	if d.WebhookID != w1.ID || d.URL != w1.URL || d.Secret != w1.Secret || d.State != eim.DeliveryPending || !json.Valid(d.Body) {
		t.Errorf("delivery: got %+v, want w1's, pending, with a JSON body", d)
	}
	if skipped, _ := s.DueDeliveries(ctx(t), time.Now().Add(time.Second), 10, []string{w1.ID}); len(skipped) != 0 {
		t.Errorf("due, skipping w1: got %v, want none", deliverySummary(skipped))
	}
	// A failed attempt keeps host-1's next event waiting.
	d.Attempts, d.LastStatus, d.LastError, d.NextAt = 1, 500, "answered 500", eim.NewTime(time.Now().Add(time.Hour))
	if err := s.SaveDelivery(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueDeliveries(ctx(t), time.Now().Add(time.Second), 10, nil)
	if len(due) != 1 || due[0].ResourceID != "host-00000002" {
		t.Errorf("due after a failure: got %v, want host-2's only", deliverySummary(due))
	}
	d.State, d.Attempts, d.LastStatus, d.LastError = eim.DeliveryDelivered, 2, 204, ""
	if err := s.SaveDelivery(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueDeliveries(ctx(t), time.Now().Add(time.Second), 10, nil)
	if got := deliverySummary(due); len(got) != 2 || !slices.Contains(got, "host-00000001:"+eim.EventHostConnectionLost) {
		t.Errorf("due once delivered: got %v, want host-1's first loss and host-2's", got)
	}
	page, total, err := s.Deliveries(ctx(t), p, w1.ID, 2, 0)
	if err != nil || total != 4 || len(page) != 2 {
		t.Fatalf("Deliveries: got %d of %d, %v; want 2 of 4", len(page), total, err)
	}
	if last, _, _ := s.Deliveries(ctx(t), p, w1.ID, 10, 0); last[3].State != eim.DeliveryDelivered || last[3].LastStatus != 204 || last[3].Attempts != 2 {
		t.Errorf("the first delivery as recorded: got %+v, want delivered, 204, 2 attempts", last[3])
	}
	if _, n, _ := s.Deliveries(ctx(t), other, w1.ID, 10, 0); n != 0 {
		t.Errorf("Deliveries from another project: got %d, want none", n)
	}

	// A change of the webhook: its pending deliveries go to the new URL
	// with the new secret; the delivered ones keep what was sent.
	w1.URL, w1.Secret = "http://127.0.0.1:2/moved", "0123456789abcdef-rotated"
	if err := s.UpdateWebhook(alice, w1); err != nil {
		t.Fatal(err)
	}
	all, _, _ := s.Deliveries(ctx(t), p, w1.ID, 10, 0)
	for _, d := range all {
		moved := d.URL == w1.URL && d.Secret == w1.Secret
		if moved != (d.State == eim.DeliveryPending) {
			t.Errorf("delivery %s (%s) after the change: URL %s; want the new URL and secret only when pending", d.ID, d.State, d.URL)
		}
	}
	if err := s.UpdateWebhook(ctx(t), &eim.Webhook{ID: w1.ID, Project: other, URL: "http://x/", EventTypes: w1.EventTypes, Secret: w1.Secret}); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("UpdateWebhook in another project: got %v, want ENOTFOUND", err)
	}

	// Deleting the webhook drops what is pending; a deleted project's
	// webhooks and marks go with DeleteWebhooksOf.
	if err := s.DeleteWebhook(alice, p, w1.ID); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueDeliveries(ctx(t), time.Now().Add(time.Second), 10, nil); len(due) != 0 {
		t.Errorf("due after the webhook's deletion: got %v, want none", deliverySummary(due))
	}
	if err := s.DeleteWebhooksOf(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	if ws, _ := s.ListWebhooks(ctx(t), p); len(ws) != 0 {
		t.Errorf("webhooks after DeleteWebhooksOf: got %d, want none", len(ws))
	}
	if cursors, _ := s.AuditCursors(ctx(t), p, []string{"host-00000001"}); len(cursors) != 0 {
		t.Errorf("cursors after DeleteWebhooksOf: got %v, want none", cursors)
	}
}

func deliverySummary(ds []*eim.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ResourceID+":"+d.EventType)
	}
	return out
}
