package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// simConfig is what "eim-agent simulate" was asked to do.
type simConfig struct {
	server, ca           string
	nodes                int
	identities, writeIDs string
	seed                 uint64
	register, nzt        bool
	api, tokenFile       string
	project, osID        string
	enroll               string
	failShare            float64
	rebootShare          float64
	concurrency          int
	connections          int
	actionTime           time.Duration
	backoffMin           time.Duration
	backoffMax           time.Duration
	jsonOut              bool
	timeout              time.Duration
	verbose              bool
}

const simulateUsage = `usage: eim-agent simulate --server URL --ca FILE --nodes N [flags]

Runs N simulated nodes in one process. Each has its own identity and goes
through the southbound calls of a real node (discover, token, workflow,
action reports, then ReportIn from its "installed OS"); actions only sleep.
Exits 0 only if every node reached RUNNING.

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
	fs.StringVar(&c.identities, "identities", "", "CSV file of uuid,serial lines: the fleet's identities")
	fs.StringVar(&c.writeIDs, "write-identities", "", "write the generated identities to this CSV file")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of generated identities and fault assignment (default: from the clock)")
	fs.BoolVar(&c.register, "register", false, "pre-register the nodes through the REST API first (autoOnboard)")
	fs.StringVar(&c.api, "api", "http://127.0.0.1:8080", "REST API URL, for --register")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding a bearer token for the REST API, for --register")
	fs.StringVar(&c.project, "project", "default", "project to register the nodes in")
	fs.StringVar(&c.osID, "os", "", "with --register: create each host's instance with this OS resource ID")
	fs.BoolVar(&c.nzt, "nzt", false, "with --register: create no instances; the project's default OS applies (zero-touch)")
	fs.StringVar(&c.enroll, "enroll", "", "enrollment token to present (for nodes not pre-registered)")
	fs.Float64Var(&c.failShare, "fail-share", 0, "share of nodes whose stream-image action fails (0..1)")
	fs.Float64Var(&c.rebootShare, "reboot-share", 0, "share of nodes that reboot once mid-workflow (0..1)")
	fs.IntVar(&c.concurrency, "concurrency", 0, "nodes running at once (default: all)")
	fs.IntVar(&c.connections, "connections", 8, "HTTP/2 connections the nodes share")
	fs.DurationVar(&c.actionTime, "action-time", 20*time.Millisecond, "duration of each simulated action (±50%)")
	fs.DurationVar(&c.backoffMin, "backoff-min", agent.DefaultBackoff.Min, "agents' retry back-off, first wait")
	fs.DurationVar(&c.backoffMax, "backoff-max", agent.DefaultBackoff.Max, "agents' retry back-off, longest wait")
	fs.BoolVar(&c.jsonOut, "json", false, "no progress line; print the report as one JSON line")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on nodes not RUNNING after this long")
	fs.BoolVar(&c.verbose, "verbose", false, "print the agents' warnings and errors on stderr")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	var problems []string
	if !strings.HasPrefix(c.server, "https://") {
		problems = append(problems, "--server must be an https URL")
	}
	if c.ca == "" {
		problems = append(problems, "--ca is required")
	}
	if c.nodes < 0 || (c.nodes == 0 && c.identities == "") {
		problems = append(problems, "--nodes must be positive (or give --identities)")
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
	if c.concurrency < 0 || c.connections < 1 || c.timeout <= 0 {
		problems = append(problems, "--concurrency ≥ 0, --connections ≥ 1 and --timeout > 0")
	}
	if len(problems) > 0 {
		return nil, usagef("simulate: %s", strings.Join(problems, "; "))
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

// runSimulate runs "eim-agent simulate".
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseSimulate(args, stderr)
	if err != nil {
		return err
	}
	ids, err := c.fleet()
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
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.register {
		if err := c.preRegister(ctx, ids, stderr); err != nil {
			return err
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	opts := sim.Options{
		URL: c.server, CA: ca, Identities: ids, EnrollToken: c.enroll,
		Concurrency: c.concurrency, Connections: c.connections, ActionTime: c.actionTime,
		FailShare: c.failShare, RebootShare: c.rebootShare, Seed: c.seed,
		Backoff: agent.Backoff{Min: c.backoffMin, Max: c.backoffMax}, Logger: logger,
	}
	if !c.jsonOut {
		opts.Progress = stderr
		opts.TTY = isTerminal(stderr)
	}
	rep, err := sim.Run(ctx, opts)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if c.jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printReport(stdout, rep)
	}
	if n := rep.Final[sim.OutcomeRunning]; n != rep.Nodes {
		return fmt.Errorf("simulate: %d of %d nodes did not reach RUNNING (%d injected failures, %d unexpected outcomes)",
			rep.Nodes-n, rep.Nodes, rep.Injected["fail"], rep.Unexpected)
	}
	return nil
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
	reg := sim.Registration{
		Client:  client.New(c.api, strings.TrimSpace(string(tok)), nil),
		Project: c.project, OSID: c.osID, Concurrency: 32,
		OnHost: func() { done.Add(1) },
	}
	_, err = reg.Register(ctx, ids)
	close(stop)
	<-finished
	if err != nil {
		return fmt.Errorf("simulate: pre-register: %w", err)
	}
	if !c.jsonOut {
		fmt.Fprintf(stderr, "registered %d hosts in %.1fs\n", len(ids), time.Since(start).Seconds())
	}
	return nil
}

// printReport prints the report for people.
func printReport(w io.Writer, r *sim.Report) {
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
