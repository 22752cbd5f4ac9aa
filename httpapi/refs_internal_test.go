package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/eimhq/eim"
)

// TestEmitRefsRunsAndInstances covers the references the public API tests
// cannot reach without a node: an OS update run's appliedPolicy and
// instance, and an instance's empty lists.
func TestEmitRefsRunsAndInstances(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		name string
		r    eim.Resource
		want map[string]string // key → "object", "[]" or "null"
	}{
		{"run without policy or instance", &eim.OSUpdateRun{Meta: eim.Meta{ResourceID: "osupdaterun-00000001"}},
			map[string]string{"appliedPolicy": "object", "instance": "object"}},
		{"run with an instance", &eim.OSUpdateRun{Meta: eim.Meta{ResourceID: "osupdaterun-00000002"}, Instance: &eim.Instance{}},
			map[string]string{"appliedPolicy": "object", "instance": "object"}},
		{"instance alone", &eim.Instance{Meta: eim.Meta{ResourceID: "inst-00000001"}},
			map[string]string{"customConfig": "[]", "customConfigID": "[]", "host": "null", "os": "null", "localaccount": "null", "updatePolicy": "null"}},
		{"policy without target", &eim.OSUpdatePolicy{Meta: eim.Meta{ResourceID: "osupdatepolicy-00000001"}},
			map[string]string{"targetOs": "null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.writeJSON(w, 200, tc.r)
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				v, present := m[k]
				var got string
				switch x := v.(type) {
				case map[string]any:
					got = "object"
				case []any:
					if len(x) == 0 {
						got = "[]"
					}
				case nil:
					if present {
						got = "null"
					}
				}
				if got != want {
					t.Errorf("%s: got %v (present %v), want %s", k, v, present, want)
				}
			}
			if run, ok := m["instance"].(map[string]any); ok {
				if cc, ok := run["customConfig"].([]any); !ok || len(cc) != 0 {
					t.Errorf("run's instance: customConfig %v, want []", run["customConfig"])
				}
			}
		})
	}
}
