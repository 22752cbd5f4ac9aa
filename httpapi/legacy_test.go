package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/httpapi"
)

const legacy = "/edge-infra.orchestrator.apis/v2"

// doWith sends a request with extra headers (see env.do).
func (e *env) doWith(t testing.TB, method, path, token string, hdr map[string]string, body any) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.obj); err != nil {
			t.Fatalf("%s %s: response is not a JSON object: %v: %s", method, path, err, raw)
		}
	}
	return r
}

// TestLegacySites drives a site through its life over the legacy paths,
// the way the original's generated client manages sites: with the project
// in ?projectName, and with its UUID in the ActiveProjectID header.
func TestLegacySites(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	p1ID := e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil).str("id")
	region := e.region(t, "emea")
	for _, c := range []struct {
		name  string
		query string
		hdr   map[string]string
	}{
		{"projectName", "?projectName=p1", nil},
		{"ActiveProjectID", "", map[string]string{"ActiveProjectID": p1ID}},
		{"ActiveProjectID in upper case", "", map[string]string{"ActiveProjectID": strings.ToUpper(p1ID)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			do := func(want int, method, path string, body any) resp {
				t.Helper()
				q := c.query
				if q != "" && strings.Contains(path, "?") {
					q = "&" + q[1:]
				}
				r := e.doWith(t, method, legacy+path+q, tokRW, c.hdr, body)
				if r.status != want {
					t.Fatalf("%s %s: got status %d, want %d; body %s", method, path, r.status, want, r.raw)
				}
				return r
			}
			site := do(200, "POST", "/sites", map[string]any{"name": "berlin", "regionId": region})
			id := site.str("resourceId")
			if !strings.HasPrefix(id, "site-") || site.str("name") != "berlin" {
				t.Fatalf("created site: got %s", site.raw)
			}
			// The same site, in the same project, over the v1 path.
			if got := e.must(t, 200, "GET", "~/sites/"+id, tokRO, nil); got.str("name") != "berlin" {
				t.Fatalf("v1 read of the legacy site: got %s", got.raw)
			}
			if got := do(200, "GET", "/sites/"+id, nil); got.str("resourceId") != id {
				t.Fatalf("get: got %s", got.raw)
			}
			list := do(200, "GET", "/sites?regionId="+region, nil)
			if list.num("totalElements") != 1 || len(list.items("sites")) != 1 {
				t.Fatalf("list: got %s, want the one site", list.raw)
			}
			if got := do(200, "PUT", "/sites/"+id, map[string]any{"name": "munich", "regionId": region}); got.str("name") != "munich" {
				t.Fatalf("put: got %s", got.raw)
			}
			if got := do(200, "PATCH", "/sites/"+id, map[string]any{"name": "hamburg"}); got.str("name") != "hamburg" {
				t.Fatalf("patch: got %s", got.raw)
			}
			if got := do(200, "DELETE", "/sites/"+id, nil); string(bytes.TrimSpace(got.raw)) != "{}" {
				t.Fatalf("delete: got %s, want {}", got.raw)
			}
			do(404, "GET", "/sites/"+id, nil)
			e.must(t, 404, "GET", "~/sites/"+id, tokRO, nil)
		})
	}
}

// TestLegacyProject checks how a legacy request names its project, and
// that access is what the v1 path for that project allows.
func TestLegacyProject(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	p1ID := e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil).str("id")
	p2ID := e.must(t, 200, "GET", "/v1/projects/p2", tokAdmin, nil).str("id")
	hdr := func(id string) map[string]string { return map[string]string{"ActiveProjectID": id} }
	tests := []struct {
		name, method, path, token string
		hdr                       map[string]string
		status                    int
		code                      string
		words                     []string
	}{
		{"no project", "GET", "/regions", tokAdmin, nil, 400, "InvalidArgument", []string{"projectName", "ActiveProjectID"}},
		{"no project, no token", "GET", "/regions", "", nil, 401, "Unauthenticated", nil},
		{"empty projectName and no header", "GET", "/regions?projectName=", tokAdmin, nil, 400, "InvalidArgument", []string{"projectName", "ActiveProjectID"}},
		{"empty projectName: the header names the project (as generated clients send it)", "GET", "/regions?projectName=", tokRO, hdr(p1ID), 200, "", nil},
		{"unknown projectName", "GET", "/regions?projectName=nope", tokAdmin, nil, 404, "NotFound", []string{"project", "nope"}},
		{"unknown projectName, no token", "GET", "/regions?projectName=nope", "", nil, 401, "Unauthenticated", nil},
		{"unknown ActiveProjectID", "GET", "/regions", tokAdmin, hdr("44444444-4444-4444-8444-444444444444"), 404, "NotFound", []string{"project"}},
		{"unknown ActiveProjectID, no token", "GET", "/regions", "", hdr("44444444-4444-4444-8444-444444444444"), 401, "Unauthenticated", nil},
		{"ActiveProjectID not a UUID", "GET", "/regions", tokAdmin, hdr("p1"), 400, "InvalidArgument", []string{"ActiveProjectID"}},
		// Another tenant's project: answered as its v1 path answers (below).
		{"projectName wins over the header", "GET", "/regions?projectName=p2", tokRW, hdr(p1ID), 0, "", nil},
		// By header, a project the caller may not see is named by the
		// UUID asked for: its name is not told to a stranger, and an
		// unknown UUID answers the same.
		{"header of another tenant's project", "GET", "/regions", tokRW, hdr(p2ID), 403, "PermissionDenied", []string{p2ID}},
		{"unknown ActiveProjectID, not an admin", "GET", "/regions", tokRW, hdr("44444444-4444-4444-8444-444444444444"), 403, "PermissionDenied", []string{"44444444-4444-4444-8444-444444444444"}},
		{"projectName of another tenant's project", "GET", "/regions?projectName=p2", tokRW, nil, 0, "", nil},
		{"other tenant may not write here", "POST", "/regions?projectName=p1", tokRW2, nil, 0, "", nil},
		{"other tenant may not write here by header", "POST", "/regions", tokRW2, hdr(p1ID), 403, "PermissionDenied", []string{p1ID}},
		{"read-only may read", "GET", "/regions?projectName=p1", tokRO, nil, 200, "", nil},
		{"read-only may read by header", "GET", "/regions", tokRO, hdr(p1ID), 200, "", nil},
		{"read-only may not write", "POST", "/regions?projectName=p1", tokRO, nil, 403, "PermissionDenied", nil},
		{"writer may write", "POST", "/regions", tokRW, hdr(p1ID), 200, "", nil},
		{"admin anywhere", "GET", "/hosts_summary", tokAdmin, hdr(p2ID), 200, "", nil},
		{"unknown legacy path", "GET", "/nothing?projectName=p1", tokAdmin, nil, 404, "NotFound", []string{"no operation"}},
		{"wrong method", "PATCH", "/providers/provider-0000abcd?projectName=p1", tokAdmin, nil, 404, "NotFound", []string{"no operation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.method == "POST" {
				body = map[string]any{"name": "r"}
			}
			r := e.doWith(t, tt.method, legacy+tt.path, tt.token, tt.hdr, body)
			if tt.status == 0 {
				// Refused exactly as the project's own path refuses it.
				project := "p2"
				if tt.token == tokRW2 {
					project = "p1"
				}
				v := e.do(t, tt.method, "/v1/projects/"+project+"/regions", tt.token, body)
				if v.status < 400 || r.status != v.status || r.str("code") != v.str("code") || r.str("message") != v.str("message") {
					t.Fatalf("got %d %s; the v1 path answered %d %s", r.status, r.raw, v.status, v.raw)
				}
				return
			}
			if tt.code == "" {
				if r.status != tt.status {
					t.Fatalf("got status %d, want %d: %s", r.status, tt.status, r.raw)
				}
				return
			}
			wantError(t, r, tt.status, tt.code, tt.words...)
			if tt.hdr != nil && (strings.Contains(r.str("message"), `"p1"`) || strings.Contains(r.str("message"), `"p2"`)) {
				t.Errorf("a refusal by ActiveProjectID names the project: %s", r.raw)
			}
		})
	}
	// An unknown project is answered as on the v1 path.
	for _, c := range []struct{ v1, legacy, token string }{
		{"/v1/projects/nope/regions", legacy + "/regions?projectName=nope", tokAdmin},
		{"/v1/projects/nope/regions", legacy + "/regions?projectName=nope", tokRW},
	} {
		v, l := e.do(t, "GET", c.v1, c.token, nil), e.do(t, "GET", c.legacy, c.token, nil)
		if v.status != l.status || v.str("code") != l.str("code") || v.str("message") != l.str("message") {
			t.Errorf("GET %s answered %d %s, but %s answered %d %s", c.legacy, l.status, l.raw, c.v1, v.status, v.raw)
		}
	}
}

// The reference sits beside the repository (see api/reference_test.go).
var referencePath = filepath.Join("..", "..", "shared", "reference", "eim-openapi.yaml")

// TestLegacyOperationsReachTheirTwins walks the legacy operations of the
// original's document: api.Legacy has each one, and each answers what
// its twin under /v1/projects/p1 answers to the same request.
func TestLegacyOperationsReachTheirTwins(t *testing.T) {
	b, err := os.ReadFile(referencePath)
	if os.IsNotExist(err) {
		t.Skipf("the original API's document is not at %s", referencePath)
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var ref []string
	for path, item := range doc.Paths {
		rest, ok := strings.CutPrefix(path, api.LegacyPrefix)
		if !ok {
			continue
		}
		for m := range item {
			switch m := strings.ToUpper(m); m {
			case "GET", "POST", "PUT", "PATCH", "DELETE":
				ref = append(ref, m+" "+rest)
			}
		}
	}
	sort.Strings(ref)
	var ours []string
	twins := map[string]string{}
	for _, op := range api.Legacy {
		ours = append(ours, op.Method+" "+op.Path)
		twins[op.Method+" "+op.Path] = op.Twin
	}
	sort.Strings(ours)
	if !slices.Equal(ours, ref) {
		t.Fatalf("api.Legacy: got %d operations %v\nwant the reference's %d: %v", len(ours), ours, len(ref), ref)
	}
	if len(ref) != 99 {
		t.Errorf("the reference has %d legacy operations, want 99", len(ref))
	}

	e := newEnv(t, httpapi.Options{})
	ids := strings.NewReplacer("{resourceId}", "x")
	served := 0
	for _, op := range ref {
		method, path, _ := strings.Cut(op, " ")
		t.Run(op, func(t *testing.T) {
			l := e.do(t, method, legacy+ids.Replace(path)+"?projectName=p1", tokAdmin, map[string]any{})
			if l.status == 404 && strings.HasPrefix(l.str("message"), "no operation") {
				t.Fatalf("%s is not routed: %s", op, l.raw)
			}
			v := e.do(t, method, "~"+ids.Replace(twins[op]), tokAdmin, map[string]any{})
			if l.status != v.status || l.str("code") != v.str("code") {
				t.Errorf("got %d %s, but the twin %s %s answered %d %s", l.status, l.raw, method, twins[op], v.status, v.raw)
			}
			served++
		})
	}
	if want := len(ref); served != want {
		t.Errorf("%d legacy operations served, want %d", served, want)
	}
}
