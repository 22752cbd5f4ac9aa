package httpapi_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// TestPutProjectInput checks the tenant manager's PUT /v1/projects/{name}
// refuses bad input with a 400 naming what is wrong, and creates nothing
// then.
func TestPutProjectInput(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	for _, c := range []struct {
		name, path string
		body       any
		word       string
	}{
		{"bad name", "/v1/projects/Bad_Name", map[string]any{"description": "x"}, "name"},
		{"unknown field", "/v1/projects/p9", map[string]any{"name": "p9"}, "name"},
		{"description not a string", "/v1/projects/p9", map[string]any{"description": 3}, "description"},
		{"control character", "/v1/projects/p9", map[string]any{"description": "a\x01b"}, "description"},
		{"too long", "/v1/projects/p9", map[string]any{"description": strings.Repeat("x", 257)}, "description"},
		{"update_if_exists not a bool", "/v1/projects/p9?update_if_exists=maybe", map[string]any{}, "update_if_exists"},
		{"not an object", "/v1/projects/p9", "[]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			words := []string{}
			if c.word != "" {
				words = append(words, c.word)
			}
			wantError(t, e.do(t, "PUT", c.path, tokAdmin, c.body), 400, "InvalidArgument", words...)
		})
	}
	wantError(t, e.do(t, "GET", "/v1/projects/p9", tokAdmin, nil), 404, "NotFound")
	// An empty body creates the project without a description.
	p := e.must(t, 200, "PUT", "/v1/projects/p9", tokAdmin, "")
	if p.str("name") != "p9" || !strings.Contains(string(p.raw), `"spec":{}`) || !strings.Contains(string(p.raw), `"projectStatus":{`) {
		t.Errorf("PUT with no body: got %s, want p9 with an empty spec and its projectStatus", p.raw)
	}
}
