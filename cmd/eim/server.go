package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/maintenance"
	"github.com/eimhq/eim/onboarding"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/telemetry"
)

// adminTokenTTL is how long the admin token written on first start lives.
// It is rewritten on a start after it expired (or no longer verifies).
const adminTokenTTL = 365 * 24 * time.Hour

// shutdownGrace bounds how long in-flight requests may finish after a
// signal.
const shutdownGrace = 10 * time.Second

type serverConfig struct {
	dataDir    string
	httpAddr   string
	database   string
	dbConns    int
	jwksURL    string
	oidcIssuer string
	audience   string
	logLevel   string
	rateLimit  float64
	debugAddr  string

	// Southbound (agents).
	agentAddr     string
	agentURL      string
	tlsCert       string
	tlsKey        string
	tlsCA         string
	bootArtifacts string
	// actionTimeouts override the provisioning actions' default timeouts.
	actionTimeouts map[string]time.Duration
	// The host module's defaults (projects may set their own heartbeat
	// interval and timeout).
	heartbeatInterval, heartbeatTimeout, rebootTimeout time.Duration
	updateTimeout                                      time.Duration
	// The OS catalog: a directory of the operator's manifests, and how
	// often they are read again (0: only at start).
	osProfiles       string
	osCatalogRefresh time.Duration
	// tokenLeeway is how long past their expiry tokens are accepted.
	tokenLeeway   time.Duration
	fetchPackages bool
}

func (c *cli) server(args []string) error {
	fs := c.flagSet("eim server", "eim server [flags]",
		"Runs the inventory, the northbound REST API (with the network boot under /boot/) and the\n"+
			"southbound HTTPS API the nodes' agents call. On first start it creates the project\n"+
			"\"default\", writes an admin token (role eim-admin, valid one year) to <data-dir>/admin.token\n"+
			"and creates a CA for the agent listener (<data-dir>/ca.crt).")
	var cfg serverConfig
	fs.StringVar(&cfg.dataDir, "data-dir", defaultDataDir, "directory for the SQLite database, the signing key and the admin token")
	fs.StringVar(&cfg.httpAddr, "http-addr", "127.0.0.1:8080", "address of the REST API (port 0 picks a free port)")
	fs.StringVar(&cfg.database, "database", c.getenv("EIM_DATABASE"), "postgres://… for PostgreSQL, or a SQLite file (default <data-dir>/eim.db; env EIM_DATABASE)")
	fs.IntVar(&cfg.dbConns, "database-max-conns", sqlstore.DefaultMaxConns, "PostgreSQL: the most connections this process opens (plus one listening for changes); every process of a deployment opens its own, within the server's max_connections")
	fs.StringVar(&cfg.jwksURL, "jwks-url", "", "JWKS URL of an external OIDC issuer whose tokens are accepted too (default: discovered from --oidc-issuer)")
	fs.StringVar(&cfg.oidcIssuer, "oidc-issuer", "", "issuer (iss) of external tokens, e.g. https://keycloak.example.com/realms/master")
	fs.StringVar(&cfg.audience, "oidc-audience", "", "if set, external tokens must carry this audience (aud)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&cfg.rateLimit, "rate-limit", 200, "requests per second per client IP (0 = off)")
	fs.StringVar(&cfg.debugAddr, "debug-addr", "", "if set, serve Go profiles (/debug/pprof/) on this address; keep it on loopback")
	fs.StringVar(&cfg.agentAddr, "agent-addr", "127.0.0.1:8443", "address of the southbound HTTPS API for agents (port 0 picks a free port)")
	fs.StringVar(&cfg.agentURL, "agent-url", "", "URL nodes use to reach the agent listener (default https://<agent-addr>)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "server certificate (PEM chain) of the agent listener instead of the generated one; needs --tls-key")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&cfg.tlsCA, "tls-ca", "", "root CA of --tls-cert that nodes pin (default: the last certificate of --tls-cert)")
	fs.StringVar(&cfg.bootArtifacts, "boot-artifacts", "", "directory of the micro-OS kernel and initramfs served under /boot/artifacts/ (default <data-dir>/boot)")
	fs.Func("action-timeout", "NAME=DURATION: the timeout of a provisioning action, by name or type (repeatable; e.g. stream-image=4h; defaults: stream-image 9800s, others 560s)", func(v string) error {
		name, d, err := provisioning.ParseActionTimeout(v)
		if err != nil {
			return err
		}
		if cfg.actionTimeouts == nil {
			cfg.actionTimeouts = map[string]time.Duration{}
		}
		cfg.actionTimeouts[name] = d
		return nil
	})
	fs.DurationVar(&cfg.tokenLeeway, "token-leeway", auth.DefaultLeeway, "how long past its expiry a token (API or node) is still accepted, for clocks out of step (0: not at all)")
	fs.DurationVar(&cfg.heartbeatInterval, "heartbeat-interval", eim.DefaultHeartbeatInterval*time.Second, "how often nodes send heartbeats, in projects that do not set their own")
	fs.DurationVar(&cfg.heartbeatTimeout, "heartbeat-timeout", 0, "silence after which a host is \"No Connection\", in projects that do not set their own (default 3 heartbeat intervals)")
	fs.DurationVar(&cfg.rebootTimeout, "reboot-timeout", 15*time.Minute, "how long a rebooting host may take to call again before it is \"No Connection\"")
	fs.StringVar(&cfg.osProfiles, "os-profiles", "", "directory of OS profile manifests (*.yaml) loaded into every project with the shipped ones; one with a shipped profile's profileName and osImageVersion replaces it")
	fs.DurationVar(&cfg.osCatalogRefresh, "os-catalog-refresh", oscatalog.DefaultRefresh, "how often the OS profile manifests are read again and every project brought in line (0: only at start)")
	fs.BoolVar(&cfg.fetchPackages, "os-package-lists", false, "download each OS profile's package list (osPackageManifestURL) into its installedPackages, at every catalog read (off: only lists inline in the manifests)")
	fs.DurationVar(&cfg.updateTimeout, "update-timeout", 2*time.Hour, "how long after its last update report a node updating its OS may stay silent before it is \"No Connection\"")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("server", pos, 0, "no arguments"); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", cfg.logLevel)
	}
	if cfg.heartbeatInterval < time.Second || cfg.heartbeatInterval > eim.MaxHeartbeatInterval*time.Second {
		return usagef("--heartbeat-interval: must be 1s..%ds, got %s", eim.MaxHeartbeatInterval, cfg.heartbeatInterval)
	}
	if cfg.heartbeatTimeout != 0 && cfg.heartbeatTimeout < 2*cfg.heartbeatInterval {
		return usagef("--heartbeat-timeout: must be at least two heartbeat intervals (%s), got %s", 2*cfg.heartbeatInterval, cfg.heartbeatTimeout)
	}
	if cfg.tokenLeeway < 0 || cfg.tokenLeeway > 5*time.Minute {
		return usagef("--token-leeway: must be 0s..5m, got %s", cfg.tokenLeeway)
	}
	if cfg.updateTimeout < time.Minute {
		return usagef("--update-timeout: must be at least 1m, got %s", cfg.updateTimeout)
	}
	if cfg.osCatalogRefresh < 0 || (cfg.osCatalogRefresh > 0 && cfg.osCatalogRefresh < time.Minute) {
		return usagef("--os-catalog-refresh: must be 0 (only at start) or at least 1m, got %s", cfg.osCatalogRefresh)
	}
	if cfg.rebootTimeout < time.Minute {
		return usagef("--reboot-timeout: must be at least 1m, got %s", cfg.rebootTimeout)
	}
	if cfg.rateLimit < 0 {
		return usagef("--rate-limit: must not be negative")
	}
	if cfg.dbConns < 2 {
		return usagef("--database-max-conns: must be at least 2, got %d", cfg.dbConns)
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if cfg.tlsCA != "" && cfg.tlsCert == "" {
		return usagef("--tls-ca needs --tls-cert and --tls-key")
	}
	if cfg.agentURL != "" {
		if err := checkAgentURL(cfg.agentURL); err != nil {
			return err
		}
	}
	if cfg.bootArtifacts == "" {
		cfg.bootArtifacts = filepath.Join(cfg.dataDir, "boot")
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	return c.serve(cfg, log)
}

func (c *cli) serve(cfg serverConfig, log *slog.Logger) error {
	ctx := c.ctx
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	dsn := databaseDSN(cfg.dataDir, cfg.database)
	store, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Logger: log, MaxConns: cfg.dbConns})
	if err != nil {
		return fmt.Errorf("open database %s: %w", redactDSN(dsn), err)
	}
	defer store.Close()
	// The OS catalog before anything listens: a bad manifest stops the
	// start, naming the file and the field.
	loadCatalog := func() (*oscatalog.Catalog, error) {
		c, err := oscatalog.Load(oscatalog.Shipped(), cfg.osProfiles)
		if err != nil || !cfg.fetchPackages {
			return c, err
		}
		c, errs := oscatalog.FetchPackages(ctx, c, http.DefaultClient)
		for _, err := range errs {
			log.Warn("os catalog: package list not fetched", "err", err)
		}
		return c, nil
	}
	catalog, err := loadCatalog()
	if err != nil {
		return err
	}
	osRefresh := cfg.osCatalogRefresh
	if osRefresh == 0 {
		osRefresh = -1 // never
	}
	osCatalog := oscatalog.New(oscatalog.Options{Store: store, Catalog: catalog, Logger: log, Refresh: osRefresh,
		Reload: loadCatalog})
	// API creates are group-committed (see inventory.Batcher); the agents'
	// writes have a batcher of their own below, so neither waits behind
	// the other's batch. The API's calls are mostly creates, which a batch
	// writes together: one batch at a time makes the batches large (see
	// inventory.BatcherOptions.Workers); the agents' batcher takes the
	// default of the store's capabilities.
	apiBatcher := inventory.NewBatcher(store, inventory.BatcherOptions{Workers: 1, Logger: log})
	defer apiBatcher.Close()
	inv := inventory.New(store, inventory.Options{Logger: log, Batcher: apiBatcher})
	if err := ensureDefaultProject(ctx, inv, log); err != nil {
		return err
	}
	// Projects made before every project had its default provider
	// (infra_onboarding) get it now.
	if err := inv.EnsureDefaultProviders(ctx); err != nil {
		return err
	}

	iss, err := auth.LoadIssuer(cfg.dataDir)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	verifier, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{
		OIDCIssuer: cfg.oidcIssuer, JWKSURL: cfg.jwksURL, Audience: cfg.audience,
		Leeway: leewayOption(cfg.tokenLeeway),
	})
	if err != nil {
		return fmt.Errorf("token verifier: %w", err)
	}
	tokPath, err := ensureAdminToken(ctx, cfg.dataDir, iss, verifier)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "eim: admin token in %s\n", tokPath)

	// The agent listener first: its address (port 0) goes into the agent
	// URL that the boot script and the provisioned nodes are given.
	aln, err := net.Listen("tcp", cfg.agentAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.agentAddr, err)
	}
	defer aln.Close()
	agentURL := cfg.agentURL
	if agentURL == "" {
		agentURL = defaultAgentURL(aln.Addr())
	}
	ca, err := pki.Load(cfg.dataDir, pki.Options{
		CertFile: cfg.tlsCert, KeyFile: cfg.tlsKey, CAFile: cfg.tlsCA,
		Hosts: certHosts(cfg.agentAddr, agentURL),
	})
	if err != nil {
		return fmt.Errorf("agent listener certificates: %w", err)
	}
	if ca.Generated() {
		log.Info("created the agent CA", "file", filepath.Join(cfg.dataDir, pki.CACertFile), "fingerprint", ca.Fingerprint())
	} else if ca.Renewed() {
		log.Info("issued a new agent listener certificate", "dns", ca.ServerCert().DNSNames, "ips", ca.ServerCert().IPAddresses)
	}

	// The key that signs the micro-OS's manifest (eim microos build);
	// made here so that a fresh server has it.
	if _, err := pki.LoadArtifactKey(cfg.dataDir); err != nil {
		return fmt.Errorf("artifact-signing key: %w", err)
	}

	batcher := inventory.NewBatcher(store, inventory.BatcherOptions{MaxBatch: 128, Logger: log})
	defer batcher.Close()
	provOpts := provisioning.Options{
		Store: store, Batcher: batcher, Logger: log,
		AgentURL: agentURL, CACertPEM: ca.CACertPEM(), CAFingerprint: ca.Fingerprint(),
		ArtifactsDir: cfg.bootArtifacts, ActionTimeouts: cfg.actionTimeouts,
	}
	prov := provisioning.New(provOpts)
	onb := onboarding.New(onboarding.Options{
		Store: store, Batcher: batcher, Logger: log,
		TokenURL: strings.TrimSuffix(agentURL, "/") + southbound.TokenPath,
	})
	// One view of the hosts for the modules that answer nodes: a host is
	// read and followed once per process, not once per module.
	hostView := hostview.New(hostview.Options{Store: store, Logger: log})
	sb := southbound.New(southbound.Options{Store: store, Issuer: iss, Logger: log, TokenLeeway: leewayOption(cfg.tokenLeeway), Hosts: hostView})
	nodeAuth := connect.WithInterceptors(sb.Interceptor())
	// Most answers are a few hundred bytes: gzip would cost more CPU than
	// it saves bytes. Workflows with their cloud-init are compressed.
	small := connect.WithCompressMinBytes(4 << 10)
	sb.Mount(onboardingv1connect.NewOnboardingServiceHandler(onb, small))
	sb.Mount(provisioningv1connect.NewProvisioningServiceHandler(prov, nodeAuth, small))
	tel := telemetry.New(telemetry.Options{Store: store, Logger: log, Hosts: hostView})
	maint := maintenance.New(maintenance.Options{Store: store, Logger: log, Hosts: hostView})
	hosts := hostmgr.New(hostmgr.Options{Store: store, Batcher: batcher, ReportIn: prov.ReportIn, Telemetry: tel, Maintenance: maint, Logger: log, Hosts: hostView,
		Interval: cfg.heartbeatInterval, Timeout: cfg.heartbeatTimeout, RebootTimeout: cfg.rebootTimeout, UpdateTimeout: cfg.updateTimeout})
	sb.Mount(hostv1connect.NewHostServiceHandler(hosts, nodeAuth, small))
	// The boot artifacts over HTTPS too: the micro-OS fetches their signed
	// manifest through the CA it pins (and UEFI HTTPS boot can load them).
	sb.Mount("/boot/", provisioning.BootHandler(provOpts))
	sb.Mount(maintenancev1connect.NewMaintenanceServiceHandler(maint, nodeAuth, small))
	asrv := &http.Server{
		Handler:           sb,
		TLSConfig:         ca.ServerTLS(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelInfo), // TLS handshake failures: nodes with a wrong CA, scanners
	}

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.httpAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/boot/", provisioning.BootHandler(provOpts))
	mux.Handle("/", httpapi.New(inv, verifier, httpapi.Options{Logger: log, RateLimit: cfg.rateLimit, Reprovisioner: prov,
		// The modules started above, for the feature list (GET /v1/orchestrator).
		Modules: []string{httpapi.ModuleOnboarding, httpapi.ModuleProvisioning, httpapi.ModuleHosts,
			httpapi.ModuleMaintenance, httpapi.ModuleTelemetry},
		Version: buildVersion()}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(c.stdout, "eim: serving API on http://%s\n", ln.Addr())
	fmt.Fprintf(c.stdout, "eim: serving agents on https://%s (CA fingerprint sha256:%s)\n", aln.Addr(), ca.Fingerprint())
	log.Info("serving", "addr", ln.Addr().String(), "agent_addr", aln.Addr().String(), "agent_url", agentURL, "database", redactDSN(dsn))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := asrv.ServeTLS(aln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve agents: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), shutdownGrace)
		defer cancel()
		errs := make(chan error, 1)
		go func() { errs <- asrv.Shutdown(sctx) }()
		err := srv.Shutdown(sctx)
		if aerr := <-errs; err == nil {
			err = aerr
		}
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// An error once the server is stopping is the stop itself.
		if err := onb.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("onboarding: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// An error once the server is stopping is the stop itself.
		if err := prov.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("provisioning: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := hostView.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("host view: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := sb.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("southbound: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := hosts.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("host module: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := tel.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("telemetry: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := osCatalog.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("os catalog: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := maint.Run(gctx); err != nil && gctx.Err() == nil {
			return fmt.Errorf("maintenance: %w", err)
		}
		return nil
	})
	if cfg.debugAddr != "" {
		dln, err := net.Listen("tcp", cfg.debugAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.debugAddr, err)
		}
		dsrv := &http.Server{Handler: debugHandler(), ReadHeaderTimeout: 10 * time.Second}
		log.Info("serving profiles", "addr", dln.Addr().String())
		g.Go(func() error {
			if err := dsrv.Serve(dln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve debug: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return dsrv.Close()
		})
	}
	g.Go(func() error {
		if err := inventory.NewReaper(inv, inventory.ReaperOptions{Logger: log}).Run(gctx); err != nil {
			return fmt.Errorf("reaper: %w", err)
		}
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}

// defaultAgentURL is https://ADDR of the bound agent listener, with the
// machine's name in place of an unspecified address (0.0.0.0, ::), which
// nodes cannot dial.
func defaultAgentURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "https://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "https://" + net.JoinHostPort(host, port)
}

// checkAgentURL accepts an absolute https URL without query or fragment.
func checkAgentURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return usagef("--agent-url %q: want an https://host[:port][/path] URL", s)
	}
	return nil
}

// certHosts are the names the generated agent certificate must carry: the
// listen host and the agent URL's host (the machine's name and loopback are
// added by pki).
func certHosts(agentAddr, agentURL string) []string {
	var hosts []string
	if h, _, err := net.SplitHostPort(agentAddr); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(agentURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// databaseDSN is --database, or the SQLite file in the data directory.
func databaseDSN(dataDir, database string) string {
	if database != "" {
		return database
	}
	return filepath.Join(dataDir, "eim.db")
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// redactDSN hides a password in a PostgreSQL URL for logs.
func redactDSN(dsn string) string {
	if !isPostgres(dsn) {
		return dsn
	}
	scheme, rest, _ := strings.Cut(dsn, "://")
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return dsn
	}
	if user, _, hasPw := strings.Cut(userinfo, ":"); hasPw {
		return scheme + "://" + user + ":***@" + host
	}
	return dsn
}

// ensureDefaultProject creates the project "default" on first start, that
// is when there is no project at all (a deleted default stays deleted while
// other projects exist).
func ensureDefaultProject(ctx context.Context, inv *inventory.Service, log *slog.Logger) error {
	ps, err := inv.ListProjects(ctx)
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	if len(ps) > 0 {
		return nil
	}
	p, err := inv.CreateProject(ctx, eim.DefaultProject, "")
	if err != nil && eim.ErrorCode(err) != eim.ECONFLICT { // another replica won
		return fmt.Errorf("create project %s: %w", eim.DefaultProject, err)
	}
	if err == nil {
		log.Info("created project", "name", p.Name, "id", p.ID)
	}
	return nil
}

// ensureAdminToken keeps <dataDir>/admin.token when it still verifies as an
// admin token of this server's key, and writes a new one otherwise.
func ensureAdminToken(ctx context.Context, dataDir string, iss *auth.Issuer, v *auth.Verifier) (string, error) {
	path := filepath.Join(dataDir, adminTokenFile)
	if b, err := os.ReadFile(path); err == nil {
		p, err := v.Authenticate(ctx, strings.TrimSpace(string(b)))
		if err == nil && p.IsAdmin() {
			return path, nil
		}
	}
	tok, err := iss.Mint("eim-admin", []string{eim.RoleAdmin}, adminTokenTTL)
	if err != nil {
		return "", fmt.Errorf("mint admin token: %w", err)
	}
	if err := writeFileAtomic(path, []byte(tok+"\n")); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return path, nil
}

// writeFileAtomic writes data to path with mode 0600 via a temporary file
// and a rename, so readers never see a partial token.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// debugHandler serves the runtime profiles of net/http/pprof on a mux of its
// own, so they are only reachable on --debug-addr.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// buildVersion is the version of the main module the binary was built
// from ("(devel)" for a build from a work tree).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

// leewayOption turns --token-leeway into the auth and southbound option,
// where 0 selects the default and a negative value none.
func leewayOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
