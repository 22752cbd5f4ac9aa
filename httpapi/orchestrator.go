package httpapi

import (
	"net/http"
	"slices"
)

// GET /v1/orchestrator: the feature list the original's CLI (orch-cli)
// reads at login to decide which of its commands to offer. Its shape is
// the original's component-status service's:
//
//	{"schema-version":"1.0","orchestrator":{"version":"…","features":{
//	  "edge-infrastructure-manager":{"installed":true,"onboarding":{"installed":true},…},
//	  "multitenancy":{"installed":true},…}}}
//
// A feature is installed when the module that provides it runs somewhere in
// the deployment (Options.Deployed).

// Module names, as Options.Deployed lists them (the server's module
// names).
const (
	ModuleOnboarding   = "onboarding"
	ModuleProvisioning = "provisioning"
	ModuleMaintenance  = "maintenance"
	ModuleTelemetry    = "telemetry"
	ModuleHosts        = "host"
	ModuleOS           = "os"
	// ModuleTenant runs the projects' deletions: while it runs somewhere
	// DELETE /v1/projects/{name} starts one (202) rather than deleting
	// the project itself. It is not among builtModules: nothing runs it
	// for a handler without Options.Deployed.
	ModuleTenant = "tenant"
)

// builtModules are the modules of this release whose operations the API
// serves: what runs when Options.Deployed is nil.
var builtModules = []string{ModuleOnboarding, ModuleProvisioning, ModuleMaintenance, ModuleTelemetry, ModuleHosts, ModuleOS, ModuleWebhooks}

// feature is one of the original's features and what provides it here:
// the API itself (module ""), one of the modules, or nothing yet (a module
// name no server of this release runs).
type feature struct {
	path   []string // "edge-infrastructure-manager", "onboarding"
	module string
}

var features = []feature{
	{[]string{"edge-infrastructure-manager"}, ""}, // the inventory and this API
	{[]string{"edge-infrastructure-manager", "onboarding"}, ModuleOnboarding},
	{[]string{"edge-infrastructure-manager", "provisioning"}, ModuleProvisioning},
	{[]string{"edge-infrastructure-manager", "day2"}, ModuleMaintenance},
	{[]string{"edge-infrastructure-manager", "oob"}, "oob"},                 // vPro/AMT: not built
	{[]string{"edge-infrastructure-manager", "oxm-profile"}, "oxm-profile"}, // PXE-only onboarding: not built
	{[]string{"multitenancy"}, ""},                                          // projects are part of the API
	{[]string{"cluster-orchestration"}, "clusters"},
	{[]string{"application-orchestration"}, "applications"},
	{[]string{"orchestrator-observability"}, "observability"},
}

type orchestratorInfo struct {
	SchemaVersion string           `json:"schema-version"`
	Orchestrator  orchestratorData `json:"orchestrator"`
}

type orchestratorData struct {
	Version  string         `json:"version,omitempty"`
	Features map[string]any `json:"features"`
}

// featureList renders the features of a deployment that runs modules.
func featureList(version string, modules []string) *orchestratorInfo {
	root := map[string]any{}
	for _, f := range features {
		node := root
		for _, name := range f.path {
			child, ok := node[name].(map[string]any)
			if !ok {
				child = map[string]any{}
				node[name] = child
			}
			node = child
		}
		node["installed"] = f.module == "" || slices.Contains(modules, f.module)
	}
	return &orchestratorInfo{SchemaVersion: "1.0", Orchestrator: orchestratorData{Version: version, Features: root}}
}

// orchestrator answers GET /v1/orchestrator to any authenticated caller:
// it names no project and holds nothing of one.
func (h *handler) orchestrator(w http.ResponseWriter, r *http.Request) {
	if _, err := h.authenticate(r); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := checkQuery(r); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, http.StatusOK, featureList(h.version, h.modules()))
}
