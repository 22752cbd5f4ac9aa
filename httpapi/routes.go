package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/api"
)

const projectPrefix = api.ProjectPrefix

// crudOps says which of the generic operations a path offers.
type crudOps struct {
	update   bool // PUT and PATCH on /{resourceId}
	noCreate bool // no POST: a module writes the resources (OS update runs)
}

// routes registers every path of the API. The paths and their aliases are
// those of the original's northbound API (for the kinds EIM has so far);
// anything else is a 404 with the standard error body.
func (h *handler) routes() {
	full := crudOps{update: true}
	h.crud(eim.KindRegion, "/regions", full)
	h.crud(eim.KindSite, "/sites", full)
	h.crud(eim.KindSite, "/regions/{regionId}/sites", full)
	h.crud(eim.KindHost, "/compute/hosts", full)
	h.crud(eim.KindWorkload, "/compute/workloads", full)
	h.crud(eim.KindWorkload, "/workloads", full)
	h.crud(eim.KindWorkloadMember, "/workload_members", crudOps{})
	h.handle("POST /compute/hosts/register", h.registerHost)
	h.handle("PATCH /compute/hosts/{resourceId}/register", h.updateRegistration)
	h.handle("PATCH /compute/hosts/{resourceId}/onboard", h.onboardHost)
	h.handle("GET /compute/hosts/summary", h.hostSummary)
	h.handle("GET /compute/hosts_summary", h.hostSummary)
	h.handle("GET /locations", h.locations)
	h.projectSettingsRoutes()
	h.metadataRoutes()
	h.auditRoutes()
	h.in(ModuleOnboarding, func() {
		h.crud(eim.KindProvider, "/providers", crudOps{})
		h.handle("PUT /compute/hosts/{resourceId}/invalidate", h.invalidateHost)
	})
	h.in(ModuleProvisioning, func() {
		h.crud(eim.KindInstance, "/compute/instances", full)
		h.crud(eim.KindLocalAccount, "/localAccounts", crudOps{})
		h.crud(eim.KindCustomConfig, "/customConfigs", crudOps{})
		h.handle("PUT /compute/instances/{resourceId}/invalidate", h.invalidateInstance)
		h.provisioningLogRoutes()
		h.attestationKeyRoutes()
	})
	h.in(ModuleOS, func() {
		h.crud(eim.KindOS, "/compute/os", full)
		h.crud(eim.KindOS, "/compute/operating_systems", full)
	})
	h.in(ModuleMaintenance, func() {
		for _, base := range []string{"/schedules", "/compute/schedules"} {
			h.crud(eim.KindSingleSchedule, base+"/single", full)
			h.crud(eim.KindRepeatedSchedule, base+"/repeated", full)
			h.handle("GET "+base, h.listSchedules)
		}
		h.maintenanceRoutes()
	})
	h.in(ModuleTelemetry, h.telemetryRoutes)

	h.mux.HandleFunc("GET /v1/projects", h.admin(h.listProjects))
	h.mux.HandleFunc("POST /v1/projects", h.admin(h.createProject))
	h.mux.HandleFunc("PUT /v1/projects/{projectName}", h.admin(h.putProject))
	h.mux.HandleFunc("DELETE /v1/projects/{projectName}", h.admin(h.deleteProject))
	h.mux.HandleFunc("GET /v1/orchestrator", h.orchestrator)
	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.HandleFunc("GET /openapi.yaml", h.openapi)
	h.legacyRoutes() // last: it hands each legacy operation to its twin
	h.mux.HandleFunc("/", h.notFound)
}

func (h *handler) crud(k eim.Kind, base string, ops crudOps) {
	h.crudOf(kindType(k), base, ops)
}

// crudOf registers the generic operations of an API type below base; a
// list with parameters of its own (schedules, telemetry profiles) has its
// own handler.
func (h *handler) crudOf(t apiType, base string, ops crudOps) {
	p := projectPrefix + base
	switch {
	case t.kind == eim.KindSingleSchedule || t.kind == eim.KindRepeatedSchedule:
		h.mux.HandleFunc("GET "+p, h.listSchedulesOf(t.kind))
	case t.kind == eim.KindTelemetryProfile:
		h.mux.HandleFunc("GET "+p, h.listTelemetryProfiles(t))
	default:
		h.mux.HandleFunc("GET "+p, h.list(t))
	}
	if !ops.noCreate {
		h.mux.HandleFunc("POST "+p, h.gate("POST", h.create(t)))
	}
	h.mux.HandleFunc("GET "+p+"/{resourceId}", h.get(t))
	h.mux.HandleFunc("DELETE "+p+"/{resourceId}", h.remove(t))
	if ops.update {
		h.mux.HandleFunc("PUT "+p+"/{resourceId}", h.gate("PUT", h.update(t, false)))
		h.mux.HandleFunc("PATCH "+p+"/{resourceId}", h.gate("PATCH", h.update(t, true)))
	}
}

// handle registers a project-scoped operation: "METHOD /path" below
// /v1/projects/{projectName}.
func (h *handler) handle(pattern string, fn func(http.ResponseWriter, *http.Request, *call) error) {
	method, path, _ := strings.Cut(pattern, " ")
	h.mux.HandleFunc(method+" "+projectPrefix+path, h.gate(method, h.inProject(fn)))
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, eim.Errorf(eim.ENOTFOUND, "no operation %s %s", r.Method, r.URL.Path))
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	h.writeBytes(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

// readyz answers 200 while the database answers, else 503: the server
// itself stays up through a database outage (healthz), but a load balancer
// may prefer a replica that can serve.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.inv.Ready(ctx); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeBytes(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
}
