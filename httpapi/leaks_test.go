package httpapi_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// Nothing a caller is refused tells them about another project: a project
// that is not theirs answers as one that does not exist, and a machine
// registered elsewhere registers here as if it were not.
func TestNoCrossTenantExistence(t *testing.T) {
	e := newEnv(t, httpapi.Options{})

	t.Run("projects", func(t *testing.T) {
		for _, tok := range []string{tokRW, tokRO} {
			for _, m := range []struct{ method, path string }{
				{"GET", "/regions"}, {"POST", "/regions"}, {"GET", ""}, {"PATCH", "/settings"},
			} {
				var body any
				if m.method != "GET" {
					body = map[string]any{}
				}
				exists := e.do(t, m.method, "/v1/projects/p2"+m.path, tok, body)
				missing := e.do(t, m.method, "/v1/projects/nope"+m.path, tok, body)
				wantError(t, exists, 403, "PermissionDenied", `"p2"`)
				wantError(t, missing, 403, "PermissionDenied", `"nope"`)
				if a, b := strings.ReplaceAll(exists.str("message"), "p2", "X"), strings.ReplaceAll(missing.str("message"), "nope", "X"); a != b {
					t.Errorf("%s %s: messages differ: %q and %q", m.method, m.path, a, b)
				}
			}
		}
		// An administrator may know.
		wantError(t, e.do(t, "GET", "/v1/projects/nope/regions", tokAdmin, nil), 404, "NotFound")
	})

	t.Run("a UUID another project registered", func(t *testing.T) {
		uuid := newUUID()
		e.must(t, 200, "POST", "/v1/projects/p1/compute/hosts/register", tokRW, map[string]any{"uuid": uuid, "serialNumber": "SNLEAK0001"})
		for _, body := range []map[string]any{
			{"uuid": uuid},
			{"serialNumber": "SNLEAK0001"},
		} {
			e.must(t, 200, "POST", "/v1/projects/p2/compute/hosts/register", tokRW2, body)
		}
		other := newUUID()
		e.must(t, 200, "POST", "/v1/projects/p1/compute/hosts", tokRW, map[string]any{"name": "x", "uuid": other})
		e.must(t, 200, "POST", "/v1/projects/p2/compute/hosts", tokRW2, map[string]any{"name": "x", "uuid": other})
		// Within a project a UUID is still unique.
		wantError(t, e.do(t, "POST", "/v1/projects/p2/compute/hosts", tokRW2, map[string]any{"name": "y", "uuid": uuid}), 409, "AlreadyExists", "uuid")
	})
}
