package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim/agent"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"golang.org/x/sync/errgroup"
)

// Options configure a fleet run.
type Options struct {
	// URL is the server's agent URL (https); CA its CA certificate (PEM)
	// or fingerprint ("sha256:<hex>"), as agent.Dial takes it.
	URL string
	CA  string
	// Identities of the nodes, one node each.
	Identities []Identity
	// Nodes, instead of Identities, are nodes already provisioned (a
	// seeded store): no Day 0, they go straight to the hold, which they
	// need. Their first heartbeats spread over one interval, as a running
	// fleet's after a server restart.
	Nodes []ProvisionedNode
	// EnrollToken is passed to Discover (for devices not pre-registered):
	// unknown devices wait in the project's enrollment lobby until
	// approved (a rule's or a person's), backing off while denied.
	EnrollToken string
	// Installed makes the nodes devices with an OS already installed
	// (eim-agent enroll): once onboarded they skip provisioning and
	// report in at once. Labels are what they report to the lobby.
	Installed bool
	Labels    []agent.Label
	// OnLobby, when set, is called at each lobby answer a node gets
	// (agent.Provisioner.OnLobby), with the node's index.
	OnLobby func(node int, denied bool, message string)
	// LobbyPoll, when positive, caps the wait of a node waiting for
	// approval between its calls (agent.Provisioner.MaxPendingWait).
	LobbyPoll time.Duration
	// Concurrency bounds the nodes running at once; 0 runs all at once.
	Concurrency int
	// Connections is the number of HTTP/2 connection pools the nodes share
	// (round robin); 0 means 8, or for Day 0 one per nodesPerConn nodes
	// running at once if that is more.
	Connections int
	// ActionTime is how long each simulated action takes (±50 %).
	ActionTime time.Duration
	// FailShare and RebootShare are the shares (0..1) of nodes whose
	// stream-image action fails, and that reboot once mid-workflow.
	FailShare, RebootShare float64
	// Seed makes fault assignment and jitter reproducible.
	Seed uint64
	// Backoff of the agents' retries; zero values use the agent's defaults.
	Backoff agent.Backoff
	// Logger receives the agents' logs; nil discards them.
	Logger *slog.Logger
	// Progress, when set, receives a progress line every ProgressInterval
	// (default 1 s); TTY rewrites one line instead.
	Progress         io.Writer
	ProgressInterval time.Duration
	TTY              bool
	Now              func() time.Time
	// Deadline, when set, ends Day 0: nodes not RUNNING by then are stuck.
	// The hold is not bound by it.
	Deadline time.Time

	// Hold, when positive, keeps every node that reached RUNNING
	// heartbeating (from its report-in on) and, once Day 0 is over, for
	// Hold more (HoldUntilCancelled: until ctx ends); the report then has
	// a Hold section. During the hold a node whose workflow failed keeps
	// asking for it, as a real one does, and runs it again (without its
	// injected fault: its cause was fixed) once a user reprovisions its
	// instance; then it heartbeats too (HoldReport.Recovered).
	Hold time.Duration
	// StopShare of the nodes stop heartbeating StopAfter into the hold,
	// to measure how the server flags them "No Connection".
	StopShare float64
	StopAfter time.Duration
	// Settle is the start of the hold counted apart from the steady phase
	// (default one interval: the last nodes' first heartbeats).
	Settle time.Duration
	// Workers bounds the heartbeats in flight (default DefaultWorkers).
	Workers int
	// Monitor, when set, counts the hosts "No Connection" every CheckEvery
	// (default DefaultCheckEvery), every second after the stop.
	Monitor    Monitor
	CheckEvery time.Duration
	// FlagTimeout is the server's heartbeat timeout, to judge detection
	// against (default three intervals, as the server's default).
	FlagTimeout time.Duration

	// Simulated cluster nodes (cluster.go), during the hold: how long an
	// installation, an upgrade (drain and restart) and a removal take
	// (defaults DefaultCluster*), the share of nodes whose installations
	// fail (ERROR), and how long a failed plan waits to be tried again
	// (default DefaultClusterRetry).
	ClusterInstall, ClusterUpgrade, ClusterRemoval Range
	ClusterFailShare                               float64
	ClusterRetry                                   time.Duration

	// Simulated edge workloads (workloads.go), during the hold: how long
	// a pod takes from its deploy to Running (±50 %; default
	// DefaultWorkloadStart), the shares of pods that crash instead, and
	// the wait before a crashed container's first restart (doubling;
	// default DefaultWorkloadRestart).
	WorkloadStart   time.Duration
	WorkloadFaults  WorkloadFaults
	WorkloadRestart time.Duration
	// WorkloadDeploys, when set, receives a line for each simulated pod
	// deployed (a workload new to its node, or at another revision): a
	// WorkloadDeploy in JSON. A rollout's checks read them: which device
	// was given which revision, when, and how often.
	WorkloadDeploys io.Writer
}

// Run provisions every node of the fleet until it is RUNNING, its injected
// failure was reported, or ctx ends, and returns the report. The error is
// non-nil only when the run could not start.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Connections <= 0 {
		o.Connections = 8
		if len(o.Nodes) == 0 {
			// Day 0: every node has a call in flight most of the time.
			n := len(o.Identities)
			if o.Concurrency > 0 {
				n = min(n, o.Concurrency)
			}
			o.Connections = max(o.Connections, (n+nodesPerConn-1)/nodesPerConn)
		}
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	conc := o.Concurrency
	if conc <= 0 || conc > len(o.Identities) {
		conc = len(o.Identities)
	}
	pool := make([]*http.Client, o.Connections)
	defer func() {
		for _, hc := range pool {
			if hc != nil {
				hc.CloseIdleConnections()
			}
		}
	}()
	for i := range pool {
		hc, err := agent.Dial(o.URL, o.CA)
		if err != nil {
			return nil, err
		}
		pool[i] = hc
	}
	if err := warmPool(ctx, pool, o.URL); err != nil {
		return nil, err
	}
	if len(o.Nodes) > 0 {
		return runProvisioned(ctx, o, pool)
	}
	start := o.Now()
	tr := newTracker(len(o.Identities), start)
	rnd := rand.New(rand.NewPCG(o.Seed, 0xf1ee7))
	nodes := make([]*node, len(o.Identities))
	for i, id := range o.Identities {
		nodes[i] = &node{idx: i, id: id, t: tr, now: o.Now,
			fail:   rnd.Float64() < o.FailShare,
			reboot: rnd.Float64() < o.RebootShare,
			rnd:    rand.New(rand.NewPCG(o.Seed, uint64(i))),
		}
	}
	var hold *holder
	if o.Hold > 0 {
		hold = newHolder(o, pool)
		hold.start(ctx)
		defer hold.cancel() // on an early return; hold.hold closes it
	}
	day0 := ctx
	if !o.Deadline.IsZero() {
		var cancel context.CancelFunc
		day0, cancel = context.WithDeadline(ctx, o.Deadline)
		defer cancel()
	}
	var prog *progress
	if o.Progress != nil {
		prog = &progress{w: o.Progress, tty: o.TTY, interval: o.ProgressInterval, t: tr, now: o.Now}
		prog.start()
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, n := range nodes {
		select {
		case sem <- struct{}{}:
		case <-day0.Done():
		}
		if day0.Err() != nil {
			for _, m := range nodes[i:] {
				m.finish(OutcomeStuck, fmt.Errorf("not started: %w", day0.Err()))
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, interval, ok := runNode(day0, o, n, pool[i%len(pool)])
			switch {
			case hold == nil:
			case ok:
				hold.add(i, i%len(pool), res, interval)
			case n.ended() == OutcomeFailed:
				hold.awaitReprovision(n, i%len(pool), res)
			}
		}()
	}
	wg.Wait()
	if prog != nil {
		prog.close()
	}
	rep := buildReport(nodes, o.Now().Sub(start))
	if hold != nil {
		rep.Hold = hold.hold(ctx)
	}
	return rep, nil
}

// runNode takes one node from power-on to RUNNING. It returns what the
// node needs in node mode and the heartbeat interval its report-in
// answered, and whether it got there.
func runNode(ctx context.Context, o Options, n *node, hc *http.Client) (agent.Result, time.Duration, bool) {
	var res agent.Result
	for {
		pctx, cancel := context.WithCancelCause(ctx)
		ex := &Executor{
			Delay:    jitter(n.rnd, o.ActionTime),
			Fail:     n.fail,
			Reboot:   n.reboot && !n.rebooted.Load(),
			OnReboot: func() { n.rebooted.Store(true); cancel(errRebooted) },
		}
		p := &agent.Provisioner{
			Client: hc, URL: o.URL, EnrollToken: o.EnrollToken,
			Identity: agent.Identity{UUID: n.id.UUID, Serial: n.id.Serial, Hostname: n.id.Hostname,
				Interfaces: []agent.Interface{{Name: "eth0", MAC: n.id.MAC, Addrs: []string{n.id.Addr}}}},
			Exec: ex, Logger: o.Logger.With("node", n.id.Hostname), Backoff: o.Backoff,
			OnPhase: n.enter, StopOnFailed: true, Now: o.Now,
			Installed: o.Installed, Labels: o.Labels, MaxPendingWait: o.LobbyPoll,
			Hardware: &onboardingv1.HardwareSummary{CpuModel: "EIM simulated CPU", CpuCores: 4, MemoryBytes: 8 << 30, Architecture: "amd64", ProductName: "EIM simulated node"},
		}
		if o.OnLobby != nil {
			p.OnLobby = func(denied bool, msg string) { o.OnLobby(n.idx, denied, msg) }
		}
		var (
			r   agent.Result
			err error
		)
		if o.Installed {
			r, err = p.Enroll(pctx)
		} else {
			r, err = p.Run(pctx)
		}
		cause := context.Cause(pctx)
		cancel(nil)
		switch {
		case ctx.Err() != nil:
			n.finish(OutcomeStuck, fmt.Errorf("in phase %s: %w", n.phase(), ctx.Err()))
			return res, 0, false
		case errors.Is(cause, errRebooted):
			n.enter("restart")
			continue
		case errors.As(err, new(*agent.WorkflowFailedError)):
			n.finish(OutcomeFailed, err)
			return r, 0, false // its credentials, to ask again in the hold
		case err != nil:
			n.finish(OutcomeStuck, fmt.Errorf("in phase %s: %w", n.phase(), err))
			return res, 0, false
		}
		res = r
		break
	}
	n.enter("node")
	interval, err := reportIn(ctx, hc, o.URL, res, n.id.Hostname, o.Backoff, o.Logger.With("node", n.id.Hostname))
	if err != nil {
		n.finish(OutcomeStuck, fmt.Errorf("in node mode: %w", err))
		return res, 0, false
	}
	n.finish(OutcomeRunning, nil)
	return res, interval, true
}

// jitter returns d ± 50 %.
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(r.Int64N(int64(d)+1))
}

// nodesPerConn bounds the Day-0 nodes sharing a connection, below the
// server's limit of concurrent streams per HTTP/2 connection (Go's
// default, 250): a request beyond it makes net/http dial another
// connection.
const nodesPerConn = 200

// warmPool makes each client of the pool open its HTTP/2 connection before
// the nodes start. Without it net/http dials a connection for every request
// that finds none ready: thousands of nodes starting at once made thousands
// of TLS handshakes, nearly all thrown away once the first connection was
// up, which cost the server more CPU than the nodes' first calls.
func warmPool(ctx context.Context, pool []*http.Client, url string) error {
	// Any path does: the answer (a 404) is not the point.
	target := strings.TrimSuffix(url, "/") + "/.well-known/eim-simulator"
	g, gctx := errgroup.WithContext(ctx)
	for _, hc := range pool {
		g.Go(func() error {
			req, err := http.NewRequestWithContext(gctx, http.MethodGet, target, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return fmt.Errorf("connect to %s: %w", url, err)
			}
			io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		})
	}
	return g.Wait()
}
