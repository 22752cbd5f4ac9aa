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

// TestEmitRefsSharedRegion: a region without a parent reached by two paths
// of one answer (two sites of one region, say) gets the shared empty
// parentRegion once; the second visit must not fill in the empty region
// itself, which would make it its own parent: a cycle the encoder refuses
// (issue 31: workload members of a host at a site answered 500).
func TestEmitRefsSharedRegion(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	region := &eim.Region{Meta: eim.Meta{ResourceID: "region-00000001"}}
	host := &eim.Host{Meta: eim.Meta{ResourceID: "host-00000001"}, Site: &eim.Site{Meta: eim.Meta{ResourceID: "site-00000001"}, Region: region}}
	inst := &eim.Instance{Meta: eim.Meta{ResourceID: "inst-00000001"}, Host: host}
	m := &eim.WorkloadMember{Meta: eim.Meta{ResourceID: "workloadmember-00000001"}, Instance: inst, Member: inst}
	w := httptest.NewRecorder()
	h.writeJSON(w, 200, m)
	if w.Code != 200 {
		t.Fatalf("got %d %s, want 200", w.Code, w.Body)
	}
	var got struct {
		Member struct {
			Host struct {
				Site struct {
					Region struct {
						ResourceID   string `json:"resourceId"`
						ParentRegion *struct {
							ResourceID   string          `json:"resourceId"`
							ParentRegion json.RawMessage `json:"parentRegion"`
						} `json:"parentRegion"`
					} `json:"region"`
				} `json:"site"`
			} `json:"host"`
		} `json:"member"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	r := got.Member.Host.Site.Region
	if r.ResourceID != "region-00000001" || r.ParentRegion == nil || r.ParentRegion.ResourceID != "" || string(r.ParentRegion.ParentRegion) != "null" {
		t.Errorf("member's host's region: got %+v, want its empty parentRegion with parentRegion null", r)
	}
}
