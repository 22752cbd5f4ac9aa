package httpapi_test

import (
	"context"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
)

// TestProjectStatus: GET /v1/projects/{name} shows the conditions of the
// initialising modules that run (an absent one is not waited for); with
// the tenant module deployed DELETE starts the deletion (202, its progress
// in status.deletion) and the project takes no new resources meanwhile.
func TestProjectStatus(t *testing.T) {
	deployed := []string{httpapi.ModuleOS, httpapi.ModuleTenant, httpapi.ModuleTelemetry}
	e := newEnv(t, httpapi.Options{Deployed: func() []string { return deployed }, Initialisers: []string{"os", "tenant", "clusters"}})
	ctx := context.Background()

	r := e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil)
	st, _ := r.obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	if st == nil || st["ready"] != false || len(conds) != 2 {
		t.Fatalf("status before any module: got %s, want not ready with the conditions of os and tenant (clusters runs nowhere)", r.raw)
	}
	for i, want := range []string{"os", "tenant"} {
		c := conds[i].(map[string]any)
		if c["module"] != want || c["ready"] != false {
			t.Errorf("condition %d: got %v, want %s not ready", i, c, want)
		}
	}
	for _, m := range []string{"os", "tenant"} {
		if err := e.inv.SetCondition(ctx, "p1", eim.Condition{Module: m, Ready: true, Message: m + " done"}); err != nil {
			t.Fatal(err)
		}
	}
	r = e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil)
	if st := r.obj["status"].(map[string]any); st["ready"] != true || st["deletion"] != nil {
		t.Errorf("status once both are: got %s, want ready", r.raw)
	}

	// A non-empty project needs force.
	e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "r"})
	wantError(t, e.do(t, "DELETE", "/v1/projects/p1", tokAdmin, nil), 400, "FailedPrecondition", "not empty")
	r = e.must(t, 202, "DELETE", "/v1/projects/p1?force=true", tokAdmin, nil)
	del, _ := r.obj["status"].(map[string]any)["deletion"].(map[string]any)
	if del == nil || del["phase"] != "deauthorize" || del["step"] != float64(1) || del["steps"] == nil || del["remaining"] != nil {
		t.Errorf("DELETE's answer: got %s, want the deletion at its first phase", r.raw)
	}
	r = e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil)
	if st := r.obj["status"].(map[string]any); st["ready"] != false || st["deletion"] == nil {
		t.Errorf("status while deleting: got %s", r.raw)
	}
	// Deleting again is the same deletion.
	e.must(t, 202, "DELETE", "/v1/projects/p1?force=true", tokAdmin, nil)
	// No new resources; reads and deletes are served.
	wantError(t, e.do(t, "POST", "~/regions", tokRW, map[string]any{"name": "r2"}), 409, "AlreadyExists", "being deleted")
	e.must(t, 200, "GET", "~/regions", tokRW, nil)
	// The other project is as it was.
	e.must(t, 200, "POST", "/v1/projects/p2/regions", tokRW2, map[string]any{"name": "r"})

	// Without the tenant module the project goes at once.
	deployed = []string{httpapi.ModuleOS}
	e.must(t, 200, "DELETE", "/v1/projects/p2?force=true", tokAdmin, nil)
	wantError(t, e.do(t, "GET", "/v1/projects/p2", tokAdmin, nil), 404, "NotFound")
}
