package httpapi

import "github.com/eimhq/eim"

// maintenanceRoutes registers the OS update policies and runs under the
// original's paths and aliases. Policies have no PUT or PATCH and runs no
// POST, as in the original: a policy is replaced by creating another, and
// runs are the maintenance module's record.
func (h *handler) maintenanceRoutes() {
	for _, base := range []string{"/os-update-policies", "/os_update_policy"} {
		h.crud(eim.KindOSUpdatePolicy, base, crudOps{})
	}
	for _, base := range []string{"/os-update-runs", "/os_update_run"} {
		h.crud(eim.KindOSUpdateRun, base, crudOps{noCreate: true})
	}
}
