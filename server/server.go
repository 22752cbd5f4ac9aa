package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/sqlstore"
)

// adminTokenTTL is how long the admin token written on first start lives.
// It is rewritten on a start after it expired (or no longer verifies).
const adminTokenTTL = 365 * 24 * time.Hour

// shutdownGrace bounds how long in-flight requests may finish after the
// context ends.
const shutdownGrace = 10 * time.Second

// Run opens the store, builds the modules of cfg, serves them and runs
// their loops until ctx ends. An error is returned only for what stops the
// start (a bad flag value, a port taken, a store that cannot be opened or
// migrated) or a listener failing; store failures later are survived.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stdout := cfg.Stdout
	if stdout == nil {
		stdout = io.Discard
	}
	if cfg.Modules == nil {
		cfg.Modules = Modules()
	}
	if cfg.BootArtifacts == "" {
		cfg.BootArtifacts = filepath.Join(cfg.DataDir, "boot")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	dsn := cfg.dsn()
	if !IsPostgres(dsn) {
		unlock, err := lockSQLite(dsn)
		if err != nil {
			return err
		}
		defer unlock()
	}
	// The process's own metrics: every component registers its series
	// here, and /metrics serves them (with the exporter module's).
	reg := metrics.NewRegistry()
	store, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Logger: log, MaxConns: cfg.DBConns, Metrics: reg})
	if err != nil {
		return fmt.Errorf("open database %s: %w", RedactDSN(dsn), err)
	}
	defer store.Close()

	// API creates are group-committed (see inventory.Batcher), one batch
	// at a time: a batch writes its creates together (UpdateGrouped), and
	// 32 clients' creates went from 1,739/s with 4 workers to 2,228/s with
	// one (BENCHMARKS.md). The nodes' writes have a batcher of their own
	// (Builder.SouthboundBatcher), so neither waits behind the other.
	apiBatcher := inventory.NewBatcher(store, inventory.BatcherOptions{Workers: 1, Logger: log})
	defer apiBatcher.Close()
	registerBatcher(reg, "api", apiBatcher)
	// The key that seals secrets at rest (webhooks' secrets here, clusters'
	// tokens in that module): every process that writes or reads them
	// must hold the same one (--secrets-key on a deployment of several).
	secrets, err := loadSecretsKey(&cfg)
	if err != nil {
		return err
	}
	if IsPostgres(dsn) {
		// A database of several processes: each made its own keys in its
		// data directory unless they were given, and a token one signs or a
		// secret one seals would not open in the others.
		var own []string
		if cfg.SigningKey == "" {
			own = append(own, "--signing-key")
		}
		if cfg.SecretsKey == "" {
			own = append(own, "--secrets-key")
		}
		if len(own) > 0 {
			log.Warn("keys of this process's data directory in use: on a deployment of several processes give every one the same files", "flags", strings.Join(own, ","), "dataDir", cfg.DataDir)
		}
	}
	inv := inventory.New(store, inventory.Options{Logger: log, Batcher: apiBatcher, WebhookURLs: eim.URLPolicy{AllowPrivate: cfg.WebhookAllowPrivate}, Secrets: secrets})
	if err := ensureDefaultProject(ctx, inv, log); err != nil {
		return err
	}

	iss, err := LoadIssuer(cfg.DataDir, cfg.SigningKey)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	verifier, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{
		OIDCIssuer: cfg.OIDCIssuer, JWKSURL: cfg.JWKSURL, Audience: cfg.Audience,
		Leeway: leewayOption(cfg.TokenLeeway),
	})
	if err != nil {
		return fmt.Errorf("token verifier: %w", err)
	}
	tokPath, err := ensureAdminToken(ctx, cfg.DataDir, iss, verifier)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "eim: admin token in %s\n", tokPath)

	b := &Builder{
		ctx: ctx, cfg: &cfg, Store: store, Inventory: inv, Log: log, Issuer: iss, Verifier: verifier,
		Metrics: reg, selected: cfg.Modules, secrets: secrets,
	}
	defer func() {
		for _, c := range slices.Backward(b.closers) {
			c()
		}
	}()
	// Coordination with the deployment's other processes: on PostgreSQL
	// each process announces its modules (what the API and the needs
	// check see) and runs its run-once loops under database leases. A
	// SQLite database serves one process (see lockSQLite), which is then
	// the whole deployment.
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = defaultReplicaID()
	}
	copts := coord.Options{Store: store, Holder: cfg.ReplicaID, TTL: cfg.LeaseTTL, Logger: log, Metrics: reg}
	once := Singleton(alone)
	var members func(context.Context) ([][]string, error)
	if IsPostgres(dsn) {
		once = func(ctx context.Context, name string, fn func(context.Context) error) error {
			return coord.Singleton(ctx, copts, name, fn)
		}
		members = func(ctx context.Context) ([][]string, error) {
			ms, err := store.Members(ctx)
			var out [][]string
			for _, m := range ms {
				out = append(out, m.Modules)
			}
			return out, err
		}
	}
	b.deployment = newDeployment(cfg.Modules, members, log)

	// The agent listener first, when a module serves nodes: its address
	// (port 0) goes into the agent URL that the boot script and the
	// provisioned nodes are given.
	var aln net.Listener
	if slices.ContainsFunc(cfg.Modules, func(m *Module) bool { return m.Agent }) {
		if aln, err = net.Listen("tcp", cfg.AgentAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.AgentAddr, err)
		}
		defer aln.Close()
		b.agentURL = cfg.AgentURL
		if b.agentURL == "" {
			b.agentURL = defaultAgentURL(aln.Addr())
		}
		b.ca, err = pki.Load(cfg.DataDir, pki.Options{
			CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSCA,
			Hosts: certHosts(cfg.AgentAddr, b.agentURL),
		})
		if err != nil {
			return fmt.Errorf("agent listener certificates: %w", err)
		}
		if b.ca.Generated() {
			log.Info("created the agent CA", "file", filepath.Join(cfg.DataDir, pki.CACertFile), "fingerprint", b.ca.Fingerprint())
		} else if b.ca.Renewed() {
			log.Info("issued a new agent listener certificate", "dns", b.ca.ServerCert().DNSNames, "ips", b.ca.ServerCert().IPAddresses)
		}
		// The key that signs the micro-OS's manifest (eim microos
		// build); made here so that a fresh server has it.
		if _, err := pki.LoadArtifactKey(cfg.DataDir); err != nil {
			return fmt.Errorf("artifact-signing key: %w", err)
		}
		// The Secure Boot db key that signs the EFI executables (eim
		// microos build): made here too; the server keeps only its
		// certificate, to check what it serves.
		sb, err := pki.LoadSecureBootKey(cfg.DataDir)
		if err != nil {
			return err
		}
		if sb.Generated {
			log.Info("created the Secure Boot db key", "certificate", filepath.Join(cfg.DataDir, pki.SecureBootCertFile))
		}
		b.sbCert = sb.Cert
	}

	// Build the modules and gather what they contribute.
	mux := http.NewServeMux()
	var loops []*runningLoop
	mounted := map[string]string{} // pattern → module, on either listener
	var metricsHandler http.Handler
	for _, m := range cfg.Modules {
		parts, err := m.Build(b)
		if err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
		for _, r := range parts.Routes {
			if prev, ok := mounted["http "+r.Pattern]; ok {
				return fmt.Errorf("module %s: %s is mounted by module %s already", m.Name, r.Pattern, prev)
			}
			mounted["http "+r.Pattern] = m.Name
			mux.Handle(r.Pattern, actAs(m.Name, r.Handler))
		}
		for _, r := range parts.Agent {
			if prev, ok := mounted["agent "+r.Pattern]; ok {
				return fmt.Errorf("module %s: %s is mounted by module %s already", m.Name, r.Pattern, prev)
			}
			mounted["agent "+r.Pattern] = m.Name
			b.Southbound().Mount(r.Pattern, actAs(m.Name, r.Handler))
		}
		for _, r := range parts.AgentStreams {
			if prev, ok := mounted["agent "+r.Pattern]; ok {
				return fmt.Errorf("module %s: %s is mounted by module %s already", m.Name, r.Pattern, prev)
			}
			mounted["agent "+r.Pattern] = m.Name
			b.Southbound().MountStream(r.Pattern, actAs(m.Name, r.Handler))
		}
		for _, l := range parts.Loops {
			loops = append(loops, &runningLoop{module: m.Name, Loop: l})
		}
		if parts.Metrics != nil {
			if prev, ok := mounted["metrics"]; ok {
				return fmt.Errorf("module %s: /metrics is served by module %s already", m.Name, prev)
			}
			mounted["metrics"] = m.Name
			metricsHandler = parts.Metrics
		}
	}
	if metricsHandler == nil {
		metricsHandler = metrics.Handler(reg)
	}
	if aln != nil {
		// Node credentials, read by every authenticated call, are a cache
		// kept by the feed.
		sb := b.Southbound()
		loops = append(loops, &runningLoop{module: "agent", Loop: Loop{Name: "credentials", Run: sb.Run}})
	}
	if b.hview != nil {
		// The hosts as the modules that answer nodes read them, kept by
		// the feed.
		loops = append(loops, &runningLoop{module: "agent", Loop: Loop{Name: "hosts", Run: b.hview.Run, Ready: b.hview.Live}})
	}
	hl := &health{store: store, modules: moduleNames(cfg.Modules), loops: loops}
	mux.HandleFunc("GET /healthz", hl.healthz)
	mux.HandleFunc("GET /readyz", hl.readyz)
	var mln net.Listener
	if cfg.MetricsAddr == "" {
		mux.Handle("GET /metrics", metricsHandler)
	} else {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.MetricsAddr, err)
		}
		defer mln.Close()
	}
	if _, ok := mounted["http /"]; !ok {
		mux.Handle("/", notServed(moduleNames(cfg.Modules)))
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	b.httpAddr = ln.Addr().String()
	srv := &http.Server{
		Handler:           metrics.NewHTTP(reg, "http").Wrap(mux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	servers := []*http.Server{srv}
	if b.Selected("api") {
		fmt.Fprintf(stdout, "eim: serving API on http://%s\n", ln.Addr())
	} else {
		fmt.Fprintf(stdout, "eim: serving HTTP on http://%s (health%s)\n", ln.Addr(), map[bool]string{true: ", /boot/"}[b.Selected("provisioning")])
	}
	var asrv *http.Server
	if aln != nil {
		asrv = &http.Server{
			Handler:           metrics.NewHTTP(reg, "agent").Wrap(b.Southbound()),
			TLSConfig:         b.ca.ServerTLS(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelInfo), // TLS handshake failures: nodes with a wrong CA, scanners
		}
		servers = append(servers, asrv)
		fmt.Fprintf(stdout, "eim: serving agents on https://%s (CA fingerprint sha256:%s)\n", aln.Addr(), b.ca.Fingerprint())
	}
	if mln != nil {
		mmux := http.NewServeMux()
		mmux.Handle("GET /metrics", metricsHandler)
		servers = append(servers, &http.Server{
			Handler:           metrics.NewHTTP(reg, "metrics").Wrap(mmux),
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		})
		fmt.Fprintf(stdout, "eim: serving metrics on http://%s/metrics\n", mln.Addr())
	}
	log.Info("serving", "modules", strings.Join(moduleNames(cfg.Modules), ","), "addr", ln.Addr().String(),
		"agent_addr", addrOf(aln), "metrics_addr", addrOf(mln), "agent_url", b.agentURL, "database", RedactDSN(dsn))
	// Announced before serving (so a process that answers ready is seen
	// by the others' next read), and what the other processes run read
	// before the first check (so a process started after them reports
	// only needs that are missing indeed). A failed announce is retried by
	// Announce's loop.
	if members != nil {
		if err := coord.Join(ctx, copts, moduleNames(cfg.Modules)); err != nil {
			log.Warn("coord: cannot announce this process yet; retrying", "err", err)
		}
	}
	b.deployment.refresh(ctx)
	b.deployment.check(cfg.Modules)

	g, gctx := errgroup.WithContext(ctx)
	if members != nil {
		g.Go(func() error { return coord.Announce(gctx, copts, moduleNames(cfg.Modules)) })
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	if asrv != nil {
		g.Go(func() error {
			if err := asrv.ServeTLS(aln, "", ""); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve agents: %w", err)
			}
			return nil
		})
	}
	if mln != nil {
		msrv := servers[len(servers)-1]
		g.Go(func() error {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), shutdownGrace)
		defer cancel()
		errs := make(chan error, len(servers))
		for _, s := range servers {
			go func() { errs <- s.Shutdown(sctx) }()
		}
		var err error
		for range servers {
			err = errors.Join(err, <-errs)
		}
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	})
	for _, l := range loops {
		g.Go(func() error {
			l.run(gctx, once, log)
			return nil
		})
	}
	g.Go(func() error { return b.deployment.run(gctx, cfg.Modules) })
	if cfg.DebugAddr != "" {
		dln, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.DebugAddr, err)
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
	err = g.Wait()
	log.Info("stopped")
	return err
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// notServed answers every path of a process without the api module: the
// API is served by the deployment's processes that run it.
// actAs makes the module the actor of what h writes, unless h knows
// better (the API's caller, the calling node: see eim.WithActor).
func actAs(module string, h http.Handler) http.Handler {
	actor := eim.ModuleActor(module)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(eim.WithActor(r.Context(), actor)))
	})
}

func notServed(modules []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"code":"NotFound","message":"this process runs the modules %s, not the api module: no operation %s %s here"}`+"\n",
			strings.Join(modules, ","), r.Method, jsonSafe(r.URL.Path))
	})
}

// jsonSafe keeps s printable ASCII without quotes or backslashes, and
// short: it is echoed in a JSON string.
func jsonSafe(s string) string {
	var sb strings.Builder
	for _, c := range s {
		if sb.Len() >= 200 {
			sb.WriteString("…")
			break
		}
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			c = '?'
		}
		sb.WriteRune(c)
	}
	return sb.String()
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
	path := filepath.Join(dataDir, AdminTokenFile)
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
	if err := WriteFileAtomic(path, []byte(tok+"\n")); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return path, nil
}

// WriteFileAtomic writes data to path with mode 0600 via a temporary file
// and a rename, so readers never see a partial token (the admin token
// here; the CLI's connect tokens and kubeconfigs).
func WriteFileAtomic(path string, data []byte) error {
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
