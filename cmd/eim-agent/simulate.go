package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// simConfig is what "eim-agent simulate" was asked to do.
type simConfig struct {
	server, ca           string
	nodes                int
	identities, writeIDs string
	namePrefix           string
	nodesFile            string
	seed                 uint64
	register, nzt        bool
	api, tokenFile       string
	project, osID        string
	enroll               string
	installed            bool
	labels               labelFlags
	failShare            float64
	rebootShare          float64
	concurrency          int
	connections          int
	actionTime           time.Duration
	backoffMin           time.Duration
	backoffMax           time.Duration
	jsonOut              bool
	reportFile           string
	timeout              time.Duration
	verbose              bool

	hold        time.Duration
	exitDay0    bool
	stopShare   float64
	stopAfter   time.Duration
	settle      time.Duration
	workers     int
	checkEvery  time.Duration
	flagTimeout time.Duration

	clusterInstall, clusterUpgrade, clusterRemoval rangeFlag
	clusterFailShare                               float64
	clusterRetry                                   time.Duration

	workloadStart, workloadRestart time.Duration
	workloadFailShare              float64
	workloadFailRevision           revisionShares
	workloadDeploys                string
}

// revisionShares collects repeated --workload-fail-revision REV=SHARE.
type revisionShares map[int64]float64

func (r revisionShares) String() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(r)) {
		out = append(out, fmt.Sprintf("%d=%g", k, r[k]))
	}
	return strings.Join(out, ",")
}

func (r revisionShares) Set(v string) error {
	rev, share, ok := strings.Cut(v, "=")
	n, err := strconv.ParseInt(rev, 10, 64)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("%q: want REVISION=SHARE with a revision of 1 or more", v)
	}
	f, err := strconv.ParseFloat(share, 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("%q: the share must be between 0 and 1", v)
	}
	r[n] = f
	return nil
}

// rangeFlag is a sim.Range flag: "5s-20s" or "10s".
type rangeFlag struct{ r *sim.Range }

func (f rangeFlag) String() string {
	if f.r == nil {
		return ""
	}
	return f.r.String()
}

func (f rangeFlag) Set(s string) error {
	r, err := sim.ParseRange(s)
	if err != nil {
		return err
	}
	*f.r = r
	return nil
}

const simulateUsage = `usage: eim-agent simulate --server URL --ca FILE --nodes N [flags]

Runs N simulated nodes in one process. Each has its own identity and goes
through the southbound calls of a real node (discover, token, workflow,
action reports, then ReportIn from its "installed OS"); actions only sleep.
Hosts are named PREFIX00001 … (--name-prefix; by default sim-XXXXXX- from
the seed, so that two runs do not share names).

Then the fleet holds until interrupted (Ctrl-C; or for --hold DURATION, or
not at all with --exit-after-day0): every node that reached RUNNING goes on
as a node: Heartbeat every interval the server answers (its own token,
refreshed), from a shared schedule, so the hosts stay "Running";
--stop-share of it goes silent --stop-after into the hold. A node whose
workflow failed keeps asking for it, as a real one, and runs it again when
its instance is reprovisioned ("eim instance reprovision"), then
heartbeats too. With --token-file the hosts "No Connection" are counted
through the REST API during the hold.

The report comes after the hold. The exit status is 0 only if every node
reached RUNNING (on Day 0, or after a reprovision during the hold), and
with --token-file none was flagged "No Connection" wrongly and the stopped
ones all were within the timeout + 10 s.

With --nodes-file (and --hold), the nodes are already provisioned: the file
(JSON Lines of hostId, project, clientId, clientSecret, [tokenUrl], as
bench/seed writes it after seeding the server's store) gives each one's
credentials. There is no Day 0: the first node's heartbeat tells the
interval, the others' first heartbeats spread over it, then the hold.

During the hold, a node whose heartbeat answer names a cluster_version it
has not applied acts as a cluster node (docs/clusters-node.md): it fetches
its plan and reports REGISTERING, INSTALL_IN_PROGRESS and ACTIVE over
--cluster-install-time (an upgrade over --cluster-upgrade-time), or ERROR
for the --cluster-fail-share of nodes given a fault; a removal reports
DEREGISTERING, UNINSTALL_IN_PROGRESS and INACTIVE over
--cluster-removal-time. Nothing is installed; the report has a clusters
section.

A node whose heartbeat answer names a workloads_version it has not
applied fetches its edge workloads (GetWorkloads, as the agent does) and
runs simulated pods: Deploying, then Running after --workload-start-time
(±50 %), or, for the --workload-fail-share of pods (per revision:
--workload-fail-revision REV=SHARE), crashing: the first container exits
with code 3 and is restarted after --workload-restart, doubling. Status is
sent (ReportStatus) only when it changed, and in full when an answer asks.
Nothing runs; the report has a workloads section. --workload-deploys FILE
records each pod deployed, a JSON line each (at, hostId, workload,
revision): which device was given which revision, when.

`

// parseSimulate parses the flags of "eim-agent simulate".
func parseSimulate(args []string, stderr io.Writer) (*simConfig, error) {
	c := &simConfig{}
	fs := newFlags("simulate", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simulateUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.server, "server", "", "agent URL of the server (https://HOST:8443)")
	fs.StringVar(&c.ca, "ca", "", "the server's CA certificate file (<data-dir>/ca.crt), or sha256:FINGERPRINT")
	fs.IntVar(&c.nodes, "nodes", 0, "number of nodes (default: every identity of --identities)")
	fs.StringVar(&c.identities, "identities", "", "CSV file of uuid,serial lines (or with a header naming its uuid and serial columns, e.g. an eim host import file): the fleet's identities")
	fs.StringVar(&c.writeIDs, "write-identities", "", "write the generated identities to this CSV file")
	fs.StringVar(&c.namePrefix, "name-prefix", "", "hostnames are this prefix and a 5-digit number (default sim-XXXXXX- from the seed)")
	fs.StringVar(&c.nodesFile, "nodes-file", "", "with --hold: nodes already provisioned, from this JSON Lines file (bench/seed); no Day 0")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of generated identities and fault assignment (default: from the clock)")
	fs.BoolVar(&c.register, "register", false, "pre-register the nodes through the REST API first (autoOnboard)")
	fs.StringVar(&c.api, "api", "http://127.0.0.1:8080", "REST API URL, for --register")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding a bearer token for the REST API, for --register")
	fs.StringVar(&c.project, "project", "default", "project to register the nodes in")
	fs.StringVar(&c.osID, "os", "", "with --register: create each host's instance with this OS resource ID")
	fs.BoolVar(&c.nzt, "nzt", false, "with --register: create no instances; the project's default OS applies (zero-touch)")
	fs.StringVar(&c.enroll, "enroll", "", "enrollment token to present (for nodes not pre-registered: they wait in the project's enrollment lobby until approved)")
	fs.BoolVar(&c.installed, "installed", false, "with --enroll: the nodes run an OS already (as eim-agent enroll): once approved they skip provisioning")
	fs.Var(&c.labels, "label", "with --enroll: a key=value label the nodes report to the enrollment lobby (repeatable)")
	fs.Float64Var(&c.failShare, "fail-share", 0, "share of nodes whose stream-image action fails (0..1)")
	fs.Float64Var(&c.rebootShare, "reboot-share", 0, "share of nodes that reboot once mid-workflow (0..1)")
	fs.IntVar(&c.concurrency, "concurrency", 0, "nodes running at once (default: all)")
	fs.IntVar(&c.connections, "connections", 0, "HTTP/2 connections the nodes share (0: 8, or one per 200 Day-0 nodes running at once if more)")
	fs.DurationVar(&c.actionTime, "action-time", 20*time.Millisecond, "duration of each simulated action (±50%)")
	fs.DurationVar(&c.backoffMin, "backoff-min", agent.DefaultBackoff.Min, "agents' retry back-off, first wait")
	fs.DurationVar(&c.backoffMax, "backoff-max", agent.DefaultBackoff.Max, "agents' retry back-off, longest wait")
	fs.BoolVar(&c.jsonOut, "json", false, "no progress line; print the report as one JSON line")
	fs.StringVar(&c.reportFile, "report", "", "also write the report as JSON to this file")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on nodes not RUNNING after this long")
	fs.BoolVar(&c.verbose, "verbose", false, "print the agents' warnings and errors on stderr")
	fs.DurationVar(&c.hold, "hold", 0, "after Day 0, keep the running nodes heartbeating this long (default: until interrupted)")
	fs.BoolVar(&c.exitDay0, "exit-after-day0", false, "no hold: report and exit once Day 0 is over (the hosts then go \"No Connection\")")
	fs.Float64Var(&c.stopShare, "stop-share", 0, "with --hold: share of the nodes that stop heartbeating (0..1)")
	fs.DurationVar(&c.stopAfter, "stop-after", 0, "with --stop-share: when they stop, into the hold")
	fs.DurationVar(&c.settle, "settle", 0, "with --hold: the start of the hold reported apart from the steady phase (default one heartbeat interval)")
	fs.IntVar(&c.workers, "workers", sim.DefaultWorkers, "with --hold: heartbeats in flight at most")
	fs.DurationVar(&c.checkEvery, "check-every", sim.DefaultCheckEvery, "with --hold and --token-file: how often to count the hosts \"No Connection\" (every second after the stop)")
	fs.DurationVar(&c.flagTimeout, "flag-timeout", 0, "the server's heartbeat timeout, to judge detection by (default 3 intervals)")
	c.clusterInstall = rangeFlag{new(sim.Range)}
	c.clusterUpgrade = rangeFlag{new(sim.Range)}
	c.clusterRemoval = rangeFlag{new(sim.Range)}
	*c.clusterInstall.r, *c.clusterUpgrade.r, *c.clusterRemoval.r = sim.DefaultClusterInstall, sim.DefaultClusterUpgrade, sim.DefaultClusterRemoval
	fs.Var(c.clusterInstall, "cluster-install-time", "with --hold: how long a simulated cluster install takes, MIN-MAX (uniform) or one duration")
	fs.Var(c.clusterUpgrade, "cluster-upgrade-time", "with --hold: how long a simulated cluster upgrade (drain, replace, restart) takes")
	fs.Var(c.clusterRemoval, "cluster-removal-time", "with --hold: how long a simulated cluster removal (drain, uninstall) takes")
	fs.Float64Var(&c.clusterFailShare, "cluster-fail-share", 0, "with --hold: share of the nodes whose cluster installs fail (ERROR) (0..1)")
	fs.DurationVar(&c.clusterRetry, "cluster-retry", sim.DefaultClusterRetry, "with --hold: how long a simulated node waits before it tries a failed plan again")
	fs.DurationVar(&c.workloadStart, "workload-start-time", sim.DefaultWorkloadStart, "with --hold: how long a simulated pod takes from its deploy to Running (±50%)")
	fs.Float64Var(&c.workloadFailShare, "workload-fail-share", 0, "with --hold: share of the simulated pods that crash (Degraded, or Exited with one container; exit code 3, restarts) (0..1)")
	c.workloadFailRevision = revisionShares{}
	fs.Var(c.workloadFailRevision, "workload-fail-revision", "with --hold: REV=SHARE: the share of the pods of revision REV that crash, instead of --workload-fail-share (repeatable)")
	fs.StringVar(&c.workloadDeploys, "workload-deploys", "", "with --hold: write a JSON line to this file for each simulated pod deployed (at, hostId, workload, revision): which device was given which revision, when")
	fs.DurationVar(&c.workloadRestart, "workload-restart", sim.DefaultWorkloadRestart, "with --hold: wait before a crashed container's first restart (doubling up to 5m)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	var problems []string
	if c.workloadFailShare < 0 || c.workloadFailShare > 1 {
		problems = append(problems, "--workload-fail-share must be between 0 and 1")
	}
	if c.workloadStart <= 0 || c.workloadRestart <= 0 {
		problems = append(problems, "--workload-start-time and --workload-restart must be positive")
	}
	if !strings.HasPrefix(c.server, "https://") {
		problems = append(problems, "--server must be an https URL")
	}
	if c.ca == "" {
		problems = append(problems, "--ca is required")
	}
	if c.nodes < 0 || (c.nodes == 0 && c.identities == "" && c.nodesFile == "") {
		problems = append(problems, "--nodes must be positive (or give --identities or --nodes-file)")
	}
	if c.exitDay0 && c.hold != 0 {
		problems = append(problems, "--exit-after-day0 holds not at all: not with --hold")
	}
	if c.nodesFile != "" {
		if c.exitDay0 {
			problems = append(problems, "--nodes-file has no Day 0: not with --exit-after-day0")
		}
		if c.nodes != 0 {
			// The server expects every seeded node: the others would be
			// flagged "No Connection" after the timeout.
			problems = append(problems, "--nodes-file runs every node of the file: not with --nodes")
		}
		var day0 []string
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"--identities", c.identities != ""}, {"--write-identities", c.writeIDs != ""}, {"--register", c.register},
			{"--enroll", c.enroll != ""}, {"--fail-share", c.failShare != 0}, {"--reboot-share", c.rebootShare != 0},
		} {
			if f.set {
				day0 = append(day0, f.name)
			}
		}
		if len(day0) > 0 {
			problems = append(problems, "--nodes-file has no Day 0: not with "+strings.Join(day0, ", "))
		}
	}
	if (c.installed || len(c.labels) > 0) && c.enroll == "" {
		problems = append(problems, "--installed and --label are for unknown devices: give --enroll")
	}
	if c.failShare < 0 || c.failShare > 1 || c.rebootShare < 0 || c.rebootShare > 1 {
		problems = append(problems, "--fail-share and --reboot-share are between 0 and 1")
	}
	if c.register {
		if c.tokenFile == "" {
			problems = append(problems, "--register needs --token-file")
		}
		if (c.osID == "") == !c.nzt {
			problems = append(problems, "--register needs exactly one of --os ID and --nzt")
		}
	} else if c.osID != "" || c.nzt {
		problems = append(problems, "--os and --nzt go with --register")
	}
	if c.concurrency < 0 || c.connections < 0 || c.timeout <= 0 {
		problems = append(problems, "--concurrency ≥ 0, --connections ≥ 0 and --timeout > 0")
	}
	switch {
	case c.hold < 0 || c.stopAfter < 0 || c.settle < 0 || c.flagTimeout < 0 || c.checkEvery <= 0 || c.workers < 1:
		problems = append(problems, "--hold, --stop-after and --flag-timeout ≥ 0, --check-every > 0, --workers ≥ 1")
	case c.stopShare < 0 || c.stopShare > 1:
		problems = append(problems, "--stop-share is between 0 and 1")
	case c.clusterFailShare < 0 || c.clusterFailShare > 1:
		problems = append(problems, "--cluster-fail-share is between 0 and 1")
	case c.clusterRetry <= 0:
		problems = append(problems, "--cluster-retry must be positive")
	case c.stopShare > 0 && c.exitDay0:
		problems = append(problems, "--stop-share needs a hold: not with --exit-after-day0")
	case c.stopShare > 0 && c.hold > 0 && c.stopAfter >= c.hold:
		problems = append(problems, "--stop-after must fall within --hold")
	}
	if len(problems) > 0 {
		return nil, usagef("simulate: %s", strings.Join(problems, "; "))
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	if c.namePrefix == "" {
		c.namePrefix = fmt.Sprintf("sim-%06x-", c.seed*0x9e3779b97f4a7c15>>40)
	}
	if c.hold == 0 && !c.exitDay0 {
		c.hold = sim.HoldUntilCancelled
	}
	return c, nil
}

// runSimulate runs "eim-agent simulate".
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseSimulate(args, stderr)
	if err != nil {
		return err
	}
	var ids []sim.Identity
	var provisioned []sim.ProvisionedNode
	if c.nodesFile != "" {
		provisioned, err = c.readNodes()
	} else {
		ids, err = c.fleet()
	}
	if err != nil {
		return err
	}
	ca := c.ca
	if !strings.HasPrefix(ca, "sha256:") {
		b, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		ca = string(b)
	}
	// The timeout bounds registration and Day 0, not the hold.
	deadline := time.Now().Add(c.timeout)
	if c.register {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		err := c.preRegister(rctx, ids, stderr)
		cancel()
		if err != nil {
			return err
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	opts := sim.Options{
		URL: c.server, CA: ca, Identities: ids, Nodes: provisioned, EnrollToken: c.enroll, Installed: c.installed, Labels: c.labels,
		Concurrency: c.concurrency, Connections: c.connections, ActionTime: c.actionTime,
		FailShare: c.failShare, RebootShare: c.rebootShare, Seed: c.seed,
		Backoff: agent.Backoff{Min: c.backoffMin, Max: c.backoffMax}, Logger: logger,
		Deadline: deadline, Hold: c.hold, StopShare: c.stopShare, StopAfter: c.stopAfter, Settle: c.settle,
		Workers: c.workers, CheckEvery: c.checkEvery, FlagTimeout: c.flagTimeout,
		ClusterInstall: *c.clusterInstall.r, ClusterUpgrade: *c.clusterUpgrade.r, ClusterRemoval: *c.clusterRemoval.r,
		ClusterFailShare: c.clusterFailShare, ClusterRetry: c.clusterRetry,
		WorkloadStart: c.workloadStart, WorkloadRestart: c.workloadRestart,
		WorkloadFaults: sim.WorkloadFaults{Share: c.workloadFailShare, ByRevision: c.workloadFailRevision},
	}
	if c.workloadDeploys != "" {
		f, err := os.Create(c.workloadDeploys)
		if err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		defer f.Close()
		w := bufio.NewWriterSize(f, 1<<16)
		// Flushed at the end: a line is written for each deploy, not
		// read before the simulator ends.
		defer w.Flush()
		opts.WorkloadDeploys = w
	}
	if c.hold > 0 && c.tokenFile != "" {
		cl, err := c.apiClient()
		if err != nil {
			return err
		}
		opts.Monitor = apiMonitor{cl: cl, project: c.project}
	}
	if !c.jsonOut {
		opts.Progress = stderr
		opts.TTY = isTerminal(stderr)
	}
	rep, err := sim.Run(ctx, opts)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if c.reportFile != "" {
		if err := os.WriteFile(c.reportFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
	}
	if c.jsonOut {
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printReport(stdout, rep)
	}
	n := rep.Final[sim.OutcomeRunning]
	if rep.Hold != nil {
		n += int(rep.Hold.Recovered) // failed on Day 0, RUNNING after a reprovision
	}
	if n != rep.Nodes {
		return fmt.Errorf("simulate: %d of %d nodes did not reach RUNNING (%d injected failures, %d unexpected outcomes)",
			rep.Nodes-n, rep.Nodes, rep.Injected["fail"], rep.Unexpected)
	}
	return holdVerdict(rep.Hold)
}

// holdVerdict fails a monitored hold with hosts flagged wrongly, or stopped
// nodes not flagged within the bar.
func holdVerdict(h *sim.HoldReport) error {
	if h == nil || !h.Monitored {
		return nil
	}
	var problems []string
	if h.FalseNoConnection > 0 {
		problems = append(problems, fmt.Sprintf("%d hosts wrongly \"No Connection\"", h.FalseNoConnection))
	}
	if d := h.Detection; d != nil && !d.Met {
		problems = append(problems, fmt.Sprintf("stopped nodes: %d, all flagged after %.0fs (bar %.0fs), %d missed, %d flagged not stopped",
			d.Stopped, d.AllFlaggedSeconds, d.BarSeconds, d.Missed, d.FalsePositives))
	}
	if len(problems) > 0 {
		return fmt.Errorf("simulate: hold: %s", strings.Join(problems, "; "))
	}
	return nil
}

// apiClient is the REST client of --api with the token of --token-file.
func (c *simConfig) apiClient() (*client.Client, error) {
	tok, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	return client.New(c.api, strings.TrimSpace(string(tok)), nil), nil
}

// noConnection selects the hosts flagged for silence.
const noConnection = `hostStatus="No Connection"`

// apiMonitor counts and lists the project's hosts "No Connection" through
// the REST API.
type apiMonitor struct {
	cl      *client.Client
	project string
}

func (m apiMonitor) NoConnection(ctx context.Context) (int, error) {
	page, err := m.cl.List(ctx, m.project, eim.KindHost, client.ListOptions{Filter: noConnection, PageSize: 1})
	if err != nil {
		return 0, err
	}
	return page.Total, nil
}

// NoConnectionIDs pages by resource ID (keyset), not by offset: the API
// caps offsets at 10,000, and a fleet can have more hosts flagged.
func (m apiMonitor) NoConnectionIDs(ctx context.Context) ([]string, error) {
	var ids []string
	for {
		f := noConnection
		if len(ids) > 0 {
			f += ` AND resourceId > "` + ids[len(ids)-1] + `"`
		}
		page, err := m.cl.List(ctx, m.project, eim.KindHost, client.ListOptions{Filter: f, OrderBy: "resourceId", PageSize: 100})
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Items {
			var h struct {
				ResourceID string `json:"resourceId"`
			}
			if err := json.Unmarshal(raw, &h); err != nil {
				return nil, fmt.Errorf("hosts: %w", err)
			}
			ids = append(ids, h.ResourceID)
		}
		if !page.HasNext || len(page.Items) == 0 {
			return ids, nil
		}
	}
}

// readNodes reads the nodes of --nodes-file, which must be in --project:
// that is where the hosts are counted.
func (c *simConfig) readNodes() ([]sim.ProvisionedNode, error) {
	f, err := os.Open(c.nodesFile)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	defer f.Close()
	nodes, err := sim.ReadNodes(f)
	if err != nil {
		return nil, fmt.Errorf("simulate: %s: %w", c.nodesFile, err)
	}
	for _, n := range nodes {
		if n.Project != c.project {
			return nil, fmt.Errorf("simulate: %s: line %d: host %s is in project %q, not in --project %q", c.nodesFile, n.Line, n.HostID, n.Project, c.project)
		}
	}
	return nodes, nil
}

// fleet reads or generates the identities.
func (c *simConfig) fleet() ([]sim.Identity, error) {
	var ids []sim.Identity
	if c.identities != "" {
		f, err := os.Open(c.identities)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		defer f.Close()
		if ids, err = sim.ReadCSV(f); err != nil {
			return nil, fmt.Errorf("simulate: %s: %w", c.identities, err)
		}
		if c.nodes > len(ids) {
			return nil, fmt.Errorf("simulate: --nodes %d but %s holds %d identities", c.nodes, c.identities, len(ids))
		}
		if c.nodes > 0 {
			ids = ids[:c.nodes]
		}
	} else {
		ids = sim.Generate(c.nodes, c.seed)
	}
	sim.Name(ids, c.namePrefix)
	if c.writeIDs != "" {
		f, err := os.Create(c.writeIDs)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		err = sim.WriteCSV(f, ids)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("simulate: write identities: %w", err)
		}
	}
	return ids, nil
}

// preRegister registers the fleet through the REST API.
func (c *simConfig) preRegister(ctx context.Context, ids []sim.Identity, stderr io.Writer) error {
	tok, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	var done atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if c.jsonOut {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(stderr, "registering: %d/%d hosts\n", done.Load(), len(ids))
			case <-stop:
				return
			}
		}
	}()
	var retried atomic.Int64
	reg := sim.Registration{
		Client:  client.New(c.api, strings.TrimSpace(string(tok)), nil),
		Project: c.project, OSID: c.osID, Concurrency: 32,
		Backoff: agent.Backoff{Min: c.backoffMin, Max: c.backoffMax},
		OnHost:  func() { done.Add(1) },
		OnRetry: func(error) { retried.Add(1) },
	}
	_, err = reg.Register(ctx, ids)
	close(stop)
	<-finished
	if err != nil {
		return fmt.Errorf("simulate: pre-register: %w", err)
	}
	if !c.jsonOut {
		fmt.Fprintf(stderr, "registered %d hosts in %.1fs (%d calls retried)\n", len(ids), time.Since(start).Seconds(), retried.Load())
	}
	return nil
}

// printReport prints the report for people.
func printReport(w io.Writer, r *sim.Report) {
	if r.Seeded {
		fmt.Fprintf(w, "%d nodes provisioned before the run (--nodes-file): no Day 0; first heartbeat answered after %.1fs\n", r.Nodes, r.WallSeconds)
		if r.Hold != nil {
			printHold(w, r.Hold, "from a seeded store")
		}
		return
	}
	fmt.Fprintf(w, "%d nodes in %.1fs: %d running, %d failed, %d stuck (injected: %d failures, %d reboots; %d unexpected)\n",
		r.Nodes, r.WallSeconds, r.Final[sim.OutcomeRunning], r.Final[sim.OutcomeFailed], r.Final[sim.OutcomeStuck],
		r.Injected["fail"], r.Injected["reboot"], r.Unexpected)
	fmt.Fprintf(w, "%-28s %7s %8s %8s %8s %8s\n", "PHASE (seconds)", "NODES", "P50", "P95", "P99", "MAX")
	for _, name := range sim.PhaseOrder(r) {
		s := r.Phases[name]
		fmt.Fprintf(w, "%-28s %7d %8.3f %8.3f %8.3f %8.3f\n", name, s.Count, s.P50, s.P95, s.P99, s.Max)
	}
	for msg, n := range r.Errors {
		fmt.Fprintf(w, "%d× %s\n", n, msg)
	}
	if r.Hold != nil {
		printHold(w, r.Hold, "after Day 0")
	}
}

// printHold prints the hold's part of the report; after says what came
// before.
func printHold(w io.Writer, h *sim.HoldReport, after string) {
	fmt.Fprintf(w, "\nhold: %d nodes heartbeating every %.0fs for %.0fs %s (%d workers)\n", h.Nodes, h.IntervalSeconds, h.HoldSeconds, after, h.Workers)
	fmt.Fprintf(w, "%-8s %7s %7s %9s %8s %7s %8s %8s %8s %8s %8s %9s %6s\n",
		"PHASE", "SECONDS", "NODES", "BEATS", "BEATS/S", "ERRORS", "P50 ms", "P90 ms", "P99 ms", "P99.9 ms", "MAX ms", "LAG P99", "NO-CON")
	for _, p := range h.Phases {
		l := p.Latency
		nc := "-"
		if p.Checks > 0 {
			nc = strconv.Itoa(p.MaxNoConnection)
		}
		fmt.Fprintf(w, "%-8s %7.1f %7d %9d %8.1f %7d %8.2f %8.2f %8.2f %8.2f %8.2f %9.2f %6s\n",
			p.Name, p.Seconds, p.Nodes, l.Count, p.Rate, l.Errors, l.P50, l.P90, l.P99, l.P999, l.Max, p.Lag.P99, nc)
	}
	if h.Recovered > 0 {
		fmt.Fprintf(w, "recovered: %d nodes whose workflow failed ran it again after a reprovision and are RUNNING\n", h.Recovered)
	}
	t := h.Tokens
	fmt.Fprintf(w, "tokens: %d fetched, %d errors, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d deferred by the server (retry after); %d nodes revoked\n",
		t.Count, t.Errors, t.P50, t.P99, t.Max, h.Deferred, h.Revoked)
	if !h.Monitored {
		fmt.Fprintln(w, "\"No Connection\" not checked (no --token-file)")
	} else {
		fmt.Fprintf(w, "false \"No Connection\": %d\n", h.FalseNoConnection)
	}
	if d := h.Detection; d != nil {
		fmt.Fprintf(w, "stopped %d nodes %.0fs into the hold (their last heartbeat %+.2fs); timeout %.0fs, bar %.0fs: first flagged after %.1fs, all after %.1fs; at the end %d flagged, %d of them not stopped, %d stopped not flagged: %s\n",
			d.Stopped, d.AtSeconds, d.LastBeatSeconds, d.TimeoutSeconds, d.BarSeconds, d.FirstFlaggedSeconds, d.AllFlaggedSeconds,
			d.Flagged, d.FalsePositives, d.Missed, map[bool]string{true: "met", false: "NOT met"}[d.Met])
	}
	if cl := h.Clusters; cl != nil {
		printClusters(w, cl)
	}
	if wl := h.Workloads; wl != nil {
		printWorkloads(w, wl)
	}
	for msg, n := range h.Errors {
		fmt.Fprintf(w, "%d× %s\n", n, msg)
	}
}

// printClusters prints what the simulated cluster nodes did.
func printClusters(w io.Writer, c *sim.ClusterReport) {
	if c.Off {
		fmt.Fprintln(w, "clusters: the server has no cluster service")
		return
	}
	var final []string
	for _, s := range slices.Sorted(maps.Keys(c.Final)) {
		name := s
		if name == "" {
			name = "none yet"
		}
		final = append(final, fmt.Sprintf("%s %d", name, c.Final[s]))
	}
	fmt.Fprintf(w, "clusters: %d nodes (%d faulty), %d busy at the end; last state: %s\n", c.Nodes, c.Faulty, c.Busy, strings.Join(final, ", "))
	for _, k := range slices.Sorted(maps.Keys(c.Jobs)) {
		j := c.Jobs[k]
		fmt.Fprintf(w, "  %-12s %6d jobs, p50 %.1fs, p99 %.1fs, max %.1fs\n", k, j.Count, j.P50/1000, j.P99/1000, j.Max/1000)
	}
	fmt.Fprintf(w, "  calls: %d (GetPlan, ReportStatus), %d errors, p50 %.2f ms, p99 %.2f ms\n", c.Calls.Count, c.Calls.Errors, c.Calls.P50, c.Calls.P99)
}

// printWorkloads prints what the simulated pods did.
func printWorkloads(w io.Writer, r *sim.WorkloadReport) {
	if r.Off {
		fmt.Fprintln(w, "workloads: the server has no workloads service")
		return
	}
	var pods []string
	for _, p := range slices.Sorted(maps.Keys(r.Pods)) {
		pods = append(pods, fmt.Sprintf("%s %d", p, r.Pods[p]))
	}
	fmt.Fprintf(w, "workloads: %d nodes, pods at the end: %s (%d crashing); %d status reports, %d nodes with one unsent\n",
		r.Nodes, strings.Join(pods, ", "), r.Crashing, r.Reports, r.Unsent)
	for _, rev := range slices.Sorted(maps.Keys(r.ByRevision)) {
		var ps []string
		for _, p := range slices.Sorted(maps.Keys(r.ByRevision[rev])) {
			ps = append(ps, fmt.Sprintf("%s %d", p, r.ByRevision[rev][p]))
		}
		fmt.Fprintf(w, "  revision %s: %s\n", rev, strings.Join(ps, ", "))
	}
	for _, c := range []struct {
		name string
		l    sim.Latency
	}{{"GetWorkloads", r.Get}, {"ReportStatus", r.Status}, {"deploy→Running answered", r.Deploy}} {
		fmt.Fprintf(w, "  %-24s %7d, %d errors, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", c.name, c.l.Count, c.l.Errors, c.l.P50, c.l.P99, c.l.Max)
	}
	if r.Backwards > 0 {
		fmt.Fprintf(w, "  %d answers older than the version applied, refused\n", r.Backwards)
	}
}

// isTerminal tells whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// labelFlags collects repeated --label key=value flags.
type labelFlags []agent.Label

func (l *labelFlags) String() string {
	var parts []string
	for _, it := range *l {
		parts = append(parts, it.Key+"="+it.Value)
	}
	return strings.Join(parts, ",")
}

func (l *labelFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", v)
	}
	*l = append(*l, agent.Label{Key: k, Value: val})
	return nil
}
