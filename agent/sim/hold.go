package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// Monitor reads the hosts' status through the REST API, to tell whether the
// server flags the right hosts "No Connection", and only those.
type Monitor interface {
	// NoConnection counts the hosts that show "No Connection".
	NoConnection(ctx context.Context) (int, error)
	// NoConnectionIDs returns their resource IDs.
	NoConnectionIDs(ctx context.Context) ([]string, error)
}

// Hold phases, in order. Heartbeats are counted in the phase in which they
// were sent.
const (
	PhaseDay0    = "day0"    // the fleet is still being onboarded
	PhaseSettle  = "settle"  // Options.Settle after: the last nodes' first heartbeats, a backlog draining
	PhaseSteady  = "steady"  // every node heartbeating
	PhaseStopped = "stopped" // after a share of the nodes stopped
)

// Defaults of the hold. Workers are many because a fleet's nodes do not
// wait for each other: with a few, a slow server makes the simulator send
// late (Lag) instead of making the server queue (Latency).
const (
	DefaultWorkers    = 8192
	DefaultCheckEvery = 5 * time.Second
	// detectionMargin is what the issue allows past the timeout for a
	// stopped node to show "No Connection".
	detectionMargin = 10 * time.Second
	// defaultInterval applies until the server has said one.
	defaultInterval = 30 * time.Second
	// HoldUntilCancelled as Options.Hold holds until the run's context
	// ends (eim-agent simulate's default: until interrupted).
	HoldUntilCancelled = time.Duration(math.MaxInt64)
	// finalCheckTimeout bounds the last count of the hosts "No
	// Connection", made after the hold even when it ended by interruption.
	finalCheckTimeout = 30 * time.Second
)

// The simulated installed OS, as its heartbeats say.
const (
	simVersion = "sim"
	simBootID  = "sim-installed"
)

// beater is one simulated node in node mode: what it needs to heartbeat.
// Between Add and the worker that takes it from the schedule it belongs to
// the schedule, then to that worker alone; only stopped, the token (mu:
// the node's cluster steps use it too) and the cluster side are shared.
type beater struct {
	mu       sync.Mutex // guards token and refresh
	idx      int
	conn     int // index of the node's HTTP client
	hostID   string
	clientID string
	secret   string
	tokenURL string
	token    string
	refresh  time.Duration // when to fetch a new token (holder clock)
	interval time.Duration
	fails    int
	result   *hostv1.ActionResult // of a refused host action, until the server has it

	cl       atomic.Pointer[simCluster]   // nil until it heard a cluster version
	wl       atomic.Pointer[simWorkloads] // nil until it heard a workloads version
	hwDigest atomic.Pointer[string]       // of the inventory the server accepted; nil none sent
	stopped  atomic.Bool
	revoked  atomic.Bool
	lastSent atomic.Int64 // holder clock of its last answered heartbeat's send
}

// beatPhase collects one phase's heartbeats and status checks.
type beatPhase struct {
	name     string
	from, to time.Duration // holder clock; to 0 while current
	lat, lag histogram
	errors   atomic.Int64

	// Guarded by holder.mu.
	checks, checkErrs, maxNC int
	live                     int // nodes heartbeating when the phase ended
}

// holder keeps the nodes that finished Day 0 heartbeating, as agent.Node
// does (token from the client credentials, Heartbeat every interval the
// server answers, refreshed tokens, back-off on errors), with a schedule
// and a bounded pool of workers instead of a goroutine per node.
type holder struct {
	o     Options
	pool  []*http.Client
	hosts []hostv1connect.HostServiceClient
	epoch time.Time
	sched *schedule[*beater]
	// The cluster nodes' steps (cluster.go), served by the same workers.
	csched     *schedule[*beater]
	clusters   []clusterv1connect.ClusterServiceClient
	cstats     *clusterStats
	clusterOff atomic.Bool
	// The simulated workloads' steps (workloads.go), served by the same
	// workers.
	wsched    *schedule[*beater]
	workloads []workloadsv1connect.WorkloadServiceClient
	wstats    *workloadStats

	phase     atomic.Pointer[beatPhase]
	window    atomic.Pointer[histogram] // latency since the last progress line
	tokens    histogram
	tokenErrs atomic.Int64
	deferred  atomic.Int64 // token requests the server deferred (Retry-After)
	revoked   atomic.Int64
	beats     atomic.Int64 // answered
	live      atomic.Int64 // nodes heartbeating
	interval  atomic.Int64 // the last interval the server answered
	stopping  atomic.Bool
	detected  atomic.Bool   // every stopped node was seen flagged
	recovered atomic.Int64  // failed nodes RUNNING after a reprovision
	held      time.Duration // how long the hold lasted, once over

	mu      sync.Mutex
	rnd     *rand.Rand
	beaters []*beater
	phases  []*beatPhase
	errs    map[string]int
	det     *Detection
	stopAt  time.Duration

	// answered is closed at the first heartbeat answered or node found
	// revoked (a run of provisioned nodes learns the interval from it).
	answered     chan struct{}
	answeredOnce sync.Once

	ctx    context.Context // the holder's: ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newHolder(o Options, pool []*http.Client) *holder {
	if o.ClusterInstall == (Range{}) {
		o.ClusterInstall = DefaultClusterInstall
	}
	if o.ClusterUpgrade == (Range{}) {
		o.ClusterUpgrade = DefaultClusterUpgrade
	}
	if o.ClusterRemoval == (Range{}) {
		o.ClusterRemoval = DefaultClusterRemoval
	}
	h := &holder{o: o, pool: pool, epoch: o.Now(), sched: newSchedule[*beater](), csched: newSchedule[*beater](), cstats: newClusterStats(),
		wsched: newSchedule[*beater](), wstats: new(workloadStats),
		rnd: rand.New(rand.NewPCG(o.Seed, 0x4ea27)), errs: make(map[string]int), answered: make(chan struct{})}
	for _, hc := range pool {
		h.hosts = append(h.hosts, hostv1connect.NewHostServiceClient(hc, strings.TrimSuffix(o.URL, "/")))
		h.clusters = append(h.clusters, clusterv1connect.NewClusterServiceClient(hc, strings.TrimSuffix(o.URL, "/")))
		h.workloads = append(h.workloads, workloadsv1connect.NewWorkloadServiceClient(hc, strings.TrimSuffix(o.URL, "/")))
	}
	h.interval.Store(int64(defaultInterval))
	h.window.Store(new(histogram))
	h.setPhase(PhaseDay0)
	return h
}

// clock is the time since the holder started.
func (h *holder) clock() time.Duration { return h.o.Now().Sub(h.epoch) }

// start runs the schedule, the workers and the monitor until close.
func (h *holder) start(ctx context.Context) {
	ctx, h.cancel = context.WithCancel(ctx)
	h.ctx = ctx
	jobs := make(chan entry[*beater])
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.sched.run(ctx, h.clock, jobs)
	}()
	cjobs := make(chan entry[*beater])
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.csched.run(ctx, h.clock, cjobs)
	}()
	wjobs := make(chan entry[*beater])
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.wsched.run(ctx, h.clock, wjobs)
	}()
	workers := h.o.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	for range workers {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				select {
				case e := <-jobs:
					h.beat(ctx, e.v, e.at)
				case e := <-cjobs:
					if !e.v.stopped.Load() {
						h.clusterStep(ctx, e.v)
					}
				case e := <-wjobs:
					if !e.v.stopped.Load() {
						h.workloadStep(ctx, e.v, e.at)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	if h.o.Monitor != nil {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.monitor(ctx)
		}()
	}
}

// close stops the heartbeats and waits for the workers.
func (h *holder) close() {
	h.cancel()
	h.wg.Wait()
}

// add starts a node's heartbeats after its report-in, which answered
// interval: the first one at a random point of the first interval, so
// that nodes onboarded together spread evenly over it.
func (h *holder) add(idx int, conn int, res agent.Result, interval time.Duration) {
	b := h.enlist(idx, conn, res, interval)
	h.mu.Lock()
	first := time.Duration(h.rnd.Int64N(int64(b.interval)))
	h.mu.Unlock()
	h.sched.Add(b, h.clock()+first)
}

// awaitReprovision takes a node whose workflow failed on Day 0 (res: its
// credentials) through what a real one does next: it asks for its
// workflow until a user reprovisions the instance, runs the new attempt
// (its injected fault no longer applies), reports in and heartbeats.
func (h *holder) awaitReprovision(n *node, conn int, res agent.Result) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		o, hc := h.o, h.pool[conn]
		logger := o.Logger.With("node", n.id.Hostname)
		p := &agent.Provisioner{
			Client: hc, URL: o.URL, EnrollToken: o.EnrollToken,
			Identity: agent.Identity{UUID: n.id.UUID, Serial: n.id.Serial, Hostname: n.id.Hostname,
				Interfaces: []agent.Interface{{Name: "eth0", MAC: n.id.MAC, Addrs: []string{n.id.Addr}}}},
			Exec: &Executor{Delay: jitter(n.rnd, o.ActionTime)}, Logger: logger, Backoff: o.Backoff, Now: o.Now,
		}
		r, err := p.Resume(h.ctx, res)
		if err != nil {
			return // the hold ended
		}
		interval, err := reportIn(h.ctx, hc, o.URL, r, n.id.Hostname, o.Backoff, logger)
		if err != nil {
			return
		}
		h.recovered.Add(1)
		h.add(n.idx, conn, r, interval)
	}()
}

// enlist returns the beater of a node in node mode, counted as
// heartbeating but not yet scheduled; interval 0 is the last one the
// server answered.
func (h *holder) enlist(idx int, conn int, res agent.Result, interval time.Duration) *beater {
	if interval <= 0 {
		interval = time.Duration(h.interval.Load())
	} else {
		h.interval.Store(int64(interval))
	}
	tokenURL := res.TokenURL
	if tokenURL == "" {
		tokenURL = strings.TrimSuffix(h.o.URL, "/") + "/oauth2/token"
	}
	b := &beater{idx: idx, conn: conn, hostID: res.HostID, clientID: res.ClientID, secret: res.ClientSecret,
		tokenURL: tokenURL, interval: interval}
	h.mu.Lock()
	h.beaters = append(h.beaters, b)
	h.mu.Unlock()
	h.live.Add(1)
	return b
}

// beat sends one heartbeat of b, due at due, and schedules the next.
func (h *holder) beat(ctx context.Context, b *beater, due time.Duration) {
	if b.stopped.Load() {
		return // dropped from the schedule
	}
	ph := h.phase.Load()
	now := h.clock()
	ph.lag.Record(now - due)
	tok, err := h.tokenOf(ctx, b, now)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRevoked) {
			b.revoked.Store(true)
			h.revoked.Add(1)
			h.live.Add(-1)
			h.noteErr(err)
			h.answeredOnce.Do(func() { close(h.answered) })
			return
		}
		if hint := agent.RetryHint(err); hint > 0 {
			// Deferred by the server, as agent.Node would be: not an
			// error, and no heartbeat sent meanwhile.
			h.deferred.Add(1)
			if !b.stopped.Load() {
				h.sched.Add(b, h.clock()+agent.HintedWait(hint))
			}
			return
		}
		ph.errors.Add(1)
		h.noteErr(err)
		h.retry(b, h.clock())
		return
	}
	req := connect.NewRequest(&hostv1.HeartbeatRequest{AgentVersion: simVersion, BootId: simBootID, ActionResult: b.result})
	if d := b.hwDigest.Load(); d != nil {
		req.Msg.HardwareDigest = *d
	}
	req.Header().Set("Authorization", "Bearer "+tok)
	cctx, cancel := context.WithTimeout(ctx, max(b.interval, 10*time.Second))
	sent := h.clock()
	resp, err := h.hosts[b.conn].Heartbeat(cctx, req)
	lat := h.clock() - sent
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return // the hold ended: not the server's error
		}
		ph.errors.Add(1)
		h.noteErr(fmt.Errorf("heartbeat: %w", err))
		if connect.CodeOf(err) == connect.CodeUnauthenticated {
			b.mu.Lock()
			b.token = "" // maybe expired early or revoked: the next try says
			b.mu.Unlock()
		}
		h.retry(b, h.clock())
		return
	}
	ph.lat.Record(lat)
	h.window.Load().Record(lat)
	h.beats.Add(1)
	b.fails = 0
	b.lastSent.Store(int64(sent))
	m := resp.Msg
	if s := m.GetIntervalSeconds(); s > 0 {
		b.interval = time.Duration(s) * time.Second
		h.interval.Store(int64(b.interval))
	}
	h.answeredOnce.Do(func() { close(h.answered) })
	h.clusterHeard(b, m.GetClusterVersion())
	h.workloadsHeard(b, m.GetWorkloadsVersion(), m.GetWorkloadsStatusWanted())
	// Keep to the grid of due times, so that latency does not make a
	// node's heartbeats drift; when late, send at once, never in a burst.
	next := max(due+b.interval, h.clock())
	if b.action(m.GetAction()) {
		next = h.clock()
	}
	if !b.stopped.Load() {
		h.sched.Add(b, next)
	}
}

// action handles the host action of an answer as agent.Node without
// Actions does: it refuses it (FAILED) in the next heartbeat, sent at once,
// and sends that result until the answers no longer carry the action. It
// reports whether the next heartbeat goes at once.
func (b *beater) action(a *hostv1.HostAction) bool {
	if b.result != nil && (a == nil || a.Id != b.result.Id) {
		b.result = nil // recorded
	}
	if a == nil || a.Id == "" || b.result != nil {
		return false
	}
	b.result = &hostv1.ActionResult{Id: a.Id, State: hostv1.ActionResult_STATE_FAILED, Detail: "a simulated node does not carry out host actions"}
	return true
}

// tokenOf returns b's token, fetching one when it has none or it is at 80 %
// of its lifetime, as agent.Node does.
func (h *holder) tokenOf(ctx context.Context, b *beater, now time.Duration) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token != "" && now < b.refresh {
		return b.token, nil
	}
	start := h.clock()
	tok, ttl, err := fetchToken(ctx, h.pool[b.conn], b.tokenURL, b.clientID, b.secret)
	if err != nil {
		if agent.RetryHint(err) == 0 {
			h.tokenErrs.Add(1)
		}
		return "", err
	}
	end := h.clock()
	h.tokens.Record(end - start)
	b.token, b.refresh = tok, end+ttl*4/5
	return tok, nil
}

// retry schedules b again after a failure, backing off as the agent does
// from a transient error: a quarter of the minimum, doubling, up to the
// maximum, plus up to 50 % jitter.
func (h *holder) retry(b *beater, now time.Duration) {
	if b.stopped.Load() {
		return
	}
	bo := h.o.Backoff
	if bo.Min <= 0 {
		bo.Min = agent.DefaultBackoff.Min
	}
	if bo.Max < bo.Min {
		bo.Max = max(bo.Min, agent.DefaultBackoff.Max)
	}
	d := max(bo.Min/4, time.Millisecond)
	for i := 0; i < b.fails && d < bo.Max; i++ {
		d *= 2
	}
	d = min(d, bo.Max)
	b.fails++
	h.sched.Add(b, now+d+rand.N(d/2+1))
}

func (h *holder) noteErr(err error) {
	msg := err.Error()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.errs[msg]; ok || len(h.errs) < maxErrors {
		h.errs[msg]++
	}
}

// setPhase ends the current phase and starts the next one.
func (h *holder) setPhase(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock()
	if cur := h.phase.Load(); cur != nil {
		cur.to = now
		cur.live = int(h.live.Load())
	}
	p := &beatPhase{name: name, from: now}
	h.phases = append(h.phases, p)
	h.phase.Store(p)
}

// stop makes share of the heartbeating nodes (chosen with the seed) stop.
func (h *holder) stop(share float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var alive []*beater
	for _, b := range h.beaters {
		if !b.stopped.Load() && !b.revoked.Load() {
			alive = append(alive, b)
		}
	}
	slices.SortFunc(alive, func(a, b *beater) int { return a.idx - b.idx })
	k := int(math.Round(share * float64(len(alive))))
	r := rand.New(rand.NewPCG(h.o.Seed, 0x5709))
	r.Shuffle(len(alive), func(i, j int) { alive[i], alive[j] = alive[j], alive[i] })
	h.stopAt = h.clock()
	for _, b := range alive[:k] {
		b.stopped.Store(true)
	}
	h.live.Add(-int64(k))
	h.det = &Detection{Stopped: k, FirstFlaggedSeconds: -1, AllFlaggedSeconds: -1}
	h.stopping.Store(true)
}

// monitor counts the hosts showing "No Connection" every CheckEvery, and
// every second from the stop until all stopped nodes are seen flagged (a
// count over the whole fleet is not free for the server).
func (h *holder) monitor(ctx context.Context) {
	every := h.o.CheckEvery
	if every <= 0 {
		every = DefaultCheckEvery
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := h.clock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fast := h.stopping.Load() && !h.detected.Load()
		if !fast && h.clock()-last < every {
			continue
		}
		last = h.clock()
		n, err := h.o.Monitor.NoConnection(ctx)
		if ctx.Err() != nil {
			return
		}
		h.sample(n, err, h.clock())
	}
}

// sample records one count of "No Connection" hosts, answered at at.
func (h *holder) sample(n int, err error, at time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ph := h.phase.Load()
	ph.checks++
	if err != nil {
		ph.checkErrs++
		if _, ok := h.errs["check: "+err.Error()]; ok || len(h.errs) < maxErrors {
			h.errs["check: "+err.Error()]++
		}
		return
	}
	ph.maxNC = max(ph.maxNC, n)
	if d := h.det; d != nil {
		since := round3((at - h.stopAt).Seconds())
		if n > 0 && d.FirstFlaggedSeconds < 0 {
			d.FirstFlaggedSeconds = since
		}
		if n >= d.Stopped && d.AllFlaggedSeconds < 0 {
			d.AllFlaggedSeconds = since
			h.detected.Store(true)
		}
		d.MaxFlagged = max(d.MaxFlagged, n)
	}
}

// hold runs the hold after Day 0: the settle interval, steady heartbeats,
// the stop of a share of the nodes, until the hold's end; then it stops
// every heartbeat and, with a Monitor, compares the hosts flagged with the
// nodes stopped.
func (h *holder) hold(ctx context.Context) *HoldReport {
	start := h.clock()
	interval := time.Duration(h.interval.Load())
	h.setPhase(PhaseSettle)
	end := HoldUntilCancelled
	if h.o.Hold < HoldUntilCancelled-start {
		end = start + h.o.Hold
	}
	stopAt := time.Duration(-1)
	if h.o.StopShare > 0 && h.o.StopAfter < h.o.Hold {
		stopAt = start + h.o.StopAfter
	}
	settle := h.o.Settle
	if settle <= 0 {
		settle = interval
	}
	steadyAt := start + settle
	if stopAt >= 0 {
		steadyAt = min(steadyAt, stopAt)
	}
	prog := h.startProgress()
	if h.waitUntil(ctx, min(steadyAt, end)) && steadyAt < end {
		h.setPhase(PhaseSteady)
		if stopAt >= 0 && h.waitUntil(ctx, stopAt) {
			h.setPhase(PhaseStopped)
			h.stop(h.o.StopShare)
		}
		h.waitUntil(ctx, end)
	}
	h.setPhase("end")
	h.held = h.clock() - start
	h.close()
	prog()
	// The last check is made when interrupted too.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCheckTimeout)
	defer cancel()
	return h.report(rctx)
}

// waitUntil waits until the holder clock reads at; false if ctx ended.
func (h *holder) waitUntil(ctx context.Context, at time.Duration) bool {
	d := at - h.clock()
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// startProgress prints a line every ten progress intervals while holding,
// with the heartbeats answered since the last one; the returned func stops
// it.
func (h *holder) startProgress() func() {
	if h.o.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * h.o.ProgressInterval)
		defer t.Stop()
		lastN, lastAt := h.beats.Load(), h.clock()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			n, at := h.beats.Load(), h.clock()
			win := h.window.Swap(new(histogram)).summary(0)
			ph := h.phase.Load()
			h.mu.Lock()
			nc := ph.maxNC
			h.mu.Unlock()
			fmt.Fprintf(h.o.Progress, "[hold %5.0fs] %s: %d nodes heartbeating, %.0f heartbeats/s, p50 %.1f ms, p99 %.1f ms, max %.0f ms; phase: %d errors, No Connection ≤ %d\n",
				(at - h.phases[1].from).Seconds(), ph.name, h.live.Load(), float64(n-lastN)/(at-lastAt).Seconds(),
				win.P50, win.P99, win.Max, ph.errors.Load(), nc)
			lastN, lastAt = n, at
		}
	}()
	return func() { close(stop); <-done }
}

// HoldReport is what the hold measured.
type HoldReport struct {
	// Nodes that heartbeat (every node that reached RUNNING).
	Nodes           int     `json:"nodes"`
	IntervalSeconds float64 `json:"intervalSeconds"`
	HoldSeconds     float64 `json:"holdSeconds"`
	Workers         int     `json:"workers"`
	// Phases in order: day0 (none for nodes provisioned before the run),
	// settle, steady, stopped.
	Phases []BeatPhase `json:"phases"`
	// Tokens are the token requests (the first of each node, and its
	// refreshes at 80 % of a token's lifetime); Deferred those the
	// server answered "retry after" (not among the errors), each asked
	// again after the time it said.
	Tokens   Latency `json:"tokens"`
	Deferred int64   `json:"tokensDeferred"`
	// Revoked counts nodes whose credentials the server refused.
	Revoked int64 `json:"revoked"`
	// Recovered counts the nodes whose workflow failed on Day 0 that ran
	// it again after a reprovision and reached RUNNING during the hold
	// (they are among Nodes).
	Recovered int64 `json:"recovered"`
	// Monitored tells whether "No Connection" was checked through the API.
	Monitored bool `json:"monitored"`
	// FalseNoConnection is the most hosts seen "No Connection" that
	// should not have been: any before the stop, more than were stopped
	// after it, or flagged hosts not stopped at the end.
	FalseNoConnection int            `json:"falseNoConnection"`
	Detection         *Detection     `json:"detection,omitempty"`
	Errors            map[string]int `json:"errors,omitempty"`
	// Clusters is what the simulated cluster nodes did, when the server
	// gave any a cluster version.
	Clusters *ClusterReport `json:"clusters,omitempty"`
	// Workloads is what the simulated pods did, when the server gave any
	// node a workloads version.
	Workloads *WorkloadReport `json:"workloads,omitempty"`
}

// BeatPhase is one phase of the hold.
type BeatPhase struct {
	Name string `json:"name"`
	// From and To are Unix times (seconds), to match with the server's
	// resource use.
	From    float64 `json:"from"`
	To      float64 `json:"to"`
	Seconds float64 `json:"seconds"`
	// Nodes heartbeating when the phase ended.
	Nodes int `json:"nodes"`
	// Rate is answered heartbeats per second.
	Rate float64 `json:"rate"`
	// Latency of heartbeats sent in the phase: request sent → answer.
	Latency Latency `json:"latency"`
	// Lag is how late heartbeats were sent after they were due (a busy
	// worker pool or simulator).
	Lag Latency `json:"lag"`
	// Checks of the "No Connection" count, failed checks, the most seen.
	Checks          int `json:"checks"`
	CheckErrors     int `json:"checkErrors"`
	MaxNoConnection int `json:"maxNoConnection"`
}

// Detection is how the server flagged the stopped nodes.
type Detection struct {
	Stopped int `json:"stopped"`
	// AtSeconds is when they stopped, seconds into the hold.
	AtSeconds float64 `json:"atSeconds"`
	// LastBeatSeconds is when the last heartbeat of a stopped node was
	// sent, relative to the stop (≤ 0, but for one in flight).
	LastBeatSeconds float64 `json:"lastBeatSeconds"`
	// TimeoutSeconds is the server's timeout as assumed (three intervals
	// unless told), BarSeconds that plus 10 s.
	TimeoutSeconds float64 `json:"timeoutSeconds"`
	BarSeconds     float64 `json:"barSeconds"`
	// FirstFlaggedSeconds and AllFlaggedSeconds are when the first, and
	// all, stopped nodes' hosts were seen "No Connection", after the stop
	// (checked every second; -1: never).
	FirstFlaggedSeconds float64 `json:"firstFlaggedSeconds"`
	AllFlaggedSeconds   float64 `json:"allFlaggedSeconds"`
	MaxFlagged          int     `json:"maxFlagged"`
	// At the end, by host ID: hosts flagged, those of nodes not stopped,
	// and stopped nodes not flagged (-1: not checked).
	Flagged        int  `json:"flagged"`
	FalsePositives int  `json:"falsePositives"`
	Missed         int  `json:"missed"`
	Met            bool `json:"met"`
}

// report builds the HoldReport after close.
func (h *holder) report(ctx context.Context) *HoldReport {
	var ids []string
	var idsErr error
	if h.o.Monitor != nil && h.det != nil {
		ids, idsErr = h.o.Monitor.NoConnectionIDs(ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	interval := time.Duration(h.interval.Load())
	r := &HoldReport{
		Nodes: len(h.beaters), IntervalSeconds: interval.Seconds(), HoldSeconds: round3(min(h.o.Hold, h.held).Seconds()),
		Workers: h.o.Workers, Tokens: h.tokens.summary(h.tokenErrs.Load()), Deferred: h.deferred.Load(), Revoked: h.revoked.Load(), Recovered: h.recovered.Load(),
		Monitored: h.o.Monitor != nil,
	}
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
	unix := func(d time.Duration) float64 { return round3(float64(h.epoch.Add(d).UnixNano()) / 1e9) }
	for _, p := range h.phases {
		if p.name == "end" {
			continue
		}
		if p.name != PhaseStopped {
			r.FalseNoConnection = max(r.FalseNoConnection, p.maxNC)
		}
		if p.name == PhaseDay0 && len(h.o.Nodes) > 0 {
			continue // no Day 0: the first node's first heartbeat only
		}
		secs := (p.to - p.from).Seconds()
		bp := BeatPhase{Name: p.name, From: unix(p.from), To: unix(p.to), Seconds: round3(secs), Nodes: p.live,
			Latency: p.lat.summary(p.errors.Load()), Lag: p.lag.summary(0),
			Checks: p.checks, CheckErrors: p.checkErrs, MaxNoConnection: p.maxNC}
		if secs > 0 {
			bp.Rate = math.Round(float64(p.lat.Count())/secs*10) / 10
		}
		r.Phases = append(r.Phases, bp)
	}
	if d := h.det; d != nil {
		timeout := h.o.FlagTimeout
		if timeout <= 0 {
			timeout = 3 * interval
		}
		d.AtSeconds = round3((h.stopAt - h.phases[1].from).Seconds())
		d.TimeoutSeconds = timeout.Seconds()
		d.BarSeconds = (timeout + detectionMargin).Seconds()
		last := time.Duration(math.MinInt64)
		stopped := make(map[string]bool)
		for _, b := range h.beaters {
			if b.stopped.Load() {
				stopped[b.hostID] = true
				last = max(last, time.Duration(b.lastSent.Load()))
			}
		}
		if d.Stopped > 0 {
			d.LastBeatSeconds = round3((last - h.stopAt).Seconds())
		}
		d.Flagged, d.FalsePositives, d.Missed = -1, -1, -1
		if h.o.Monitor != nil {
			if idsErr != nil {
				h.errs["final check: "+idsErr.Error()]++
			} else {
				d.Flagged, d.FalsePositives, d.Missed = len(ids), 0, len(stopped)
				for _, id := range ids {
					if stopped[id] {
						d.Missed--
					} else {
						d.FalsePositives++
					}
				}
				r.FalseNoConnection = max(r.FalseNoConnection, d.FalsePositives, d.MaxFlagged-d.Stopped)
			}
		}
		d.Met = d.AllFlaggedSeconds >= 0 && d.AllFlaggedSeconds <= d.BarSeconds && d.FalsePositives == 0 && d.Missed == 0
		r.Detection = d
	}
	r.Clusters = h.clusterReport()
	r.Workloads = h.workloadReport()
	if len(h.errs) > 0 {
		r.Errors = make(map[string]int, len(h.errs))
		for k, v := range h.errs {
			r.Errors[k] = v
		}
	}
	return r
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
