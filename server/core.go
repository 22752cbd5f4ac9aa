package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/sqlstore"
)

// adminTokenTTL is how long the admin token written on first start lives.
// It is rewritten on a start after it expired (or no longer verifies).
const adminTokenTTL = 365 * 24 * time.Hour

// openCore opens what every module of the process uses: the data
// directory, the store (migrated), the inventory, the token issuer and
// verifier, the process's metrics, and the admin token.
func (p *Process) openCore(ctx context.Context) error {
	cfg, log := &p.cfg, p.log
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	dsn := cfg.dsn()
	if !IsPostgres(dsn) {
		unlock, err := lockSQLite(dsn)
		if err != nil {
			return err
		}
		p.closers = append(p.closers, unlock)
	}
	// The process's own metrics: every component registers its series
	// here, and /metrics serves them (with the exporter module's).
	reg := metrics.NewRegistry()
	store, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Logger: log, MaxConns: cfg.DBConns, Metrics: reg})
	if err != nil {
		return fmt.Errorf("open database %s: %w", RedactDSN(dsn), err)
	}
	p.store = store
	p.closers = append(p.closers, store.Close)
	b := &Builder{ctx: ctx, cfg: cfg, Store: store, Log: log, Metrics: reg, registry: cfg.Registry, selected: cfg.Modules, parts: map[any]any{}}
	p.b = b

	// API creates are group-committed (see inventory.Batcher), one batch
	// at a time: a batch writes its creates together (UpdateGrouped), and
	// 32 clients' creates went from 1,739/s with 4 workers to 2,228/s with
	// one (BENCHMARKS.md). The nodes' writes have a batcher of their own
	// (southboundBatcher), so neither waits behind the other.
	apiBatcher := inventory.NewBatcher(store, inventory.BatcherOptions{Workers: 1, Logger: log})
	b.onClose(apiBatcher.Close)
	registerBatcher(reg, "api", apiBatcher)
	secrets, err := Use(b, secretsKey)
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
	b.Inventory = inventory.New(store, inventory.Options{Logger: log, Batcher: apiBatcher, WebhookURLs: eim.URLPolicy{AllowPrivate: cfg.WebhookAllowPrivate}, Secrets: secrets})
	if err := ensureDefaultProject(ctx, b.Inventory, log); err != nil {
		return err
	}

	if b.Issuer, err = LoadIssuer(cfg.DataDir, cfg.SigningKey); err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	b.Verifier, err = auth.NewVerifier(ctx, b.Issuer, auth.VerifierOptions{
		OIDCIssuer: cfg.OIDCIssuer, JWKSURL: cfg.JWKSURL, Audience: cfg.Audience,
		Leeway: leewayOption(cfg.TokenLeeway),
	})
	if err != nil {
		return fmt.Errorf("token verifier: %w", err)
	}
	tokPath, err := ensureAdminToken(ctx, cfg.DataDir, b.Issuer, b.Verifier)
	if err != nil {
		return err
	}
	fmt.Fprintf(p.stdout, "eim: admin token in %s\n", tokPath)
	return nil
}

// coordinate sets how the process works with the deployment's other
// processes: on PostgreSQL each process announces its modules (what the
// API and the needs check see) and runs its run-once loops under database
// leases. A SQLite database serves one process (see lockSQLite), which is
// then the whole deployment.
func (p *Process) coordinate() {
	cfg, store := &p.cfg, p.store
	p.copts = coord.Options{Store: store, Holder: cfg.ReplicaID, TTL: cfg.LeaseTTL, Logger: p.log, Metrics: p.b.Metrics}
	p.once = Singleton(alone)
	if IsPostgres(cfg.dsn()) {
		p.once = func(ctx context.Context, name string, fn func(context.Context) error) error {
			return coord.Singleton(ctx, p.copts, name, fn)
		}
		p.members = func(ctx context.Context) ([][]string, error) {
			ms, err := store.Members(ctx)
			var out [][]string
			for _, m := range ms {
				out = append(out, m.Modules)
			}
			return out, err
		}
	}
	p.b.deployment = newDeployment(cfg.Modules, p.members, p.log)
}

// actAs makes the module the actor of what h writes, unless h knows
// better (the API's caller, the calling node: see eim.WithActor).
func actAs(module string, h http.Handler) http.Handler {
	actor := eim.ModuleActor(module)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(eim.WithActor(r.Context(), actor)))
	})
}

// notServed answers every path of a process without the api module: the
// API is served by the deployment's processes that run it.
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
