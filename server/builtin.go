package server

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/clusters"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/exporter"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/tenant"
	"github.com/eimhq/eim/ui"
	"github.com/eimhq/eim/webhooks"
)

// The built-in modules, in the order they are built and listed. Adding a
// module is one registration here.
func init() {
	register(&Module{
		Name:    "api",
		Summary: "the northbound REST API (v1 and the original's legacy paths) and the reaper that finishes deletes of hosts and instances",
		Build:   buildAPI,
	})
	register(&Module{
		Name:    "onboarding",
		Summary: "nodes calling home are matched to registered hosts and given credentials; unknown devices with a project's token wait in its enrollment lobby (…/enrollmentrequests, …/enrollmentrules); invalidations finished; zero-touch instances created",
		Needs:   []Need{{"provisioning", "onboarded nodes ask it for their workflow"}},
		Agent:   true,
		Build:   buildOnboarding,
	})
	register(&Module{
		Name:    "provisioning",
		Summary: "network boot (/boot/), the OS installation workflows nodes run, their timeouts and reprovisioning",
		Needs:   []Need{{"onboarding", "nodes get their credentials from it"}, {"os", "workflows install the OS profiles it loads"}},
		Agent:   true,
		Build:   buildProvisioning,
	})
	register(&Module{
		Name:    "host",
		Summary: "heartbeats, hardware inventory and liveness of running nodes (\"No Connection\"), reboot and shut-down actions; shared by its replicas",
		Agent:   true,
		Build:   buildHost,
	})
	register(&Module{
		Name:    "maintenance",
		Summary: "maintenance windows and OS update policies delivered to nodes, their update reports",
		Needs:   []Need{{"host", "nodes learn of plan changes in heartbeat answers"}},
		Agent:   true,
		Build:   buildMaintenance,
	})
	register(&Module{
		Name:    "telemetry",
		Summary: "each node's effective telemetry configuration (log and metric profiles inherited by region, site and instance)",
		Needs:   []Need{{"host", "nodes fetch the configuration through its service, told by heartbeat answers"}},
		Agent:   true,
		Build:   buildTelemetry,
	})
	register(&Module{
		Name:    "exporter",
		Summary: "the fleet's state as Prometheus metrics on /metrics: the original's per-host series, aggregates by project and site, duration histograms",
		Build:   buildExporter,
	})
	register(&Module{
		Name:    "connect",
		Summary: "the tunnel edge clusters open to reach their Kubernetes API behind NAT: users at /kubernetes/{project}-{cluster}/ impersonated, connect tokens, the tunnel registry shared by its replicas",
		Agent:   true,
		Build:   buildConnect,
	})
	register(&Module{
		Name:    "clusters",
		Summary: "Kubernetes (k3s) clusters built from hosts with cluster templates (the original cluster manager's v2 API): install plans for nodes, rolling upgrades, node removal, the artifact store",
		Needs: []Need{{"host", "nodes learn of plan changes in heartbeat answers"},
			{"tenant", "projects get the baseline cluster templates from its defaults"}},
		Agent: true,
		Build: buildClusters,
	})
	register(&Module{
		Name:    "workloads",
		Summary: "edge workloads: containers run as podman pods on devices (hosts) selected by label, their revisions, per-device targets and status, log tails, upload grants",
		Needs:   []Need{{"host", "devices learn of changes of their workloads in heartbeat answers"}},
		Agent:   true,
		Build:   buildWorkloads,
	})
	register(&Module{
		Name:    "oob",
		Summary: "hosts' BMCs (Redfish, IPMI, AMT) as resources of the API (…/hosts/{hostId}/bmc), their passwords sealed; desiredPowerState carried out through them as power jobs confirmed from the BMC's state, their power state polled",
		Build:   buildOOB,
	})
	register(&Module{
		Name:    "objectstorage",
		Summary: "each project's object storage for its devices' data (/v1/projects/{p}/objectstorage, the secret sealed), the embedded store under the data directory when a project has none (uploads on the agent listener at /objects/, served back at /v1/projects/{p}/edgedata/{hostId}) and the grants devices upload with",
		Agent:   true,
		Build:   buildObjectStorage,
	})
	register(&Module{
		Name:    "webhooks",
		Summary: "a project's events (host onboarded or lost, instance running or failed, project deleted) delivered to its webhooks, signed, retried for a day",
		Build:   buildWebhooks,
	})
	register(&Module{
		Name:        "os",
		Summary:     "the OS profile catalog loaded into every project, kept in line with the manifests; which instances have an update available",
		Initialises: true,
		Build:       buildOS,
	})
	register(&Module{
		Name:        "tenant",
		Summary:     "every project's defaults (telemetry groups, the default provider) from a versioned definition, its readiness, and its deletion as a resumable cascade",
		Needs:       []Need{{"api", "its reaper finishes the two-phase deletes of a deleted project's hosts and instances"}},
		Initialises: true,
		Build:       buildTenant,
	})
	register(&Module{
		Name:    "ui",
		Summary: "the web UI for fleet operators at /ui/ (server-rendered, embedded; / sends browsers there), signed in with the API's tokens and rights",
		Needs:   []Need{{"provisioning", "its reprovision button starts a workflow that module serves"}},
		Build:   buildUI,
	})
}

func buildWebhooks(b *Builder) (Parts, error) {
	key, err := b.secretsKey()
	if err != nil {
		return Parts{}, err
	}
	wh := webhooks.New(webhooks.Options{Store: b.Store, Logger: b.Log.With("module", "webhooks"), Secrets: key,
		URLs: eim.URLPolicy{AllowPrivate: b.cfg.WebhookAllowPrivate}, Timeout: b.cfg.WebhookTimeout})
	return Parts{Loops: []Loop{
		{Name: "follow", Once: true, Run: wh.Follow},
		{Name: "deliver", Once: true, Run: wh.Deliver},
	}}, nil
}

func buildOOB(b *Builder) (Parts, error) {
	svc, err := b.OOB()
	if err != nil {
		return Parts{}, err
	}
	parts := Parts{Loops: []Loop{
		{Name: "jobs", Run: svc.Work},
		{Name: "follow", Once: true, Run: svc.Follow},
		{Name: "poll", Once: true, Run: svc.Poll},
	}}
	for pattern, h := range svc.Routes() {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	return parts, nil
}

func buildObjectStorage(b *Builder) (Parts, error) {
	svc, err := b.ObjectStore()
	if err != nil {
		return Parts{}, err
	}
	var parts Parts
	for pattern, h := range svc.Routes() {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	for pattern, h := range svc.AgentRoutes() {
		parts.AgentStreams = append(parts.AgentStreams, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	slices.SortFunc(parts.AgentStreams, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	return parts, nil
}

func buildAPI(b *Builder) (Parts, error) {
	inv := b.Inventory
	return Parts{
		Routes: []Route{{"/", b.API()}},
		Loops: []Loop{{Name: "reaper", Once: true, Run: func(ctx context.Context) error {
			return inventory.NewReaper(inv, inventory.ReaperOptions{Logger: b.Log, Metrics: b.Metrics}).Run(ctx)
		}}, {Name: "audit-retention", Once: true, Run: func(ctx context.Context) error {
			return inv.AuditRetention(ctx, b.cfg.AuditRetention, time.Hour)
		}}},
	}, nil
}

func buildUI(b *Builder) (Parts, error) {
	// The UI's forms write through the API, in process, whether or not
	// this process serves the API to others.
	v2, err := b.uiV2()
	if err != nil {
		return Parts{}, err
	}
	v1, err := b.uiV1()
	if err != nil {
		return Parts{}, err
	}
	opts := ui.Options{Logger: b.Log, Reprovisioner: b.Provisioning(), Store: b.Store, Hosts: b.HostView(), API: v1, V2: v2, Deployed: b.deployment.Modules}
	if b.cfg.OIDCIssuer != "" && b.cfg.UIOIDCClientID != "" {
		opts.OIDC = &ui.OIDC{Issuer: b.cfg.OIDCIssuer, ClientID: b.cfg.UIOIDCClientID}
	}
	h, err := ui.New(b.Inventory, b.Verifier, opts)
	if err != nil {
		return Parts{}, err
	}
	var routes []Route
	for _, p := range ui.Patterns() {
		routes = append(routes, Route{p, h})
	}
	return Parts{Routes: routes, Loops: []Loop{{Name: "fleet", Run: h.Run, Ready: h.Loaded}}}, nil
}

func buildOnboarding(b *Builder) (Parts, error) {
	onb := b.Onboarding()
	parts := Parts{
		Agent: []Route{route(onboardingv1connect.NewOnboardingServiceHandler(onb, b.rpcMetrics(), small))},
		Loops: []Loop{{Name: "reconciler", Once: true, Run: onb.Run}},
	}
	// The enrollment lobby's API (docs/enrollment.md).
	for pattern, h := range onb.Routes(b.Verifier) {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	return parts, nil
}

func buildProvisioning(b *Builder) (Parts, error) {
	prov := b.Provisioning()
	boot := provisioning.BootHandler(b.provOpts)
	parts := Parts{
		// The boot script over plain HTTP (iPXE without TLS), and over
		// HTTPS too: the micro-OS fetches its signed manifest through the
		// CA it pins (and UEFI HTTPS boot can load the artifacts).
		Routes: []Route{{"/boot/", boot}},
		Agent: []Route{
			route(provisioningv1connect.NewProvisioningServiceHandler(prov, b.rpcMetrics(), b.nodeAuth(), small)),
			{"/boot/", boot},
		},
		Loops: []Loop{{Name: "timeouts", Once: true, Run: prov.Run}},
	}
	if !b.Selected("host") {
		// The installed OS's first report-in makes the instance RUNNING:
		// without the host module here, this module serves that call of
		// the host service itself (and answers its others Unimplemented).
		parts.Agent = append(parts.Agent, route(hostv1connect.NewHostServiceHandler(reportInOnly{prov: prov}, b.rpcMetrics(), b.nodeAuth(), small)))
	}
	return parts, nil
}

// reportInOnly is the host service of a process without the host module.
type reportInOnly struct {
	hostv1connect.UnimplementedHostServiceHandler
	prov *provisioning.Service
}

func (r reportInOnly) ReportIn(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	return r.prov.ReportIn(ctx, req)
}

func buildHost(b *Builder) (Parts, error) {
	opts := hostmgr.Options{
		Store: b.Store, Batcher: b.SouthboundBatcher(), ReportIn: b.Provisioning().ReportIn, Logger: b.Log, Hosts: b.HostView(), Metrics: b.Metrics,
		Interval: b.cfg.HeartbeatInterval, Timeout: b.cfg.HeartbeatTimeout,
		RebootTimeout: b.cfg.RebootTimeout, UpdateTimeout: b.cfg.UpdateTimeout,
	}
	// On PostgreSQL the host module's processes share the fleet's
	// liveness, by shards of hosts leased to the live processes running
	// it (hostmgr, "Replicas"); alone (SQLite) it watches every host.
	if b.shared() {
		store := b.Store
		opts.Members = func(ctx context.Context) ([]string, error) { return coord.Members(ctx, store, "host") }
		opts.Replica, opts.LeaseTTL = b.cfg.ReplicaID, b.cfg.LeaseTTL
	}
	// Heartbeat answers carry the versions of the node's telemetry and
	// maintenance configuration when those modules run in this process
	// (their caches answer from memory).
	if b.Selected("telemetry") {
		opts.Telemetry = b.Telemetry()
	}
	if b.Selected("maintenance") {
		opts.Maintenance = b.Maintenance()
	}
	if b.Selected("clusters") {
		cl, err := b.Clusters()
		if err != nil {
			return Parts{}, err
		}
		opts.Clusters = cl
	}
	if b.Selected("workloads") {
		wl, err := b.Workloads()
		if err != nil {
			return Parts{}, err
		}
		opts.Workloads = wl
	}
	hosts := hostmgr.New(opts)
	return Parts{
		Agent: []Route{route(hostv1connect.NewHostServiceHandler(hosts, b.rpcMetrics(), b.nodeAuth(), small))},
		Loops: []Loop{{Name: "liveness", Run: hosts.Run, Ready: hosts.Restored}},
	}, nil
}

func buildMaintenance(b *Builder) (Parts, error) {
	maint := b.Maintenance()
	return Parts{
		Agent: []Route{route(maintenancev1connect.NewMaintenanceServiceHandler(maint, b.rpcMetrics(), b.nodeAuth(), small))},
		Loops: []Loop{{Name: "plans", Run: maint.Run}},
	}, nil
}

func buildTelemetry(b *Builder) (Parts, error) {
	tel := b.Telemetry()
	return Parts{Loops: []Loop{{Name: "configs", Run: tel.Run}}}, nil
}

func buildExporter(b *Builder) (Parts, error) {
	exp := exporter.New(exporter.Options{Store: b.Store, Logger: b.Log, Hosts: b.HostView(), PerHost: b.cfg.ExporterPerHost, Own: b.Metrics, Metrics: b.Metrics})
	return Parts{
		// /metrics: the process's own series, then the fleet's.
		Metrics: exp,
		Loops:   []Loop{{Name: "snapshot", Run: exp.Run, Ready: exp.Loaded}},
	}, nil
}

func buildOS(b *Builder) (Parts, error) {
	// The manifests are read before anything listens: a bad one stops the
	// start, naming the file and the field.
	cat, err := b.loadCatalog(b.ctx)
	if err != nil {
		return Parts{}, err
	}
	refresh := b.cfg.OSCatalogRefresh
	if refresh == 0 {
		refresh = -1 // never
	}
	return Parts{Loops: []Loop{{Name: "catalog", Once: true, Run: func(ctx context.Context) error {
		// A Manager runs once: a lease won back starts a fresh one, from
		// the manifests as they are now.
		if c, err := b.loadCatalog(ctx); err == nil {
			cat = c
		} else if ctx.Err() == nil {
			b.Log.Warn("os catalog: manifests not read again; using those read before", "err", err)
		}
		return oscatalog.New(oscatalog.Options{Store: b.Store, Catalog: cat, Logger: b.Log, Refresh: refresh, Metrics: b.Metrics,
			Reload: func() (*oscatalog.Catalog, error) { return b.loadCatalog(ctx) }}).Run(ctx)
	}}}}, nil
}

func buildConnect(b *Builder) (Parts, error) {
	g := b.Connect()
	var parts Parts
	for pattern, h := range g.Routes() {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	for pattern, h := range g.AgentRoutes() {
		parts.Agent = append(parts.Agent, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	parts.Loops = []Loop{{Name: "tunnels", Run: g.Run}}
	return parts, nil
}

// peerURL is http://ADDR of the bound HTTP listener, with an unspecified
// host (0.0.0.0, ::) as loopback: replicas on other machines need
// --connect-peer-url.
func peerURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func buildClusters(b *Builder) (Parts, error) {
	cl, err := b.Clusters()
	if err != nil {
		return Parts{}, err
	}
	var parts Parts
	for pattern, h := range cl.Routes() {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	parts.Agent = []Route{
		route(clusterv1connect.NewClusterServiceHandler(cl, b.rpcMetrics(), b.nodeAuth(), small)),
		{"GET " + clusters.ArtifactsPath, b.Southbound().NodeHTTP(cl.ArtifactHandler())},
	}
	parts.Loops = []Loop{
		{Name: "reconciler", Once: true, Run: cl.Reconcile},
		{Name: "versions", Run: cl.Versions().Run, Ready: cl.Versions().Live},
	}
	return parts, nil
}

func buildWorkloads(b *Builder) (Parts, error) {
	wl, err := b.Workloads()
	if err != nil {
		return Parts{}, err
	}
	var parts Parts
	for pattern, h := range wl.Routes() {
		parts.Routes = append(parts.Routes, Route{pattern, h})
	}
	slices.SortFunc(parts.Routes, func(a, b Route) int { return strings.Compare(a.Pattern, b.Pattern) })
	parts.Agent = []Route{route(workloadsv1connect.NewWorkloadServiceHandler(wl, b.rpcMetrics(), b.nodeAuth(), small))}
	parts.Loops = []Loop{
		{Name: "targets", Once: true, Run: wl.Reconcile},
		{Name: "versions", Run: wl.Versions().Run, Ready: wl.Versions().Live},
	}
	return parts, nil
}

func buildTenant(b *Builder) (Parts, error) {
	o := tenant.Options{Store: b.Store, Inventory: b.Inventory, Logger: b.Log}
	rec, del := tenant.NewReconciler(o), tenant.NewDeleter(o)
	return Parts{Loops: []Loop{
		{Name: "defaults", Once: true, Run: rec.Run},
		{Name: "deletions", Once: true, Run: del.Run},
	}}, nil
}

// small: most answers are a few hundred bytes, where gzip would cost more
// CPU than it saves bytes; workflows with their cloud-init are compressed.
var small = connect.WithCompressMinBytes(4 << 10)

// route turns a Connect handler's (path, handler) into a Route.
func route(path string, h http.Handler) Route {
	return Route{path, h}
}
