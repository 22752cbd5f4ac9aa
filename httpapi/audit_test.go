package httpapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func auditEnv(t *testing.T, dsn string) *env {
	t.Helper()
	if dsn == "" {
		return newEnv(t, httpapi.Options{})
	}
	st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvWith(t, inventory.New(st, inventory.Options{}), nil, httpapi.Options{})
}

// TestAuditLog: the API's writes are in the project's audit log under the
// caller's subject, with the fields changed; the log filters and pages,
// and only the project's members see it.
func TestAuditLog(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testAuditLog(t, "") })
	t.Run("postgres", func(t *testing.T) { testAuditLog(t, storetest.PostgresURL(t)) })
}

func testAuditLog(t *testing.T, dsn string) {
	e := auditEnv(t, dsn)
	region := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "eu"}).str("resourceId")
	e.must(t, 200, "PATCH", "~/regions/"+region, tokAdmin, map[string]any{"name": "europe"})
	e.must(t, 200, "POST", "/v1/projects/p2/regions", tokRW2, map[string]any{"name": "theirs"})

	r := e.must(t, 200, "GET", "~/audit?filter="+url.QueryEscape(`resourceId="`+region+`"`), tokRO, nil)
	recs := r.items("auditRecords")
	if len(recs) != 2 || r.num("totalElements") != 2 {
		t.Fatalf("audit of %s: got %s, want its creation and its change", region, r.raw)
	}
	upd, crt := recs[0].(map[string]any), recs[1].(map[string]any)
	if upd["principal"] != "user:admin" || upd["action"] != "UPDATED" || upd["kind"] != "region" {
		t.Errorf("newest record: got %v, want user:admin UPDATED region", upd)
	}
	name := upd["changes"].(map[string]any)["name"].(map[string]any)
	if name["old"] != "eu" || name["new"] != "europe" {
		t.Errorf("name change: got %v, want eu → europe", name)
	}
	if crt["principal"] != "user:rw" || crt["action"] != "CREATED" {
		t.Errorf("first record: got %v, want user:rw CREATED", crt)
	}
	for _, tc := range []struct {
		filter string
		want   int
	}{
		{`principal="user:rw"`, 1},
		{`action="UPDATED" AND kind="region"`, 1},
		{`time>"2000-01-01T00:00:00Z"`, 4}, // and the project's creation, with its default provider
		{`time<"2000-01-01T00:00:00Z"`, 0},
	} {
		r := e.must(t, 200, "GET", "~/audit?filter="+url.QueryEscape(tc.filter), tokRO, nil)
		if got := len(r.items("auditRecords")); got != tc.want {
			t.Errorf("filter %s: got %d records, want %d: %s", tc.filter, got, tc.want, r.raw)
		}
	}
	r = e.must(t, 200, "GET", "~/audit?pageSize=1&offset=1", tokRO, nil)
	if len(r.items("auditRecords")) != 1 || r.num("totalElements") != 4 || r.obj["hasNext"] != true || r.items("auditRecords")[0].(map[string]any)["action"] != "CREATED" {
		t.Errorf("page 2 of 1: got %s, want the region's creation, 1 record of 4, hasNext", r.raw)
	}

	// Tenancy: p2's member does not see p1's log; p1's log has none of p2.
	wantError(t, e.do(t, "GET", "~/audit", tokRW2, nil), 403, "PermissionDenied")
	r = e.must(t, 200, "GET", "/v1/projects/p2/audit", tokRW2, nil)
	for _, it := range r.items("auditRecords") {
		if rec := it.(map[string]any); rec["resourceId"] == region {
			t.Errorf("p2's log shows p1's region: %s", r.raw)
		}
	}

	// Bad input names the parameter.
	wantError(t, e.do(t, "GET", "~/audit?filter="+url.QueryEscape(`nosuch="x"`), tokRO, nil), 400, "InvalidArgument", "nosuch")
	wantError(t, e.do(t, "GET", "~/audit?filter="+strings.Repeat("a", 1001), tokRO, nil), 400, "InvalidArgument", "filter")
	wantError(t, e.do(t, "GET", "~/audit?pageSize=1000", tokRO, nil), 400, "InvalidArgument", "pageSize")
}

// TestWebhookResources: webhooks are created, listed, read and deleted
// per project; the secret is never shown but once when generated; bad
// input is a 400 naming the field.
func TestWebhookResources(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	r := e.must(t, 200, "POST", "~/webhooks", tokRW, map[string]any{"url": "http://127.0.0.1:9/hook", "eventTypes": []string{"host.onboarded", "instance.running"}, "secret": "0123456789abcdefXYZ"})
	id := r.str("webhookId")
	if !eim.ValidID(eim.KindWebhook, id) || r.obj["secret"] != nil || strings.Contains(string(r.raw), "0123456789abcdefXYZ") {
		t.Fatalf("create: got %s, want an ID and no secret", r.raw)
	}
	gen := e.must(t, 200, "POST", "~/webhooks", tokRW, map[string]any{"url": "https://receiver.example.com/x", "eventTypes": []string{"project.deleted"}})
	secret := gen.str("secret")
	if len(secret) < 32 {
		t.Errorf("generated secret: got %q, want one shown once", secret)
	}
	g := e.must(t, 200, "GET", "~/webhooks/"+gen.str("webhookId"), tokRO, nil)
	if g.obj["secret"] != nil || strings.Contains(string(g.raw), secret) {
		t.Errorf("get shows the secret: %s", g.raw)
	}
	l := e.must(t, 200, "GET", "~/webhooks", tokRO, nil)
	if len(l.items("webhooks")) != 2 || strings.Contains(string(l.raw), secret) || strings.Contains(string(l.raw), "XYZ") {
		t.Errorf("list: got %s, want 2 webhooks and no secret", l.raw)
	}
	d := e.must(t, 200, "GET", "~/webhooks/"+id+"/deliveries", tokRO, nil)
	if d.num("totalElements") != 0 {
		t.Errorf("deliveries: got %s, want none yet", d.raw)
	}
	// The audit log has the creation, its secret redacted.
	a := e.must(t, 200, "GET", "~/audit?filter="+url.QueryEscape(`kind="webhook"`), tokRO, nil)
	if len(a.items("auditRecords")) != 2 || strings.Contains(string(a.raw), "XYZ") || strings.Contains(string(a.raw), secret) || !strings.Contains(string(a.raw), "[redacted]") {
		t.Errorf("audit of webhooks: got %s, want 2 creations, secrets redacted", a.raw)
	}

	// Per project; read-only callers cannot write.
	wantError(t, e.do(t, "GET", "/v1/projects/p2/webhooks/"+id, tokRW2, nil), 404, "NotFound")
	if l := e.must(t, 200, "GET", "/v1/projects/p2/webhooks", tokRW2, nil); len(l.items("webhooks")) != 0 {
		t.Errorf("p2's webhooks: got %s, want none", l.raw)
	}
	wantError(t, e.do(t, "GET", "~/webhooks", tokRW2, nil), 403, "PermissionDenied")
	wantError(t, e.do(t, "DELETE", "/v1/projects/p2/webhooks/"+id, tokRW2, nil), 404, "NotFound")
	wantError(t, e.do(t, "POST", "~/webhooks", tokRO, map[string]any{"url": "http://127.0.0.1/", "eventTypes": []string{"host.onboarded"}}), 403, "PermissionDenied")

	for _, tc := range []struct {
		body  any
		words []string
	}{
		{map[string]any{"url": "ftp://x/y", "eventTypes": []string{"host.onboarded"}}, []string{"url", "ftp"}},
		{map[string]any{"url": "http://user:pw@x/y", "eventTypes": []string{"host.onboarded"}}, []string{"url", "user"}},
		{map[string]any{"url": "http://169.254.169.254/latest/meta-data", "eventTypes": []string{"host.onboarded"}}, []string{"url", "link-local"}},
		{map[string]any{"url": "http://[fe80::1]/x", "eventTypes": []string{"host.onboarded"}}, []string{"url", "link-local"}},
		{map[string]any{"url": "http://metadata.google.internal/x", "eventTypes": []string{"host.onboarded"}}, []string{"url", "metadata"}},
		{map[string]any{"url": "::not a url", "eventTypes": []string{"host.onboarded"}}, []string{"url"}},
		{map[string]any{"url": "http:///nohost", "eventTypes": []string{"host.onboarded"}}, []string{"url", "host"}},
		{map[string]any{"url": "http://x/" + strings.Repeat("a", 2100), "eventTypes": []string{"host.onboarded"}}, []string{"url", "2048"}},
		{map[string]any{"url": "http://127.0.0.1/x", "eventTypes": []string{"host.exploded"}}, []string{"eventTypes", "host.exploded"}},
		{map[string]any{"url": "http://127.0.0.1/x", "eventTypes": []string{}}, []string{"eventTypes"}},
		{map[string]any{"url": "http://127.0.0.1/x"}, []string{"eventTypes"}},
		{map[string]any{"url": "http://127.0.0.1/x", "eventTypes": "host.onboarded"}, []string{"eventTypes"}},
		{map[string]any{"url": "http://127.0.0.1/x", "eventTypes": []string{"host.onboarded"}, "secret": "short"}, []string{"secret"}},
		{map[string]any{"url": "http://127.0.0.1/x", "eventTypes": []string{"host.onboarded"}, "colour": "red"}, []string{"colour"}},
		{map[string]any{"eventTypes": []string{"host.onboarded"}}, []string{"url", "required"}},
	} {
		wantError(t, e.do(t, "POST", "~/webhooks", tokRW, tc.body), 400, "InvalidArgument", tc.words...)
	}
	wantError(t, e.do(t, "GET", "~/webhooks/nope", tokRO, nil), 400, "InvalidArgument", "webhookId")

	// Changes: the URL, the event types, a new secret (generated: shown
	// once); the audit log has them, the secret redacted.
	u := e.must(t, 200, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"url": "http://127.0.0.1:10/moved", "eventTypes": []string{"instance.update_failed"}})
	if u.str("url") != "http://127.0.0.1:10/moved" || len(u.items("eventTypes")) != 1 || u.obj["secret"] != nil {
		t.Errorf("patch: got %s, want the new URL and types, no secret", u.raw)
	}
	if g := e.must(t, 200, "GET", "~/webhooks/"+id, tokRO, nil); g.str("url") != "http://127.0.0.1:10/moved" {
		t.Errorf("after the patch: got %s", g.raw)
	}
	if n := e.must(t, 200, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"secret": "new"}); len(n.str("secret")) < 32 {
		t.Errorf("patch secret new: got %s, want the generated secret once", n.raw)
	}
	a = e.must(t, 200, "GET", "~/audit?filter="+url.QueryEscape(`resourceId="`+id+`" AND action="UPDATED"`), tokRO, nil)
	if recs := a.items("auditRecords"); len(recs) != 2 || strings.Contains(string(a.raw), "XYZ") ||
		recs[1].(map[string]any)["changes"].(map[string]any)["url"].(map[string]any)["new"] != "http://127.0.0.1:10/moved" ||
		recs[0].(map[string]any)["changes"].(map[string]any)["secret"].(map[string]any)["new"] != "[redacted]" {
		t.Errorf("audit of the changes: got %s, want the URL's change and the secret's, redacted", a.raw)
	}
	wantError(t, e.do(t, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"url": "http://169.254.169.254/"}), 400, "InvalidArgument", "url")
	wantError(t, e.do(t, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"eventTypes": []string{"nope"}}), 400, "InvalidArgument", "eventTypes")
	wantError(t, e.do(t, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"secret": "short"}), 400, "InvalidArgument", "secret")
	wantError(t, e.do(t, "PATCH", "~/webhooks/"+id, tokRW, map[string]any{"webhookId": "x"}), 400, "InvalidArgument", "webhookId")
	wantError(t, e.do(t, "PATCH", "~/webhooks/"+id, tokRO, map[string]any{"url": "http://127.0.0.1/"}), 403, "PermissionDenied")
	wantError(t, e.do(t, "PATCH", "/v1/projects/p2/webhooks/"+id, tokRW2, map[string]any{"url": "http://127.0.0.1/"}), 404, "NotFound")

	e.must(t, 200, "DELETE", "~/webhooks/"+id, tokRW, nil)
	wantError(t, e.do(t, "GET", "~/webhooks/"+id, tokRO, nil), 404, "NotFound")
}

// TestWebhookPrivateAddresses: --webhook-allow-private lets URLs point at
// link-local addresses.
func TestWebhookPrivateAddresses(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), t.TempDir()+"/eim.db", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvWith(t, inventory.New(st, inventory.Options{WebhookURLs: eim.URLPolicy{AllowPrivate: true}}), nil, httpapi.Options{})
	e.must(t, 200, "POST", "~/webhooks", tokRW, map[string]any{"url": "http://169.254.169.254/x", "eventTypes": []string{"host.onboarded"}})
}
