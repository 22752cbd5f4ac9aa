package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// TestOrchestratorFeatures checks the feature list orch-cli reads at login:
// the original's shape, with what this server runs installed.
func TestOrchestratorFeatures(t *testing.T) {
	type feature struct {
		Installed    *bool    `json:"installed"`
		Onboarding   *feature `json:"onboarding"`
		Provisioning *feature `json:"provisioning"`
		Day2         *feature `json:"day2"`
		OOB          *feature `json:"oob"`
		OXM          *feature `json:"oxm-profile"`
	}
	type info struct {
		SchemaVersion string `json:"schema-version"`
		Orchestrator  struct {
			Version  string              `json:"version"`
			Features map[string]*feature `json:"features"`
		} `json:"orchestrator"`
	}
	installed := func(f *feature) bool { return f != nil && f.Installed != nil && *f.Installed }
	for _, c := range []struct {
		name    string
		modules []string
		want    map[string]bool
	}{
		{"every module", []string{httpapi.ModuleOnboarding, httpapi.ModuleProvisioning, httpapi.ModuleHosts, httpapi.ModuleMaintenance, httpapi.ModuleTelemetry},
			map[string]bool{"eim": true, "onboarding": true, "provisioning": true, "day2": true}},
		{"API only", nil, map[string]bool{"eim": true}},
		{"onboarding only", []string{httpapi.ModuleOnboarding}, map[string]bool{"eim": true, "onboarding": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, httpapi.Options{Deployed: func() []string { return c.modules }, Version: "v1.2.3"})
			wantError(t, e.do(t, "GET", "/v1/orchestrator", "", nil), 401, "Unauthenticated")
			r := e.must(t, 200, "GET", "/v1/orchestrator", tokRO, nil)
			var got info
			if err := json.Unmarshal(r.raw, &got); err != nil {
				t.Fatal(err)
			}
			if got.SchemaVersion != "1.0" || got.Orchestrator.Version != "v1.2.3" {
				t.Errorf("got schema-version %q, version %q; want 1.0, v1.2.3", got.SchemaVersion, got.Orchestrator.Version)
			}
			f := got.Orchestrator.Features
			eim := f["edge-infrastructure-manager"]
			for name, have := range map[string]bool{
				"eim":                        installed(eim),
				"onboarding":                 eim != nil && installed(eim.Onboarding),
				"provisioning":               eim != nil && installed(eim.Provisioning),
				"day2":                       eim != nil && installed(eim.Day2),
				"oob":                        eim != nil && installed(eim.OOB),
				"oxm-profile":                eim != nil && installed(eim.OXM),
				"cluster-orchestration":      installed(f["cluster-orchestration"]),
				"application-orchestration":  installed(f["application-orchestration"]),
				"orchestrator-observability": installed(f["orchestrator-observability"]),
			} {
				if have != c.want[name] {
					t.Errorf("%s installed: got %v, want %v (%s)", name, have, c.want[name], r.raw)
				}
			}
			// Every feature says whether it is installed, and multitenancy
			// (projects) always is.
			for _, name := range []string{"cluster-orchestration", "application-orchestration", "orchestrator-observability", "multitenancy"} {
				if f[name] == nil || f[name].Installed == nil {
					t.Errorf("feature %s: missing or without installed: %s", name, r.raw)
				}
			}
			if !installed(f["multitenancy"]) {
				t.Errorf("multitenancy: not installed: %s", r.raw)
			}
			if eim == nil || eim.OOB == nil || eim.OOB.Installed == nil || eim.OXM == nil || eim.OXM.Installed == nil {
				t.Errorf("edge-infrastructure-manager lacks oob or oxm-profile: %s", r.raw)
			}
		})
	}
}
