package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/httpapi"
)

func TestAccessRules(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	tests := []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"no token", "GET", "~/regions", "", nil, 401, "Unauthenticated"},
		{"bad token", "GET", "~/regions", "nope", nil, 401, "Unauthenticated"},
		{"read-only may read", "GET", "~/regions", tokRO, nil, 200, ""},
		{"read-only may not write", "POST", "~/regions", tokRO, map[string]any{"name": "x"}, 403, "PermissionDenied"},
		{"other project's writer may not read", "GET", "~/regions", tokRW2, nil, 403, "PermissionDenied"},
		{"writer may write", "POST", "~/regions", tokRW, map[string]any{"name": "x"}, 200, ""},
		{"admin may write anywhere", "POST", "/v1/projects/p2/regions", tokAdmin, map[string]any{"name": "x"}, 200, ""},
		{"unknown project", "GET", "/v1/projects/nope/regions", tokAdmin, nil, 404, "NotFound"},
		{"unauthenticated before unknown project", "GET", "/v1/projects/nope/regions", "", nil, 401, "Unauthenticated"},
		{"healthz is public", "GET", "/healthz", "", nil, 200, ""},
		{"unrouted path", "GET", "~/clusters", tokAdmin, nil, 404, "NotFound"},
		{"unrouted create", "POST", "~/clusters", tokAdmin, map[string]any{}, 404, "NotFound"},
		{"create project needs admin", "POST", "/v1/projects", tokRW, map[string]any{"name": "p3"}, 403, "PermissionDenied"},
		{"delete project needs admin", "DELETE", "/v1/projects/p1?force=true", tokRW, nil, 403, "PermissionDenied"},
		{"list projects needs a token", "GET", "/v1/projects", "", nil, 401, "Unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.token, tt.body)
			if tt.code == "" {
				if r.status != tt.status {
					t.Fatalf("got status %d, want %d: %s", r.status, tt.status, r.raw)
				}
				return
			}
			wantError(t, r, tt.status, tt.code)
		})
	}
	wantError(t, e.do(t, "GET", "/v1/projects/nope/regions", tokAdmin, nil), 404, "NotFound", "project", "nope")
}

func TestProjects(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	p := e.must(t, 200, "POST", "/v1/projects", tokAdmin, map[string]any{"name": "p3"})
	if p.str("name") != "p3" || p.str("id") == "" {
		t.Fatalf("create project got %s, want name p3 and an id", p.raw)
	}
	wantError(t, e.do(t, "POST", "/v1/projects", tokAdmin, map[string]any{"name": "p3"}), 409, "AlreadyExists")
	wantError(t, e.do(t, "POST", "/v1/projects", tokAdmin, map[string]any{"title": "x"}), 400, "InvalidArgument", "title")
	all := e.must(t, 200, "GET", "/v1/projects?view=eim", tokAdmin, nil)
	if n := len(all.items("projects")); n < 3 {
		t.Errorf("admin sees %d projects, want ≥ 3: %s", n, all.raw)
	}
	mine := e.must(t, 200, "GET", "/v1/projects?view=eim", tokRO, nil)
	if items := mine.items("projects"); len(items) != 1 || items[0].(map[string]any)["name"] != "p1" {
		t.Errorf("read-only caller sees %s, want only p1", mine.raw)
	}
	e.region(t, "keep")
	// Force deletes a project with resources; afterwards it is gone.
	del := e.must(t, 200, "DELETE", "/v1/projects/p1?force=true", tokAdmin, nil)
	if string(del.raw) != "{}\n" {
		t.Errorf("delete project body got %q, want {}", del.raw)
	}
	wantError(t, e.do(t, "GET", "~/regions", tokAdmin, nil), 404, "NotFound", "p1")
}

func TestBodyRules(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	big := `{"name":"` + strings.Repeat("a", 101<<10) + `"}`
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		words  []string
	}{
		{"unknown field", `{"name":"h","uuid":"` + newUUID() + `","colour":"red"}`, 400, "InvalidArgument", []string{"colour"}},
		{"type error", `{"name":5}`, 400, "InvalidArgument", []string{"name", "string"}},
		{"bad enum", `{"name":"h","uuid":"` + newUUID() + `","desiredPowerState":"POWER_STATE_WARP"}`, 400, "InvalidArgument", []string{"desiredPowerState"}},
		{"not an object", `[{"name":"h"}]`, 400, "InvalidArgument", []string{"object"}},
		{"empty body", ``, 400, "InvalidArgument", []string{"object"}},
		{"truncated", `{"name":"h"`, 400, "InvalidArgument", nil},
		{"trailing data", `{"name":"h"} x`, 400, "InvalidArgument", nil},
		{"control character", `{"name":"h\u0001","uuid":"` + newUUID() + `"}`, 400, "InvalidArgument", []string{"name"}},
		{"invalid UTF-8", "{\"name\":\"h\xff\"}", 400, "InvalidArgument", []string{"UTF-8"}},
		{"too large", big, 413, "ResourceExhausted", nil},
		{"validation from the inventory", `{"name":"h"}`, 400, "InvalidArgument", []string{"uuid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.do(t, "POST", "~/compute/hosts", tokRW, tt.body), tt.status, tt.code, tt.words...)
		})
	}

	t.Run("read-only fields are ignored", func(t *testing.T) {
		uuid := newUUID()
		r := e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{
			"name": "ro", "uuid": uuid, "resourceId": "host-12345678", "currentState": "HOST_STATE_ONBOARDED",
			"hostStatus": "Running", "serialNumber": "ABCDE12345", "memoryBytes": "17179869184",
			"site": map[string]any{"name": "x"}, "timestamps": map[string]any{"createdAt": "2020-01-01T00:00:00.000Z"},
			"hostNics": []any{}, "inheritedMetadata": []any{map[string]any{"key": "k", "value": "v"}},
		})
		if r.str("resourceId") == "host-12345678" || r.str("currentState") == "HOST_STATE_ONBOARDED" ||
			r.str("hostStatus") == "Running" || r.str("serialNumber") == "ABCDE12345" {
			t.Fatalf("read-only fields were applied: %s", r.raw)
		}
		if r.str("uuid") != uuid {
			t.Fatalf("uuid got %q, want %q", r.str("uuid"), uuid)
		}
	})
	t.Run("snake_case names", func(t *testing.T) {
		rid := e.region(t, "snake")
		r := e.must(t, 200, "POST", "~/sites", tokRW, map[string]any{"name": "s", "region_id": rid, "site_lat": 123, "siteLng": -45})
		if r.str("regionId") != rid || r.num("siteLat") != 123 || r.num("siteLng") != -45 {
			t.Fatalf("got %s, want regionId %s, siteLat 123, siteLng -45", r.raw, rid)
		}
	})
	t.Run("multi-line config keeps its newlines", func(t *testing.T) {
		cfg := "#cloud-config\n\tpackages: [curl]\r\n"
		r := e.must(t, 200, "POST", "~/customConfigs", tokRW, map[string]any{"name": "nl", "config": cfg})
		if r.str("config") != cfg {
			t.Fatalf("config got %q, want %q", r.str("config"), cfg)
		}
	})
}

func TestIDs(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	other := e.must(t, 200, "POST", "/v1/projects/p2/compute/hosts", tokAdmin, map[string]any{"name": "theirs", "uuid": newUUID()}).str("resourceId")
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		// The kind is read from the prefix alone, as the original did: a
		// wrong or unknown prefix is a 400, a known one with a malformed
		// tail names nothing (404).
		{"wrong prefix", "GET", "~/compute/hosts/site-0000abcd", 400, "InvalidArgument"},
		{"unknown prefix", "GET", "~/compute/instances/foo-0000abcd", 400, "InvalidArgument"},
		{"no dash", "GET", "~/compute/instances/inst", 400, "InvalidArgument"},
		{"prefix of another kind sharing letters", "GET", "~/compute/os/osupdaterun-0000abcd", 400, "InvalidArgument"},
		{"malformed host", "GET", "~/compute/hosts/host-XYZ", 404, "NotFound"},
		{"malformed instance", "GET", "~/compute/instances/inst-XXXXXXXX", 404, "NotFound"},
		{"malformed os", "GET", "~/compute/os/os-XXXXXX", 404, "NotFound"},
		{"malformed os update run", "GET", "~/os-update-runs/osupdaterun-111111", 404, "NotFound"},
		{"malformed single schedule", "GET", "~/schedules/single/singlesche-XXXXXX", 404, "NotFound"},
		{"malformed telemetry group", "GET", "~/telemetry/groups/logs/telemetrygroup-XXXXXX", 404, "NotFound"},
		{"upper-case hex", "GET", "~/regions/region-0000ABCD", 404, "NotFound"},
		{"malformed host register", "PATCH", "~/compute/hosts/host-XYZ/register", 404, "NotFound"},
		{"malformed region in the path", "GET", "~/regions/region-XYZ/sites", 404, "NotFound"},
		{"wrong prefix of the region in the path", "GET", "~/regions/site-0000abcd/sites", 400, "InvalidArgument"},
		{"malformed region in the query stays 400", "GET", "~/sites?regionId=region-XYZ", 400, "InvalidArgument"},
		{"legacy malformed instance", "GET", "/edge-infra.orchestrator.apis/v2/instances/inst-XXXXXXXX?projectName=p1", 404, "NotFound"},
		{"legacy wrong prefix", "GET", "/edge-infra.orchestrator.apis/v2/hosts/site-0000abcd?projectName=p1", 400, "InvalidArgument"},
		{"well-formed unknown", "GET", "~/compute/hosts/host-0000abcd", 404, "NotFound"},
		{"other project's", "GET", "~/compute/hosts/" + other, 404, "NotFound"},
		{"delete other project's", "DELETE", "~/compute/hosts/" + other, 404, "NotFound"},
		{"malformed delete", "DELETE", "~/compute/os/os-1", 404, "NotFound"},
		{"malformed put", "PUT", "~/regions/region-", 404, "NotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.do(t, tt.method, tt.path, tokAdmin, map[string]any{"name": "x"}), tt.status, tt.code)
		})
	}
}

func TestLimits(t *testing.T) {
	t.Run("rate limit", func(t *testing.T) {
		// A bucket of one that refills in ~17 minutes: the second request is
		// refused whatever the timing.
		e := newEnv(t, httpapi.Options{RateLimit: 0.001})
		e.must(t, 200, "GET", "/healthz", "", nil)
		r := e.do(t, "GET", "/healthz", "", nil)
		wantError(t, r, 429, "ResourceExhausted")
		if got := r.header.Get("Retry-After"); got != "1000" {
			t.Errorf("Retry-After: got %q, want 1000 (one token at 0.001/s)", got)
		}
	})
	t.Run("in-process calls are not limited again", func(t *testing.T) {
		// The UI's calls on a user's behalf: many per form, none refused;
		// the same client's own calls still are.
		e := newEnv(t, httpapi.Options{RateLimit: 0.001})
		in := httpapi.InProcess(e.h)
		for i := range 5 {
			req := httptest.NewRequest("GET", "/healthz", nil)
			req.RemoteAddr = "192.0.2.7:4000"
			rec := httptest.NewRecorder()
			in.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("in-process call %d: got %d %s", i, rec.Code, rec.Body)
			}
		}
		direct := func() int {
			req := httptest.NewRequest("GET", "/healthz", nil)
			req.RemoteAddr = "192.0.2.7:4000"
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			return rec.Code
		}
		if a, b := direct(), direct(); a != http.StatusOK || b != http.StatusTooManyRequests {
			t.Fatalf("the client's own calls: got %d then %d, want 200 then 429", a, b)
		}
	})
	t.Run("body limit option", func(t *testing.T) {
		e := newEnv(t, httpapi.Options{MaxBodyBytes: 64})
		wantError(t, e.do(t, "POST", "~/regions", tokRW, `{"name":"`+strings.Repeat("a", 100)+`"}`), 413, "ResourceExhausted")
	})
	t.Run("non-printable header", func(t *testing.T) {
		// Go's client refuses to send such a header, so call the handler.
		e := newEnv(t, httpapi.Options{})
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Header.Set("X-Note", "a\x01b")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"InvalidArgument"`) {
			t.Fatalf("got %d %s, want 400 InvalidArgument", rec.Code, rec.Body)
		}
	})
	t.Run("request id", func(t *testing.T) {
		e := newEnv(t, httpapi.Options{})
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Header.Set("X-Request-Id", "abc-123")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if got := rec.Header().Get("X-Request-Id"); got != "abc-123" {
			t.Fatalf("X-Request-Id got %q, want abc-123", got)
		}
	})
}

func TestOpenAPI(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	res, err := e.srv.Client().Get(e.srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !bytes.Equal(b, api.Spec()) || res.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi.yaml got %d %q (%d bytes), want 200 application/yaml with api.Spec()", res.StatusCode, res.Header.Get("Content-Type"), len(b))
	}
}
