package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/internal/openapitest"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/workloads"
)

// tokens is a test authenticator: fixed tokens mapped to principals.
type tokens map[string]*eim.Principal

func (tk tokens) Authenticate(_ context.Context, token string) (*eim.Principal, error) {
	if p, ok := tk[token]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// TestEdgeWorkloadsDocumented: the document's edge workload operations are
// exactly the workloads module's routes, and the requests and answers
// (errors, 201 and 202 included) of a sequence over them, served by the
// module over a real SQLite store, are valid against it (kin-openapi),
// with the answers' objects closed: a member the document does not know
// fails.
func TestEdgeWorkloadsDocumented(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inv := inventory.New(st, inventory.Options{})
	proj, err := inv.CreateProject(ctx, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	host, err := inv.RegisterHost(ctx, "a", inventory.HostRegistration{Name: "dev", SerialNumber: "SN00001"})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key, err := seal.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	authn := tokens{
		"writer": {Subject: "writer", Roles: []string{eim.ProjectRole(proj, true)}},
		"reader": {Subject: "reader", Roles: []string{eim.ProjectRole(proj, false)}},
	}
	svc, err := workloads.New(workloads.Options{Store: st, FeedStore: st, Inventory: inv, Authenticator: authn, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range svc.Routes() {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	doc, err := openapi3.NewLoader().LoadFromData(api.Spec())
	if err != nil {
		t.Fatal(err)
	}
	var documented, served []string
	for path, item := range doc.Paths.Map() {
		if strings.Contains(path, "/edgeworkloads") {
			for method := range item.Operations() {
				documented = append(documented, method+" "+path)
			}
		}
	}
	for p := range svc.Routes() {
		served = append(served, p)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented %v, served %v", documented, served)
	}
	router := openapitest.Router(t, doc, srv.URL)

	base := "/v1/projects/a/edgeworkloads"
	spec := func(image string) map[string]any {
		return map[string]any{
			"deviceSelector": map[string]any{"matchLabels": map[string]string{"role": "camera"}},
			"pod": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "cam", "image": image, "env": []any{map[string]any{"name": "K", "valueFrom": map[string]any{"secretKeyRef": map[string]string{"name": "s", "key": "k"}}}},
				"ports": []any{map[string]any{"containerPort": 8080}}}}}},
			"secrets": []any{map[string]any{"name": "s", "items": []any{map[string]any{"key": "k", "value": "v"}}}},
			"data":    map[string]any{"egress": []any{map[string]any{"source": "out", "target": "cam"}}},
		}
	}
	// withPolicy makes a spec select the host and adds a rollout policy (a
	// batch's field set to a bad value when kv is given).
	withPolicy := func(s map[string]any, kv ...any) map[string]any {
		batch := map[string]any{"limit": 1, "updateTimeout": "5m"}
		for i := 0; i+1 < len(kv); i += 2 {
			batch[kv[i].(string)] = kv[i+1]
		}
		delete(s, "deviceSelector")
		s["device"] = host.ResourceID
		s["rolloutPolicy"] = map[string]any{"batches": []any{batch}, "successThreshold": "90%",
			"disruptionBudget": map[string]any{"groupBy": []string{"eim.io/site"}, "maxUnavailable": "25%"}, "honorMaintenanceWindows": false}
		return s
	}
	var logID string
	steps := []struct {
		tok, method, path string
		body              any
		status            int
		setup             func()
	}{
		{tok: "writer", method: "POST", path: base, body: map[string]any{"name": "cam", "spec": spec("quay.io/acme/cam:1")}, status: 201},
		{tok: "writer", method: "POST", path: base, body: map[string]any{"name": "cam", "spec": spec("quay.io/acme/cam:1")}, status: 409},
		{tok: "writer", method: "POST", path: base, body: map[string]any{"name": "Bad_Name", "spec": spec("quay.io/acme/cam:1")}, status: 400},
		{tok: "reader", method: "POST", path: base, body: map[string]any{"name": "other", "spec": spec("quay.io/acme/cam:1")}, status: 403},
		{tok: "reader", method: "GET", path: base + "?pageSize=10&filter=name%3D%22cam%22", status: 200},
		{tok: "reader", method: "GET", path: base + "/cam", status: 200},
		{tok: "reader", method: "GET", path: base + "/nosuch", status: 404},
		{tok: "writer", method: "PUT", path: base + "/cam", body: map[string]any{"spec": spec("quay.io/acme/cam")}, status: 200}, // a warning: no tag
		{tok: "reader", method: "GET", path: base + "/cam/revisions", status: 200},
		{tok: "reader", method: "GET", path: base + "/cam/status", status: 200, setup: func() {
			if err := st.SetEdgeWorkloadTargets(ctx, "a", []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: host.ResourceID, Revision: 2}}); err != nil {
				t.Fatal(err)
			}
			if err := st.RecordEdgeWorkloadStatus(ctx, "a", host.ResourceID, 0, []eim.EdgeWorkloadStatus{{Workload: "cam", HostID: host.ResourceID, Revision: 2,
				Phase: eim.PhaseDegraded, Containers: []eim.ContainerState{{Name: "cam", State: "exited", ExitCode: 3}}}}); err != nil {
				t.Fatal(err)
			}
		}},
		{tok: "reader", method: "GET", path: base + "/cam/devices", status: 200},
		{tok: "reader", method: "GET", path: base + "/cam/logs?host=" + host.ResourceID + "&tail=5&wait=0", status: 202},
		{tok: "reader", method: "GET", path: base + "/cam/logs?host=nohost", status: 400},
		{tok: "reader", method: "GET", path: "", status: 202},                    // the request just made, by its ID
		{tok: "reader", method: "GET", path: base + "/cam/rollout", status: 404}, // no rolloutPolicy
		{tok: "writer", method: "PUT", path: base + "/cam", body: map[string]any{"spec": withPolicy(spec("quay.io/acme/cam:3"))}, status: 200},
		{tok: "writer", method: "PUT", path: base + "/cam", body: map[string]any{"spec": withPolicy(spec("quay.io/acme/cam:3"), "limit", 0)}, status: 400},
		{tok: "reader", method: "GET", path: base + "/cam/rollout", status: 200, setup: func() {
			if err := svc.ReconcileProject(ctx, "a"); err != nil {
				t.Fatal(err)
			}
		}},
		{tok: "writer", method: "POST", path: base + "/cam/rollout/pause", status: 200},
		{tok: "writer", method: "POST", path: base + "/cam/rollout/pause", status: 409},
		{tok: "reader", method: "POST", path: base + "/cam/rollout/resume", status: 403},
		{tok: "writer", method: "POST", path: base + "/cam/rollout/resume", status: 200},
		{tok: "reader", method: "GET", path: base + "/cam/status", status: 200},
		{tok: "writer", method: "POST", path: base + "/cam/rollout/rollback", status: 200},
		{tok: "writer", method: "POST", path: base + "/cam/rollout/abort", status: 200}, // the stored rollout (of revision 3: 4's has not started)
		{tok: "writer", method: "DELETE", path: base + "/cam", status: 200},
		{tok: "writer", method: "DELETE", path: base + "/cam", status: 404},
	}
	for _, c := range steps {
		if c.setup != nil {
			c.setup()
		}
		if c.path == "" {
			c.path = base + "/cam/logs/" + logID
		}
		body := openapitest.Do(ctx, t, router, srv.URL, openapitest.Call{Token: c.tok, Method: c.method, Path: c.path, Body: c.body, Status: c.status})
		if strings.Contains(c.path, "/logs?host="+host.ResourceID) {
			var lv struct{ ID string }
			_ = json.Unmarshal(body, &lv)
			logID = lv.ID
		}
		if strings.Contains(string(body), `"value":"v"`) {
			t.Errorf("%s %s: the answer holds a secret value: %s", c.method, c.path, body)
		}
	}
}
