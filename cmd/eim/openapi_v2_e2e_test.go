package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim/api"
)

// TestV2RoutesServed asks the real server (every module, one process)
// for each v2 operation of the OpenAPI document, in a project that does
// not exist: a v2 handler answers 403 PermissionDenied ("no access to
// project"), where a path no module serves falls through to the v1 API's
// 404. clusters/openapi_test.go checks the bodies, and that the modules'
// routes are exactly the document's.
func TestV2RoutesServed(t *testing.T) {
	dir := t.TempDir()
	url, _ := startServer(t, dir)
	tok, err := os.ReadFile(filepath.Join(dir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.Spec(), &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{projectName}", "no-such-project", "{name}", "c1", "{version}", "v1.0.0",
		"{nodeId}", "host-12345678", "{cluster}", "c1")
	ask := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Activeprojectid", "00000000-0000-4000-8000-000000000000")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct{ Code, Message string }
		b, _ := io.ReadAll(res.Body)
		json.Unmarshal(b, &e)
		return res.StatusCode, e.Code + ": " + e.Message
	}
	var ops []string
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/v2/") {
			continue
		}
		for m := range item {
			if m == "get" || m == "put" || m == "post" || m == "delete" || m == "patch" {
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	if len(ops) < 38 {
		t.Fatalf("%d v2 operations in the document, want 38", len(ops))
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if op == "GET /v2/healthz" { // the original's health check: no project, no token needed
			if st, _ := ask(method, path); st != http.StatusOK {
				t.Errorf("%s: got %d, want 200", op, st)
			}
			continue
		}
		st, msg := ask(method, fill.Replace(path))
		if st != http.StatusForbidden || !strings.Contains(msg, "no access to project") {
			t.Errorf("%s: got %d %q, want 403 from a v2 handler (no access to project)", op, st, msg)
		}
	}
	// The probe tells: a v2 path no module serves is not answered so.
	if st, msg := ask("GET", "/v2/projects/no-such-project/no-such-thing"); st != http.StatusNotFound {
		t.Errorf("an unserved v2 path: got %d %q, want the fallback's 404", st, msg)
	}
}
