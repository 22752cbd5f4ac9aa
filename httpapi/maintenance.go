package httpapi

import (
	"net/http"

	"github.com/eimhq/eim"
)

// maintenanceRoutes registers the OS update policies and runs under the
// original's paths and aliases, and EIM's fleet-wide update view. Policies
// have no PUT or PATCH and runs no POST, as in the original: a policy is
// replaced by creating another, and runs are the maintenance module's
// record.
func (h *handler) maintenanceRoutes() {
	for _, base := range []string{"/os-update-policies", "/os_update_policy"} {
		h.crud(eim.KindOSUpdatePolicy, base, crudOps{})
	}
	for _, base := range []string{"/os-update-runs", "/os_update_run"} {
		h.crud(eim.KindOSUpdateRun, base, crudOps{noCreate: true})
	}
	// A literal segment: more specific than /compute/instances/{resourceId},
	// and no instance ID can be spelled so (they start with "inst-").
	h.handle("GET /compute/instances/updates_summary", h.updatesSummary)
}

func (h *handler) updatesSummary(w http.ResponseWriter, r *http.Request, c *call) error {
	sum, err := h.inv.UpdatesSummary(r.Context(), c.project, r.URL.Query().Get("filter"))
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, sum)
	return nil
}
