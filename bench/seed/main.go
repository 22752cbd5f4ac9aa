// Command seed writes N onboarded, provisioned and running nodes straight
// into a stopped EIM server's store, so that the Day-1 heartbeat benchmark
// (SEED=1 bench/heartbeat.sh) starts from a fleet in minutes instead of
// repeating Day 0 (bench/day0.sh measures that). It is a benchmark tool,
// not a way to onboard anything: the nodes exist only as the credentials it
// writes to --out, for "eim-agent simulate --hold D --nodes-file FILE".
//
//	go run ./bench/seed --database DATA-DIR|SQLITE-FILE|postgres://… --nodes 100000 --out nodes.jsonl \
//		[--project default] [--os OS-ID] [--token-url URL] [--seed N] [--batch 2000] [--sites SITE-ID,…]
//
// Start the server once on the database first (it creates the schema and
// the default project), and stop it while seeding: the server's caches
// must start from the seeded store.
//
// Each node is a host and its instance as Day 0 leaves them: the host
// registered with autoOnboard, ONBOARDED (desired and current), registered
// and onboarded statuses, node credentials issued as onboarding's Discover
// issues them (a new secret, its hash stored, the credential generation
// bumped); the instance created with the OS, its workflow succeeded
// ("Provisioned") and RUNNING after the node reported in from its
// installed OS, which also made the host "Running". The server is told
// it heard from every node at seeding time, as a server restarted under a
// running fleet knows; workflows are not written (provisioning answers a
// RUNNING instance without one "done"). Rows go in through the store's own
// transactions (with their change events), --batch hosts at a time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/onboarding"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var u *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &u):
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// config is what the command was asked to do.
type config struct {
	database string
	project  string
	nodes    int
	out      string
	osID     string
	tokenURL string
	seed     uint64
	batch    int
	parallel int
	// sites, when given, are site IDs the hosts are placed in, in turn
	// (host i in sites[i % len]): a fleet with sites for per-site
	// disruption budgets (bench/rollout.sh).
	sites []string
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.database, "database", "", "the server's store: its data directory (eim.db in it), a SQLite file, or postgres://…")
	fs.StringVar(&c.project, "project", eim.DefaultProject, "project of the nodes (it must exist)")
	fs.IntVar(&c.nodes, "nodes", 0, "number of nodes")
	fs.StringVar(&c.out, "out", "", "nodes file to write (JSON Lines with each node's client secret; mode 0600)")
	fs.StringVar(&c.osID, "os", "", "OS resource of the instances (default: create one, bench-seed-os)")
	fs.StringVar(&c.tokenURL, "token-url", "", "token endpoint written for the nodes (default: none, the server's own)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the nodes' identities (default: from the clock)")
	fs.IntVar(&c.batch, "batch", 2000, "hosts (with their instances) per transaction")
	fs.IntVar(&c.parallel, "parallel", 4, "transactions at once (SQLite has one writer: they queue)")
	sites := fs.String("sites", "", "comma-separated IDs of existing sites of the project: the hosts are placed in them in turn")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if c.database == "" {
		problems = append(problems, "--database is required")
	}
	if c.nodes <= 0 {
		problems = append(problems, "--nodes must be positive")
	}
	if c.out == "" {
		problems = append(problems, "--out is required")
	}
	if c.batch <= 0 || c.parallel <= 0 {
		problems = append(problems, "--batch and --parallel must be positive")
	}
	for _, id := range strings.Split(*sites, ",") {
		if id = strings.TrimSpace(id); id != "" {
			c.sites = append(c.sites, id)
		}
	}
	if *sites != "" && len(c.sites) == 0 {
		problems = append(problems, "--sites names no site")
	}
	if len(problems) > 0 {
		return nil, &usageError{strings.Join(problems, "; ")}
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	dsn, err := storeDSN(c.database)
	if err != nil {
		return err
	}
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	start := time.Now()
	res, err := seed(ctx, st, c, stderr)
	if err != nil {
		return err
	}
	if err := writeNodes(c.out, res.nodes); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "seeded %d running nodes (hosts with their instances, OS %s) in project %s in %.1fs (%.0f nodes/s); nodes file %s\n",
		len(res.nodes), res.osID, c.project, el.Seconds(), float64(len(res.nodes))/el.Seconds(), c.out)
	return st.Close()
}

// storeDSN is the store of --database: a PostgreSQL URL as is, or an
// existing SQLite file, or eim.db in an existing directory. A missing file
// would be created empty, without the server's project and keys.
func storeDSN(database string) (string, error) {
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		return database, nil
	}
	path := strings.TrimPrefix(database, "sqlite:")
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "eim.db")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no SQLite store at %s (start the server once on it): %w", path, err)
	}
	return path, nil
}

// Statuses as the modules write them on the way to a running node.
const (
	// The provisioning module: a workflow that succeeded, and a node that
	// reported in from its installed OS (instance and host).
	statusProvisioned = "Provisioned"
	statusRunning     = "Running"
	// The default OS, made when --os is not given.
	seedOSName = "bench-seed-os"
)

// seeded is what seed wrote.
type seeded struct {
	osID  string
	nodes []sim.ProvisionedNode
}

// seed writes c.nodes running nodes into st, reporting progress to w.
func seed(ctx context.Context, st eim.Store, c *config, w io.Writer) (*seeded, error) {
	if _, err := st.FindProject(ctx, c.project); err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, fmt.Errorf("project %q not found (start the server once: it creates %q; or create the project)", c.project, eim.DefaultProject)
		}
		return nil, fmt.Errorf("find project %s: %w", c.project, err)
	}
	osID, err := seedOS(ctx, st, c)
	if err != nil {
		return nil, err
	}
	ids := sim.Generate(c.nodes, c.seed)
	// Batches in parallel transactions (PostgreSQL takes them at once; a
	// transaction is mostly round trips), kept in the identities' order.
	batches := make([][]sim.ProvisionedNode, (len(ids)+c.batch-1)/c.batch)
	var (
		mu         sync.Mutex
		done       int
		start      = time.Now()
		last       = start
		g, gctx    = errgroup.WithContext(ctx)
		parallel   = min(c.parallel, len(batches))
		reportDone = func(n int) {
			mu.Lock()
			defer mu.Unlock()
			done += n
			if now := time.Now(); now.Sub(last) >= 5*time.Second || done == len(ids) {
				last = now
				fmt.Fprintf(w, "seeding: %d/%d nodes, %.0f/s\n", done, len(ids), float64(done)/now.Sub(start).Seconds())
			}
		}
	)
	g.SetLimit(parallel)
	for i := range batches {
		g.Go(func() error {
			nodes, err := seedBatch(gctx, st, c, osID, i*c.batch, ids[i*c.batch:min((i+1)*c.batch, len(ids))])
			if err != nil {
				return err
			}
			batches[i] = nodes
			reportDone(len(nodes))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := &seeded{osID: osID, nodes: slices.Concat(batches...)}
	// As if the server had heard from every node: after a restart it
	// expects each within a timeout from its start.
	seen := make([]eim.LastSeen, len(out.nodes))
	now := time.Now()
	for i, n := range out.nodes {
		seen[i] = eim.LastSeen{Project: n.Project, HostID: n.HostID, At: now}
	}
	if err := st.SaveLastSeen(ctx, seen); err != nil {
		return nil, fmt.Errorf("last seen: %w", err)
	}
	return out, nil
}

// seedOS returns --os, checked, or the default OS of an earlier seed, or
// creates it through the inventory's rules.
func seedOS(ctx context.Context, st eim.Store, c *config) (string, error) {
	if c.osID != "" {
		err := st.View(ctx, c.project, func(tx eim.Tx) error {
			_, err := tx.Get(ctx, eim.KindOS, c.osID)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("--os %s in project %s: %w", c.osID, c.project, err)
		}
		return c.osID, nil
	}
	var found []eim.Resource
	err := st.View(ctx, c.project, func(tx eim.Tx) error {
		var err error
		found, _, err = tx.List(ctx, eim.KindOS, eim.Query{Where: []eim.Cond{{Field: "name", Value: seedOSName}}, Limit: 1, NoTotal: true})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("find the OS: %w", err)
	}
	if len(found) > 0 {
		return found[0].Base().ResourceID, nil
	}
	r, err := inventory.New(st, inventory.Options{}).Create(ctx, c.project, &eim.OS{
		Name: seedOSName, ProfileName: seedOSName, Architecture: "x86_64",
		ImageURL:    "http://127.0.0.1/" + seedOSName + ".img",
		Sha256:      strings.Repeat("0", 64),
		Description: "the OS of instances seeded for benchmarks (never installed)",
	})
	if err != nil {
		return "", fmt.Errorf("create the OS: %w", err)
	}
	return r.Base().ResourceID, nil
}

// seedBatch writes the nodes of ids (the first is the fleet's first-th)
// in one transaction and returns them.
func seedBatch(ctx context.Context, st eim.Store, c *config, osID string, first int, ids []sim.Identity) ([]sim.ProvisionedNode, error) {
	var nodes []sim.ProvisionedNode
	err := st.Update(ctx, c.project, func(tx eim.Tx) error {
		nodes = nodes[:0]
		ts := uint64(time.Now().Unix())
		for i, id := range ids {
			h, secret, err := newHost(id, ts)
			if err != nil {
				return err
			}
			if len(c.sites) > 0 {
				h.SiteID = c.sites[(first+i)%len(c.sites)]
			}
			if err := tx.Create(ctx, h); err != nil {
				return fmt.Errorf("host %s: %w", id.Hostname, err)
			}
			in, err := newInstance(c.project, h, osID, ts)
			if err != nil {
				return err
			}
			if err := tx.Create(ctx, in); err != nil {
				return fmt.Errorf("instance of %s: %w", id.Hostname, err)
			}
			nodes = append(nodes, sim.ProvisionedNode{HostID: h.ResourceID, Project: c.project,
				ClientID: southbound.ClientID(h.ResourceID), ClientSecret: secret, TokenURL: c.tokenURL, Hostname: id.Hostname})
		}
		return nil
	})
	if eim.ErrorCode(err) == eim.ECONFLICT {
		err = fmt.Errorf("%w (hosts of these identities exist: seed again with another --seed)", err)
	}
	return nodes, err
}

// newHost returns the host of identity id as Day 0 leaves it, and its
// node's client secret.
func newHost(id sim.Identity, ts uint64) (*eim.Host, string, error) {
	// Registered through the API (sim.Registration: named after the
	// node, autoOnboard) …
	h, err := inventory.NewRegisteredHost(inventory.HostRegistration{Name: id.Hostname, UUID: id.UUID, SerialNumber: id.Serial, AutoOnboard: true})
	if err != nil {
		return nil, "", fmt.Errorf("host %s: %w", id.Hostname, err)
	}
	// … onboarded by Discover (onboarding.decision.apply) …
	h.RegistrationStatus, h.RegistrationStatusIndicator, h.RegistrationStatusTimestamp = onboarding.StatusRegistered, eim.StatusIdle, ts
	secret, hash := southbound.NewSecret()
	h.NodeSecretHash = hash
	h.NodeCredGen++
	h.CurrentState = eim.HostStateOnboarded
	h.OnboardingStatus, h.OnboardingStatusIndicator, h.OnboardingStatusTimestamp = onboarding.StatusOnboarded, eim.StatusIdle, ts
	// … and reported in from its installed OS (provisioning's ReportIn).
	h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = statusRunning, eim.StatusIdle, ts
	h.Hostname = id.Hostname
	// … and heartbeating (the host module: a node that calls is on). A
	// fleet seeded without it is one no running fleet is: every first
	// heartbeat after the restart would write its host.
	h.CurrentPowerState = eim.PowerStateOn
	return h, secret, nil
}

// newInstance returns the instance of host h as Day 0 leaves it.
func newInstance(project string, h *eim.Host, osID string, ts uint64) (*eim.Instance, error) {
	// Created through the API with the OS (sim.Registration) …
	in, err := inventory.NewInstance(&eim.Instance{Meta: eim.Meta{Project: project}, Kind: eim.InstanceKindMetal, Name: h.Name, HostID: h.ResourceID, OSID: osID})
	if err != nil {
		return nil, fmt.Errorf("instance of %s: %w", h.Name, err)
	}
	// … its workflow succeeded (provisioning: the last action's report) …
	in.ProvisioningStatus, in.ProvisioningStatusIndicator, in.ProvisioningStatusTimestamp = statusProvisioned, eim.StatusIdle, ts
	// … and the node reported in (provisioning's ReportIn).
	in.CurrentState = eim.InstanceStateRunning
	in.InstanceStatus, in.InstanceStatusIndicator, in.InstanceStatusTimestamp = statusRunning, eim.StatusIdle, ts
	return in, nil
}

// writeNodes writes the nodes file with mode 0600 (it holds the secrets),
// replacing path only once it is complete.
func writeNodes(path string, nodes []sim.ProvisionedNode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("nodes file: %w", err)
	}
	defer os.Remove(f.Name())
	err = sim.WriteNodes(f, nodes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("nodes file: %w", err)
	}
	return nil
}
