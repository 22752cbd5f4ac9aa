package server

import (
	"context"
	"crypto/x509"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"log/slog"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/clusters"
	gateway "github.com/eimhq/eim/connect"
	"github.com/eimhq/eim/connect/wire"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/maintenance"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/onboarding"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/oob/ipmi"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/telemetry"
	"github.com/eimhq/eim/workloads"
)

// Builder holds what the modules of a process share: the store, the
// inventory, the token verifier, and components built on first use by the
// modules that need them (the southbound server and its batcher, the
// provisioning, onboarding, telemetry and maintenance services), so that a
// component two modules use is built once.
type Builder struct {
	ctx context.Context
	cfg *Config

	Store     eim.Store
	Inventory *inventory.Service
	Log       *slog.Logger
	Issuer    *auth.Issuer
	Verifier  *auth.Verifier
	// Metrics is the process's registry: components register their series
	// on it, and /metrics serves it.
	Metrics *prometheus.Registry

	selected   []*Module
	secrets    *seal.Key
	deployment *deployment

	// The agent side, set when a module of the process serves nodes.
	ca       *pki.Authority
	sbCert   *x509.Certificate
	agentURL string
	// httpAddr is the HTTP listener's address, known once it is bound
	// (after the modules are built, before anything is served).
	httpAddr string

	sb       *southbound.Server
	batcher  *inventory.Batcher
	provOpts provisioning.Options
	prov     *provisioning.Service
	onb      *onboarding.Service
	hview    *hostview.View
	tel      *telemetry.Service
	maint    *maintenance.Service
	clusters *clusters.Service
	edge     *workloads.Service
	gw       *gateway.Gateway
	objs     *objstore.Service
	oob      *oob.Service
	rpc      *metrics.RPC
	api      http.Handler

	// closers run when the process stops, last built first.
	closers []func()
}

// Selected reports whether module name runs in this process.
func (b *Builder) Selected(name string) bool {
	return slices.ContainsFunc(b.selected, func(m *Module) bool { return m.Name == name })
}

// shared reports whether this process shares the database with others
// (PostgreSQL: any number of processes, coordinated through it) rather
// than being the whole deployment (SQLite).
func (b *Builder) shared() bool { return IsPostgres(b.cfg.dsn()) }

// HostView is the process's one view of the hosts, which node
// authentication, the host module, telemetry and maintenance share: a
// host is read and followed once per process, not once per module. The
// server runs it (a per-process loop) once something asked for it.
func (b *Builder) HostView() *hostview.View {
	if b.hview == nil {
		b.hview = hostview.New(hostview.Options{Store: b.Store, Logger: b.Log, Metrics: b.Metrics})
	}
	return b.hview
}

// SouthboundBatcher is the batcher of the nodes' writes: concurrent calls
// share a transaction (inventory.Batcher).
//
// SQLite has one writer: one batch at a time. On PostgreSQL each statement
// is a round trip; batches in flight together hide it, and the agents'
// calls, several reads each, gain from overlapping, up to a point: with
// batches written grouped and a worker free at its commit, 10,000 nodes'
// Day 0 took 83 s with one worker, 60 s with two and 70 s with eight
// (BENCHMARKS.md).
func (b *Builder) SouthboundBatcher() *inventory.Batcher {
	if b.batcher == nil {
		// The workers' default follows the store's capabilities: one on
		// SQLite, two on PostgreSQL.
		b.batcher = inventory.NewBatcher(b.Store, inventory.BatcherOptions{MaxBatch: 128, Logger: b.Log})
		b.closers = append(b.closers, b.batcher.Close)
		registerBatcher(b.Metrics, "southbound", b.batcher)
	}
	return b.batcher
}

// Southbound is the agent listener's handler: node authentication, the
// token endpoint, and the services the modules mount on it.
func (b *Builder) Southbound() *southbound.Server {
	if b.sb == nil {
		b.sb = southbound.New(southbound.Options{Store: b.Store, Issuer: b.Issuer, Logger: b.Log, TokenLeeway: leewayOption(b.cfg.TokenLeeway), Hosts: b.HostView(),
			Metrics: b.Metrics})
	}
	return b.sb
}

// rpcMetrics is the Connect option that counts a handler's calls; it
// comes first among a handler's options, so that the calls node
// authentication refuses count too.
func (b *Builder) rpcMetrics() connect.HandlerOption {
	if b.rpc == nil {
		b.rpc = metrics.NewRPC(b.Metrics)
	}
	return connect.WithInterceptors(b.rpc.Interceptor())
}

// nodeAuth is the Connect option that authenticates nodes.
func (b *Builder) nodeAuth() connect.HandlerOption {
	return connect.WithInterceptors(b.Southbound().Interceptor())
}

// API is the northbound REST API's handler: the api module serves it, and
// the ui module's forms call it in process.
func (b *Builder) API() http.Handler {
	if b.api == nil {
		b.api = httpapi.New(b.Inventory, b.Verifier, httpapi.Options{
			Logger: b.Log, RateLimit: b.cfg.RateLimit, Reprovisioner: b.Provisioning(),
			Deployed: b.deployment.Modules, DeployedNow: b.deployment.Fresh, Initialisers: Initialisers(), Version: buildVersion(),
			Metrics: b.Metrics,
		})
	}
	return b.api
}

// Provisioning is the provisioning service: the provisioning module's, and
// the host module's report-in and the API's reprovisioning use it too.
func (b *Builder) Provisioning() *provisioning.Service {
	if b.prov == nil {
		b.provOpts = provisioning.Options{
			Store: b.Store, Batcher: b.SouthboundBatcher(), Logger: b.Log, Metrics: b.Metrics,
			AgentURL: b.agentURL, ArtifactsDir: b.cfg.BootArtifacts, ActionTimeouts: b.cfg.ActionTimeouts,
		}
		if b.ca != nil {
			b.provOpts.CACertPEM, b.provOpts.CAFingerprint = b.ca.CACertPEM(), b.ca.Fingerprint()
		}
		b.provOpts.SecureBootCert, b.provOpts.RequireSecureBoot = b.sbCert, b.cfg.RequireSecureBoot
		b.prov = provisioning.New(b.provOpts)
	}
	return b.prov
}

// Onboarding is the onboarding service.
func (b *Builder) Onboarding() *onboarding.Service {
	if b.onb == nil {
		b.onb = onboarding.New(onboarding.Options{
			Store: b.Store, Batcher: b.SouthboundBatcher(), Logger: b.Log, Metrics: b.Metrics,
			TokenURL: strings.TrimSuffix(b.agentURL, "/") + southbound.TokenPath,
		})
	}
	return b.onb
}

// Telemetry is the telemetry service (a cache of every project's telemetry
// tree kept by the feed).
func (b *Builder) Telemetry() *telemetry.Service {
	if b.tel == nil {
		b.tel = telemetry.New(telemetry.Options{Store: b.Store, Logger: b.Log, Hosts: b.HostView(), Metrics: b.Metrics})
	}
	return b.tel
}

// Maintenance is the maintenance service (a cache of every project's
// maintenance plans kept by the feed).
func (b *Builder) Maintenance() *maintenance.Service {
	if b.maint == nil {
		b.maint = maintenance.New(maintenance.Options{Store: b.Store, Logger: b.Log, Hosts: b.HostView(), Metrics: b.Metrics})
	}
	return b.maint
}

// Clusters is the clusters module's service: its API, reconciler and
// nodes' service, and the plan versions the host module's heartbeats
// carry.
func (b *Builder) Clusters() (*clusters.Service, error) {
	if b.clusters == nil {
		key, err := b.secretsKey()
		if err != nil {
			return nil, err
		}
		d := b.deployment
		b.clusters = clusters.New(clusters.Options{
			Store: b.Store, Inventory: b.Inventory, Authenticator: b.Verifier, Key: key, Logger: b.Log, Metrics: b.Metrics,
			AgentURL: b.agentURL, Artifacts: b.cfg.ClusterArtifacts, ConnectTokenTTL: b.cfg.ConnectTokenTTL,
			Connect: func() bool { return slices.Contains(d.Modules(), "connect") },
		})
	}
	return b.clusters, nil
}

// Workloads is the workloads module: its API, its devices' service, its
// targets loop and the heartbeats' versions of the devices' sets.
func (b *Builder) Workloads() (*workloads.Service, error) {
	if b.edge == nil {
		key, err := b.secretsKey()
		if err != nil {
			return nil, err
		}
		// Devices' uploads are granted by the projects' object storage
		// (or the embedded store, served by the objectstorage module).
		uploads, err := b.UploadGranter()
		if err != nil {
			return nil, err
		}
		if b.edge, err = workloads.New(workloads.Options{Store: b.Store, FeedStore: b.Store, Inventory: b.Inventory,
			Authenticator: b.Verifier, Key: key, Logger: b.Log, Metrics: b.Metrics, Uploads: uploads,
			RolloutTick: b.cfg.WorkloadsRolloutTick}); err != nil {
			return nil, err
		}
	}
	return b.edge, nil
}

// Connect is the connect module's gateway: its tunnels, proxy and API.
// The UI calls its API (kubeconfigs, connections) in process too.
func (b *Builder) Connect() *gateway.Gateway {
	if b.gw == nil {
		peer := b.cfg.ConnectPeerURL
		b.gw = gateway.New(gateway.Options{
			Store: b.Store, Authenticator: b.Verifier, Minter: b.Issuer, Logger: b.Log, Replica: b.cfg.ReplicaID,
			PeerURL: func() string {
				if peer != "" {
					return peer
				}
				return peerURL(b.httpAddr)
			},
			Timing:   wire.Timing{Interval: b.cfg.ConnectPingInterval, Timeout: b.cfg.ConnectPingTimeout},
			TokenTTL: b.cfg.ConnectTokenTTL,
			// With the clusters module in the deployment, a kubeconfig is
			// only for a cluster it knows.
			ClustersDeployed: func() bool { return slices.Contains(b.deployment.Modules(), "clusters") },
		})
	}
	return b.gw
}

// uiV2 is the v2 API (the clusters and connect modules' /v2/ routes) as
// the UI's clusters pages call it, in process with the user's token, as
// the server mounts it: the API's own checks apply. The clusters API is
// there when this process runs the clusters module, or was given the
// deployment's secrets key (--secrets-key: a cluster's join token is
// sealed under it when it is created); without either, a UI-only process
// would seal under a key of its own that no clusters module could open,
// so its clusters pages answer what the fallback says instead.
func (b *Builder) uiV2() (http.Handler, error) {
	mux := http.NewServeMux()
	if b.Selected("clusters") || b.cfg.SecretsKey != "" {
		cl, err := b.Clusters()
		if err != nil {
			return nil, err
		}
		for p, h := range cl.Routes() {
			mux.Handle(p, h)
		}
	}
	for p, h := range b.Connect().Routes() {
		if strings.Contains(p, "/v2/") {
			mux.Handle(p, h)
		}
	}
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte(`{"code":"Unimplemented","message":"this process does not serve the clusters API: run the ui module beside the clusters module, or give it the deployment's --secrets-key"}` + "\n"))
	})
	return mux, nil
}

// OOB is the oob module's service: hosts' BMCs, their power jobs and
// polls. The UI calls its API in process too.
func (b *Builder) OOB() (*oob.Service, error) {
	if b.oob == nil {
		key, err := b.secretsKey()
		if err != nil {
			return nil, err
		}
		svc, err := oob.New(oob.Options{Store: b.Store, Authenticator: b.Verifier, Key: key, Logger: b.Log.With("module", "oob"),
			Feed: b.Store, Metrics: b.Metrics, Holder: b.cfg.ReplicaID + "/" + eim.NewID("oob"),
			Drivers: map[eim.BMCProtocol]oob.Driver{
				eim.BMCIPMI:    oob.NewIPMI(ipmi.NewDriver(b.cfg.OOBIPMITool), ipmi.Config{Timeout: 10 * time.Second}),
				eim.BMCRedfish: oob.NewRedfishDriver(oob.RedfishOptions{}),
				eim.BMCAMT:     oob.NewAMTDriver(oob.AMTOptions{}),
			},
			Workers: b.cfg.OOBWorkers, PollEvery: b.cfg.OOBPollEvery, SiteLimit: b.cfg.OOBSiteLimit, SiteWindow: b.cfg.OOBSiteWindow,
			ConfirmTimeout: b.cfg.OOBConfirmTimeout, JobTimeout: b.cfg.OOBJobTimeout, Lease: b.cfg.OOBLease, GracefulTimeout: b.cfg.OOBGracefulTimeout,
			HTTPBootURL: b.cfg.OOBHTTPBootURL, CallHomeTimeout: b.cfg.OOBCallHomeTimeout})
		if err != nil {
			return nil, err
		}
		b.oob = svc
	}
	return b.oob, nil
}

// uiV1 is the v1 API the UI's pages call in process: the api module's,
// and the API routes of the workloads, oob and objectstorage modules
// (edge workloads, hosts' BMCs and power jobs, the object storage
// setting) when this process runs the module or has the deployment's
// secrets key to build it with; otherwise those paths answer 501 saying
// so, and the pages show it.
func (b *Builder) uiV1() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/", httpapi.InProcess(b.API()))
	can := func(module string) bool { return b.Selected(module) || b.cfg.SecretsKey != "" }
	add := func(routes map[string]http.Handler) {
		for p, h := range routes {
			mux.Handle(p, h)
		}
	}
	absent := func(module string, patterns ...string) {
		for _, p := range patterns {
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotImplemented)
				_, _ = w.Write([]byte(`{"code":"Unimplemented","message":"this process does not serve the ` + module + ` module's API: run the ui module beside it, or give it the deployment's --secrets-key"}` + "\n"))
			})
		}
	}
	if can("workloads") {
		wl, err := b.Workloads()
		if err != nil {
			return nil, err
		}
		add(wl.Routes())
	} else {
		absent("workloads", "/v1/projects/{projectName}/edgeworkloads", "/v1/projects/{projectName}/edgeworkloads/")
	}
	if can("oob") {
		svc, err := b.OOB()
		if err != nil {
			return nil, err
		}
		add(svc.Routes())
	} else {
		absent("oob", oob.BMCPath, oob.BMCPath+"/")
	}
	if can("objectstorage") {
		objs, err := b.ObjectStore()
		if err != nil {
			return nil, err
		}
		add(objs.Routes())
	} else {
		absent("objectstorage", objstore.SettingPath, "/v1/projects/{projectName}/edgedata/")
	}
	return mux, nil
}

// ObjectStore is the projects' object storage: their settings' API, the
// embedded store, and the granter of devices' uploads (UploadGranter).
// Its embedded store is reached through the agent listener, so it has one
// only in a process with an agent module (the objectstorage module is
// one).
func (b *Builder) ObjectStore() (*objstore.Service, error) {
	if b.objs == nil {
		key, err := b.secretsKey()
		if err != nil {
			return nil, err
		}
		s, err := objstore.New(objstore.Options{Store: b.Store, Authenticator: b.Verifier, Key: key, DataDir: b.cfg.DataDir,
			AgentURL: b.agentURL, Logger: b.Log.With("part", "objstore")})
		if err != nil {
			return nil, err
		}
		b.objs = s
	}
	return b.objs, nil
}

// UploadGranter is what the workloads module gives devices that ask to
// upload their data: ObjectStore's granter.
func (b *Builder) UploadGranter() (eim.UploadGranter, error) {
	s, err := b.ObjectStore()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// secretsKey is the key that seals secrets at rest (see loadSecretsKey),
// loaded once.
func (b *Builder) secretsKey() (*seal.Key, error) {
	if b.secrets == nil {
		k, err := loadSecretsKey(b.cfg)
		if err != nil {
			return nil, err
		}
		b.secrets = k
	}
	return b.secrets, nil
}

// loadSecretsKey loads the key that seals secrets at rest: the operator's
// file, else the data directory's (made on first start).
func loadSecretsKey(cfg *Config) (*seal.Key, error) {
	if cfg.SecretsKey != "" {
		return seal.Load(cfg.SecretsKey) // its errors name the key
	}
	return seal.LoadDir(cfg.DataDir)
}

// loadCatalog reads the shipped OS profiles and the operator's manifests
// (and, when asked, their package lists).
func (b *Builder) loadCatalog(ctx context.Context) (*oscatalog.Catalog, error) {
	c, err := oscatalog.Load(oscatalog.Shipped(), b.cfg.OSProfiles)
	if err != nil || !b.cfg.FetchPackages {
		return c, err
	}
	c, errs := oscatalog.FetchPackages(ctx, c, http.DefaultClient)
	for _, err := range errs {
		b.Log.Warn("os catalog: package list not fetched", "err", err)
	}
	return c, nil
}

// registerBatcher exposes a batcher's queue and counters on reg, labelled
// batcher=name; they are read at each scrape, so the batcher's own path
// costs nothing more.
func registerBatcher(reg prometheus.Registerer, name string, bt *inventory.Batcher) {
	if reg == nil {
		return
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"batcher": name}, reg)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eim_batcher_queue_depth",
			Help: "Calls waiting in a batcher's queue for a transaction (api: the API's creates; southbound: the nodes' writes)."},
			func() float64 { return float64(bt.Stats().Queued) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_batches_total",
			Help: "Transactions a batcher committed."},
			func() float64 { return float64(bt.Stats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_calls_total",
			Help: "Calls a batcher finished (committed or failed)."},
			func() float64 { return float64(bt.Stats().Calls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_reruns_total",
			Help: "Batches a batcher ran again without a call that failed."},
			func() float64 { return float64(bt.Stats().Reruns) }),
	)
}
