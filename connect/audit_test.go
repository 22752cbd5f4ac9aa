package connect_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/connect"
)

// TestProxiedRequestsAudited: every request through a tunnel is one
// record of the project's audit log — the caller, the cluster, the
// request and its answer — written by the replica holding the tunnel,
// also for a request another replica forwarded there (once); a request
// the gateway refuses (no role for it) is not.
func TestProxiedRequestsAudited(t *testing.T) {
	e := newEnv(t, 2)
	g0, g1 := e.gws[0], e.gws[1]
	connected, _ := e.runAgent("edge", e.token(g1, "edge", ""))
	<-connected // to g0, the first backend
	waitFor(t, "r0 holds the tunnel, in the registry", 5*time.Second, func() bool { return g0.g.Held() == 1 && e.registered("edge") == "r0" })
	alice := e.mint("alice", "p-one_cl-rw")
	for _, c := range []struct {
		gw   *gateway
		path string
	}{{g0, "/kubernetes/p-one-edge/api/v1/namespaces"}, {g1, "/kubernetes/p-one-edge/version"}} {
		resp := e.do(c.gw, http.MethodGet, c.path, alice, nil)
		if body := readAll(resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", c.path, resp.Status, body)
		}
	}
	reader := e.mint("bob", "p-one_cl-r")
	if resp := e.do(g0, http.MethodDelete, "/kubernetes/p-one-edge/api/v1/namespaces/x", reader, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a reader's DELETE: %s, want 403", resp.Status)
	} else {
		readAll(resp)
	}

	type request struct {
		Method, Path, Replica string
		Status                int
	}
	var recs []eim.AuditRecord
	waitFor(t, "two records in the audit log", 5*time.Second, func() bool {
		var err error
		recs, _, err = e.store.Audit(t.Context(), "p-one", eim.AuditQuery{Filter: `action = "` + connect.AuditAction + `"`, Limit: 10})
		return err == nil && len(recs) >= 2
	})
	time.Sleep(time.Second) // a record written late (a duplicate) would show now
	recs, _, err := e.store.Audit(t.Context(), "p-one", eim.AuditQuery{Filter: `action = "` + connect.AuditAction + `"`, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]request{}
	for _, r := range recs {
		if r.Kind != eim.KindCluster || r.ResourceID != "edge" {
			t.Errorf("record %+v: want kind cluster, resource edge", r)
		}
		var q request
		if err := json.Unmarshal(r.Changes["request"].New, &q); err != nil {
			t.Fatalf("record %+v: request: %v", r, err)
		}
		got[r.Principal+" "+q.Method+" "+q.Path] = q
	}
	want := map[string]request{
		"user:alice GET /api/v1/namespaces": {Method: "GET", Path: "/api/v1/namespaces", Replica: "r0", Status: 200},
		"user:alice GET /version":           {Method: "GET", Path: "/version", Replica: "r0", Status: 200},
	}
	if len(recs) != len(want) {
		t.Errorf("%d records, want %d (a forwarded request recorded once): %v", len(recs), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("record %q: got %+v, want %+v", k, got[k], w)
		}
	}
}
