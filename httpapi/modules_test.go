package httpapi_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// TestModuleNotDeployed: the writes of a module that runs nowhere answer
// 501 naming it, to callers allowed in the project only; reads, deletes and
// the inventory's own operations are served; the answer follows the
// deployment as it changes.
func TestModuleNotDeployed(t *testing.T) {
	var deployed atomic.Value
	deployed.Store([]string{httpapi.ModuleHosts, httpapi.ModuleTelemetry})
	e := newEnv(t, httpapi.Options{Deployed: func() []string { return deployed.Load().([]string) }})
	const p = "/v1/projects/p1"
	osBody := map[string]any{"name": "ubuntu", "imageUrl": "https://example.com/u.img", "sha256": sha, "profileName": "u"}

	wantError(t, e.do(t, "POST", p+"/compute/os", tokRW, osBody), 501, "Unimplemented", `module "os"`, "--modules")
	wantError(t, e.do(t, "POST", p+"/compute/instances", tokRW, map[string]any{"name": "i"}), 501, "Unimplemented", `module "provisioning"`)
	wantError(t, e.do(t, "POST", p+"/schedules/single", tokRW, map[string]any{"name": "s"}), 501, "Unimplemented", `module "maintenance"`)
	wantError(t, e.do(t, "POST", p+"/compute/instances/inst-12345678/reprovision", tokRW, nil), 501, "Unimplemented", `module "provisioning"`)
	wantError(t, e.do(t, "PUT", p+"/compute/hosts/host-12345678/invalidate", tokRW, nil), 501, "Unimplemented", `module "onboarding"`)
	// The legacy twin answers the same.
	wantError(t, e.do(t, "POST", "/edge-infra.orchestrator.apis/v2/operating_systems?projectName=p1", tokRW, osBody), 501, "Unimplemented", `module "os"`)
	// Strangers learn nothing of what runs: 401 and 403 come first.
	wantError(t, e.do(t, "POST", p+"/compute/os", "", osBody), 401, "Unauthenticated")
	wantError(t, e.do(t, "POST", p+"/compute/os", tokRO, osBody), 403, "PermissionDenied")
	wantError(t, e.do(t, "POST", p+"/compute/os", tokRW2, osBody), 403, "PermissionDenied")
	// Reads of stored resources, and the inventory itself, are served.
	e.must(t, 200, "GET", p+"/compute/os", tokRW, nil)
	e.must(t, 200, "GET", p+"/compute/instances", tokRW, nil)
	e.must(t, 200, "POST", p+"/regions", tokRW, map[string]any{"name": "r"})
	e.must(t, 200, "POST", p+"/telemetry/groups/logs", tokRW, map[string]any{"name": "g", "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": []string{"syslog"}})

	// Once the module runs somewhere, its operations are served.
	deployed.Store([]string{httpapi.ModuleHosts, httpapi.ModuleTelemetry, httpapi.ModuleOS})
	e.must(t, 200, "POST", p+"/compute/os", tokRW, osBody)
}

// TestModuleDeployedSinceTheView: a write whose module is missing from the
// view in memory asks for a fresh view before refusing it: a process that
// started since the last refresh serves it at once.
func TestModuleDeployedSinceTheView(t *testing.T) {
	var asked atomic.Int32
	var now atomic.Value
	now.Store([]string{httpapi.ModuleHosts})
	e := newEnv(t, httpapi.Options{
		Deployed: func() []string { return []string{httpapi.ModuleHosts} }, // a stale view
		DeployedNow: func(context.Context) []string {
			asked.Add(1)
			return now.Load().([]string)
		},
	})
	const p = "/v1/projects/p1"
	osBody := map[string]any{"name": "ubuntu", "imageUrl": "https://example.com/u.img", "sha256": sha, "profileName": "u"}
	wantError(t, e.do(t, "POST", p+"/compute/os", tokRW, osBody), 501, "Unimplemented", `module "os"`)
	if asked.Load() != 1 {
		t.Errorf("fresh views read: %d, want 1 before the 501", asked.Load())
	}
	now.Store([]string{httpapi.ModuleHosts, httpapi.ModuleOS})
	e.must(t, 200, "POST", p+"/compute/os", tokRW, osBody)
	// An operation the stale view allows reads nothing more.
	n := asked.Load()
	e.must(t, 200, "POST", p+"/regions", tokRW, map[string]any{"name": "r"})
	if asked.Load() != n {
		t.Errorf("a write of the inventory itself read the deployment again")
	}
}
