package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// TestEmptyReferencesEmitted checks that nested references the original
// always sent as objects are objects with every field at its zero value
// when there is nothing to refer to, and that the others are null rather
// than left out.
func TestEmptyReferencesEmitted(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	root := e.region(t, "root")
	child := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "child", "parentId": root}).str("resourceId")
	lone := e.must(t, 200, "POST", "~/sites", tokRW, map[string]any{"name": "lone"}).str("resourceId")
	site := e.site(t, "under", child)
	host := e.host(t, "h1")

	type check struct {
		path string // a JSON path into the response: keys, "*" for every list item
		want string // "empty region", "object", "null", "[]", "0"
	}
	for _, tc := range []struct {
		name   string
		path   string
		checks []check
	}{
		{"root region", "~/regions/" + root, []check{{"parentRegion", "empty region"}, {"totalSites", "0"}}},
		{"child region", "~/regions/" + child, []check{{"parentRegion.resourceId", root}, {"parentRegion.parentRegion", "empty region"}}},
		{"region list", "~/regions", []check{{"regions.*.parentRegion", "object"}, {"regions.*.totalSites", "0"}}},
		{"site without region", "~/sites/" + lone, []check{{"region", "empty region"}}},
		{"site in region", "~/sites/" + site, []check{{"region.resourceId", child}, {"region.parentId", root}, {"region.parentRegion", "empty region"}}},
		{"host without site", "~/compute/hosts/" + host, []check{{"site", "null"}, {"provider", "null"}, {"instance", "null"}}},
		{"host list", "~/compute/hosts", []check{{"hosts.*.site", "null"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must(t, 200, "GET", tc.path, tokRO, nil)
			var doc any
			if err := json.Unmarshal(r.raw, &doc); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.checks {
				vals := jsonAt(doc, splitPath(c.path))
				if len(vals) == 0 {
					t.Errorf("%s: %s absent, want %s", tc.path, c.path, c.want)
				}
				for _, v := range vals {
					if msg := wantJSON(v, c.want); msg != "" {
						t.Errorf("%s: %s: %s", tc.path, c.path, msg)
					}
				}
			}
		})
	}

	// The host in a site carries the site with its (empty) region.
	h2 := e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "h2", "uuid": newUUID(), "siteId": lone})
	var doc any
	_ = json.Unmarshal(h2.raw, &doc)
	for _, v := range jsonAt(doc, splitPath("site.region")) {
		if msg := wantJSON(v, "empty region"); msg != "" {
			t.Errorf("host in a site without region: site.region: %s", msg)
		}
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// jsonAt returns the values at path; a key present with null yields nil.
func jsonAt(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	switch x := v.(type) {
	case map[string]any:
		if path[0] == "*" {
			return nil
		}
		next, ok := x[path[0]]
		if !ok {
			return nil
		}
		return jsonAt(next, path[1:])
	case []any:
		if path[0] != "*" {
			return nil
		}
		var out []any
		for _, it := range x {
			out = append(out, jsonAt(it, path[1:])...)
		}
		return out
	}
	return nil
}

func wantJSON(v any, want string) string {
	switch want {
	case "null":
		if v != nil {
			return "got " + mustJSON(v) + ", want null"
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return "got " + mustJSON(v) + ", want an object"
		}
	case "0":
		if f, ok := v.(float64); !ok || f != 0 {
			return "got " + mustJSON(v) + ", want 0"
		}
	case "empty region":
		m, ok := v.(map[string]any)
		if !ok {
			return "got " + mustJSON(v) + ", want an empty region object"
		}
		for k, w := range map[string]string{"resourceId": "", "name": "", "parentId": "", "regionID": ""} {
			if got, ok := m[k].(string); !ok || got != w {
				return "empty region: " + k + " got " + mustJSON(m[k]) + ", want \"\""
			}
		}
		if md, ok := m["metadata"].([]any); !ok || len(md) != 0 {
			return "empty region: metadata got " + mustJSON(m["metadata"]) + ", want []"
		}
	default:
		if s, ok := v.(string); !ok || s != want {
			return "got " + mustJSON(v) + ", want " + mustJSON(want)
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
