// Package server runs EIM's modules as one process (Process: Open, Serve,
// Close; process.go tells its life): it opens the store, builds the
// modules selected for this process (Config.Modules) and the shared parts
// they use (Part), mounts their handlers on the listeners (listener.go:
// the HTTP listener with the northbound API, /boot/ and health, the agent
// listener with the nodes' calls over HTTPS, metrics, debug), and runs
// their loops under one owner until it is told to stop.
//
// A module is one file, module_NAME.go, with one registration (Module),
// listed in Builtin (builtin.go); the parts it shares with other modules
// are declared there too. Any module may run
// in several processes at once on one PostgreSQL: its per-process loops
// (caches kept by the change feed) run in every process, and its run-once
// loops (reconcilers, scans) in one process at a time, claimed through a
// database lease (package coord), so a process that dies hands its work on
// within one lease period.
package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Module is a unit of EIM that a deployment runs or not.
type Module struct {
	// Name is how --modules and the profiles name it.
	Name string
	// Summary says what it does, in a line.
	Summary string
	// Needs are the modules it relies on somewhere in the deployment (in
	// this process or another), and why; a missing one is reported at
	// start, not refused: the other process may just not be up yet.
	Needs []Need
	// Agent is set for a module that serves nodes: the process then opens
	// the agent listener (HTTPS).
	Agent bool
	// Initialises is set for a module that initialises every project and
	// records its readiness condition on it (eim.Condition): a project is
	// ready once each such module running in the deployment says so.
	Initialises bool
	// Build makes the module's parts in this process. It may use the
	// shared parts (Use), other modules' included, never their Parts.
	Build func(b *Builder) (Parts, error)
}

// Need is a module another one relies on.
type Need struct {
	Module string
	Why    string
}

// Parts are what a module contributes to a process.
type Parts struct {
	// Routes are mounted on the HTTP listener and Agent on the agent
	// listener; Pattern is a net/http ServeMux pattern.
	Routes, Agent []Route
	// AgentStreams are mounted on the agent listener without its body
	// limit: their handlers bound their bodies themselves.
	AgentStreams []Route
	Loops        []Loop
	// Metrics, when set, answers GET /metrics in place of the handler of
	// the process's own series (Builder.Metrics), which it must include
	// (the exporter module adds the fleet's series). One module at most.
	Metrics http.Handler
}

// Route is a handler and the pattern it serves.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Loop is work a module runs in the background.
type Loop struct {
	// Name identifies the loop in logs and in /readyz; a run-once loop's
	// lease is named after it ("loop/<module>/<name>").
	Name string
	// Once: one process of the deployment runs it at a time. Its Run may
	// be called again after it ended (the lease was lost and won back): it
	// must start afresh each time.
	Once bool
	// Run does the work until ctx ends, then returns nil. An error or a
	// panic is logged and Run is called again after a pause.
	Run func(ctx context.Context) error
	// Ready, when set, says whether the loop does its job yet (the host
	// module has restored liveness, say); /readyz waits for it.
	Ready func() bool
}

// Registry is a set of modules, in the order they are built and listed.
// The built-in modules are Builtin's; a test may run a process of its own
// modules (Config.Registry).
type Registry struct {
	modules []*Module
}

// NewRegistry returns the registry of modules, in their order. Each has a
// name of its own and a Build.
func NewRegistry(modules ...*Module) (*Registry, error) {
	r := &Registry{}
	for _, m := range modules {
		switch {
		case m.Name == "" || strings.ContainsAny(m.Name, ", "):
			return nil, fmt.Errorf("module %q: want a name without commas or spaces", m.Name)
		case m.Build == nil:
			return nil, fmt.Errorf("module %s: no Build", m.Name)
		case r.Lookup(m.Name) != nil:
			return nil, fmt.Errorf("module %s: registered twice", m.Name)
		}
		r.modules = append(r.modules, m)
	}
	return r, nil
}

// Modules returns every module, in their order.
func (r *Registry) Modules() []*Module { return slices.Clone(r.modules) }

// Lookup returns the module named name, or nil.
func (r *Registry) Lookup(name string) *Module {
	for _, m := range r.modules {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Modules returns every built-in module, in their order.
func Modules() []*Module { return Builtin().Modules() }

// Lookup returns the built-in module named name, or nil.
func Lookup(name string) *Module { return Builtin().Lookup(name) }

// Profile is a documented set of modules for a kind of deployment.
type Profile struct {
	Name    string
	Summary string
	Modules []string // nil: every module
}

// Profiles are the deployment profiles, "full" first (the default).
var Profiles = []Profile{
	{"full", "everything (the default): one process, or replicas of it", nil},
	{"provisioning", "the OEM/OXM slice: onboarding and OS provisioning of network-booted machines", []string{"api", "onboarding", "provisioning", "os", "tenant", "ui"}},
	{"observability", "liveness, hardware and telemetry configuration of running nodes, the fleet's Prometheus metrics and the projects' webhooks", []string{"api", "host", "telemetry", "exporter", "webhooks"}},
	{"day2", "running nodes: liveness, OS updates in maintenance windows, telemetry", []string{"api", "host", "maintenance", "os", "telemetry"}},
	{"clusters", "edge Kubernetes clusters: cluster templates, clusters built from hosts, and the connect tunnel to their API behind NAT", []string{"api", "connect", "clusters"}},
	{"devices", "devices running containers: edge workloads deployed by label to hosts with an installed OS, their status and log tails, with liveness and heartbeats, and the object storage their data is uploaded to", []string{"api", "host", "workloads", "objectstorage"}},
	{"oob", "power and reboot of hosts: through their BMCs (Redfish, IPMI, Intel AMT through an MPS) as power jobs confirmed from the BMC's state; in band through the agent for hosts without one", []string{"api", "host", "oob"}},
}

// profile returns the profile named name, or nil.
func profile(name string) *Profile {
	for i := range Profiles {
		if Profiles[i].Name == name {
			return &Profiles[i]
		}
	}
	return nil
}

// ProfilesOf returns the names of the profiles that hold module name.
func ProfilesOf(name string) []string {
	var out []string
	for _, p := range Profiles {
		if p.Modules == nil || slices.Contains(p.Modules, name) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Select returns the built-in modules of a --modules list or of a
// --profile (Registry.Select).
func Select(modules, profileName string) ([]*Module, error) {
	return Builtin().Select(modules, profileName)
}

// Select returns the modules of a --modules list (comma-separated) or of a
// --profile, in registry order; with neither, every module. An unknown
// name is an error that lists the known ones.
func (r *Registry) Select(modules, profileName string) ([]*Module, error) {
	modules, profileName = strings.TrimSpace(modules), strings.TrimSpace(profileName)
	var names []string
	switch {
	case modules != "" && profileName != "":
		return nil, fmt.Errorf("--modules and --profile: give one of them")
	case modules != "":
		for n := range strings.SplitSeq(modules, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if r.Lookup(n) == nil {
				return nil, fmt.Errorf("--modules: no module %q (modules: %s)", n, strings.Join(moduleNames(r.modules), ", "))
			}
			names = append(names, n)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("--modules: name at least one module (modules: %s)", strings.Join(moduleNames(r.modules), ", "))
		}
	case profileName != "":
		p := profile(profileName)
		if p == nil {
			var known []string
			for _, p := range Profiles {
				known = append(known, p.Name)
			}
			return nil, fmt.Errorf("--profile: no profile %q (profiles: %s)", profileName, strings.Join(known, ", "))
		}
		names = p.Modules
	}
	var out []*Module
	for _, m := range r.modules {
		if names == nil || slices.Contains(names, m.Name) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Initialisers returns the names of the modules that initialise projects
// (Module.Initialises).
func (r *Registry) Initialisers() []string {
	var out []string
	for _, m := range r.modules {
		if m.Initialises {
			out = append(out, m.Name)
		}
	}
	return out
}

// routesOf turns a service's routes (pattern → handler) into Routes, in
// the patterns' order.
func routesOf(m map[string]http.Handler) []Route {
	out := make([]Route, 0, len(m))
	for p, h := range m {
		out = append(out, Route{p, h})
	}
	slices.SortFunc(out, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	return out
}

// route turns a Connect handler's (path, handler) into a Route.
func route(path string, h http.Handler) Route {
	return Route{path, h}
}

func moduleNames(ms []*Module) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// Missing returns, for the modules selected, the needs that no module of
// deployed (every module running somewhere, including the selected)
// satisfies, as sentences.
func Missing(selected []*Module, deployed []string) []string {
	var out []string
	for _, m := range selected {
		for _, n := range m.Needs {
			if !slices.Contains(deployed, n.Module) {
				out = append(out, fmt.Sprintf("module %s needs module %s (%s), which runs nowhere in this deployment", m.Name, n.Module, n.Why))
			}
		}
	}
	return out
}
