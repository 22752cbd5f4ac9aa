package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/eimhq/eim"
)

// The API's operations belong to the modules whose resources they write:
// instances, local accounts, custom configs and provisioning logs to
// provisioning, providers and host invalidation to onboarding, OS profiles
// to os, schedules and OS update policies to maintenance, telemetry groups
// and profiles to telemetry. The rest (locations, hosts, workloads,
// projects) is the inventory itself and always served.
//
// An operation of a module that runs nowhere in the deployment answers 501
// naming the module, rather than storing desired state nothing would act
// on: a deployment of the observability profile does not accept an
// instance it could never provision. Reads and deletes are served all the
// same: what is stored stays visible, and deletes are finished by the api
// module's reaper.

// modules returns the modules running in the deployment.
func (h *handler) modules() []string {
	if h.deployed == nil {
		return builtModules
	}
	return h.deployed()
}

// in registers, through reg, routes that belong to module.
func (h *handler) in(module string, reg func()) {
	prev := h.cur
	h.cur = module
	defer func() { h.cur = prev }()
	reg()
}

// gate wraps the handler of a route being registered for the module of the
// registration (see in), if any.
func (h *handler) gate(method string, fn http.HandlerFunc) http.HandlerFunc {
	module := h.cur
	if module == "" || method == http.MethodGet || method == http.MethodDelete || method == "" {
		return fn
	}
	// The check itself is made once the caller is authenticated and
	// allowed in the project (serveInProject): what runs where is not for
	// strangers.
	return func(w http.ResponseWriter, r *http.Request) {
		fn(w, r.WithContext(context.WithValue(r.Context(), moduleKey{}, module)))
	}
}

type moduleKey struct{}

// checkModule fails a request of an operation whose module runs nowhere.
func (h *handler) checkModule(r *http.Request) error {
	module, _ := r.Context().Value(moduleKey{}).(string)
	if module == "" || slices.Contains(h.modules(), module) {
		return nil
	}
	if h.deployedNow != nil && slices.Contains(h.deployedNow(r.Context()), module) {
		return nil
	}
	return eim.Errorf(eim.EUNIMPLEMENTED,
		"%s %s is an operation of the module %q, which runs nowhere in this deployment; run it (eim server --modules …,%s, or a profile that has it: see eim server --list-modules)",
		r.Method, r.URL.Path, module, module)
}
