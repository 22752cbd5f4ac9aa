package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// Simulated cluster nodes: a node of the hold that hears a
// cluster_version in a heartbeat's answer it has not applied fetches its
// plan and goes through the states agent.Node reports, with the time a
// real installation takes, without touching the host: REGISTERING →
// INSTALL_IN_PROGRESS → ACTIVE (or ERROR for the nodes given a fault), an
// upgrade when the plan's Kubernetes version changes, DEREGISTERING →
// UNINSTALL_IN_PROGRESS → INACTIVE when the plan goes. The steps are items
// of a schedule served by the hold's workers, as heartbeats are: a
// thousand installing nodes cost a heap entry each, not a goroutine.

// Range is a duration picked uniformly between Min and Max.
type Range struct{ Min, Max time.Duration }

func (r Range) pick(rnd func() float64) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rnd()*float64(r.Max-r.Min))
}

// String is "5s-20s", or "5s" when fixed.
func (r Range) String() string {
	if r.Max <= r.Min {
		return r.Min.String()
	}
	return r.Min.String() + "-" + r.Max.String()
}

// ParseRange reads "5s-20s" or "10s".
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(s, "-")
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: %w", s, err)
	}
	if !ok {
		return Range{a, a}, nil
	}
	b, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: %w", s, err)
	}
	if a < 0 || b < a {
		return Range{}, fmt.Errorf("range %q: want 0 ≤ min ≤ max", s)
	}
	return Range{a, b}, nil
}

// Defaults of the simulated cluster nodes: k3s from a local artifact
// store starts in about that long on an edge machine.
var (
	DefaultClusterInstall = Range{5 * time.Second, 20 * time.Second}
	DefaultClusterUpgrade = Range{5 * time.Second, 15 * time.Second}
	DefaultClusterRemoval = Range{2 * time.Second, 8 * time.Second}
	// DefaultClusterRetry is how long a failed plan waits before it is
	// tried again, as agent.DefaultClusterRetry's first wait.
	DefaultClusterRetry = time.Minute
)

// clusterState is the state names of the reports, as the report counts
// them.
func stateName(s clusterv1.ReportStatusRequest_State) string {
	return strings.TrimPrefix(s.String(), "STATE_")
}

// simCluster is a simulated node's cluster side. Its fields are guarded
// by mu: the heartbeat worker sets wanted, the cluster worker the rest.
type simCluster struct {
	mu        sync.Mutex
	fault     bool   // its installations fail
	wanted    string // the version the last heartbeat named
	applied   string
	busy      bool // a job is scheduled or running
	installed bool
	kube      string
	failed    string
	retryAt   time.Duration // holder clock
	last      string        // the last state reported

	// The job in progress: its version, the steps left, when it began
	// and what it is (install, upgrade, removal), RPC failures in a row.
	version string
	steps   []simStep
	began   time.Duration
	kind    string
	fails   int
}

// simStep is one report, and how long the work after it takes.
type simStep struct {
	state   clusterv1.ReportStatusRequest_State
	plan    string
	msg     string
	kube    string
	after   time.Duration
	newKube string // set on the last step of a plan: the version then running
}

// clusterStats is what the hold counts of the cluster nodes.
type clusterStats struct {
	nodes   atomic.Int64 // that heard a cluster_version
	rpc     histogram
	rpcErrs atomic.Int64
	jobs    map[string]*histogram // "install", "upgrade", "removal", "failed": job durations
	mu      sync.Mutex
	reports map[string]int
}

func newClusterStats() *clusterStats {
	return &clusterStats{jobs: map[string]*histogram{"install": {}, "upgrade": {}, "reconfigure": {}, "removal": {}, "failed": {}},
		reports: map[string]int{}}
}

// clusterOf returns b's cluster side, made at the first version heard.
func (h *holder) clusterOf(b *beater) *simCluster {
	if c := b.cl.Load(); c != nil {
		return c
	}
	h.mu.Lock()
	fault := h.rnd.Float64() < h.o.ClusterFailShare
	h.mu.Unlock()
	c := &simCluster{fault: fault}
	if b.cl.CompareAndSwap(nil, c) {
		h.cstats.nodes.Add(1)
		return c
	}
	return b.cl.Load()
}

// clusterHeard is the heartbeat's part: it notes the version an answer
// named and schedules the node's cluster job when it has not applied it.
func (h *holder) clusterHeard(b *beater, version string) {
	if version == "" || h.clusterOff.Load() {
		return
	}
	c := h.clusterOf(b)
	now := h.clock()
	c.mu.Lock()
	c.wanted = version
	start := c.due(now)
	if start {
		c.busy = true
	}
	c.mu.Unlock()
	if start {
		h.csched.Add(b, now)
	}
}

// due tells whether a job should start; c.mu is held.
func (c *simCluster) due(now time.Duration) bool {
	return !c.busy && c.wanted != "" && c.wanted != c.applied && (c.failed != c.wanted || now >= c.retryAt)
}

// clusterStep runs b's next cluster step: fetch the plan, or send the next
// report and schedule the one after.
func (h *holder) clusterStep(ctx context.Context, b *beater) {
	c := b.cl.Load()
	c.mu.Lock()
	fetch := len(c.steps) == 0
	applied := c.applied
	c.mu.Unlock()
	if fetch && b.hwDigest.Load() == nil {
		// The server joins nodes to a control-plane node at the address
		// in its host's inventory, which agent.Node sends when a
		// heartbeat's answer asks: a cluster node sends one first.
		if err := h.reportHardware(ctx, b); err != nil {
			if ctx.Err() == nil {
				h.clusterRetry(b, c)
			}
			return
		}
	}
	if fetch {
		resp, err := h.getPlan(ctx, b, applied)
		if ctx.Err() != nil {
			return
		}
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			h.clusterOff.Store(true)
			h.noteErr(errors.New("cluster: the server has no cluster service"))
			return
		}
		if err == nil && resp.Unchanged {
			c.mu.Lock()
			c.applied = resp.Version // the server says the node has it
			c.busy = false
			c.mu.Unlock()
			return
		}
		if err != nil {
			h.clusterRetry(b, c)
			return
		}
		h.plan(b, c, resp)
	}
	c.mu.Lock()
	s := c.steps[0]
	c.mu.Unlock()
	if err := h.reportStatus(ctx, b, s); err != nil {
		if ctx.Err() == nil {
			h.clusterRetry(b, c)
		}
		return
	}
	h.cstats.mu.Lock()
	h.cstats.reports[stateName(s.state)]++
	h.cstats.mu.Unlock()
	now := h.clock()
	c.mu.Lock()
	c.fails = 0
	c.last = stateName(s.state)
	c.steps = c.steps[1:]
	if len(c.steps) > 0 {
		c.mu.Unlock()
		h.csched.Add(b, now+s.after)
		return
	}
	// The job's last report.
	kind := c.kind
	switch s.state {
	case clusterv1.ReportStatusRequest_STATE_ERROR:
		c.failed, c.retryAt = c.version, now+h.clusterRetryWait()
		kind = "failed"
	case clusterv1.ReportStatusRequest_STATE_INACTIVE:
		c.applied, c.installed, c.kube, c.failed = c.version, false, "", ""
	default:
		c.applied, c.installed, c.kube, c.failed = c.version, true, s.newKube, ""
	}
	h.cstats.jobs[kind].Record(now - c.began)
	c.busy = false
	again := c.due(now)
	if again {
		c.busy = true
	}
	c.mu.Unlock()
	if again {
		h.csched.Add(b, now)
	}
}

func (h *holder) clusterRetryWait() time.Duration {
	if h.o.ClusterRetry > 0 {
		return h.o.ClusterRetry
	}
	return DefaultClusterRetry
}

// clusterRetry schedules the step again after a failed call, backing off
// as the heartbeats do.
func (h *holder) clusterRetry(b *beater, c *simCluster) {
	bo := h.o.Backoff
	if bo.Min <= 0 {
		bo.Min = 2 * time.Second
	}
	if bo.Max < bo.Min {
		bo.Max = max(bo.Min, 32*time.Second)
	}
	c.mu.Lock()
	d := max(bo.Min/4, time.Millisecond)
	for i := 0; i < c.fails && d < bo.Max; i++ {
		d *= 2
	}
	c.fails++
	c.mu.Unlock()
	d = min(d, bo.Max)
	h.csched.Add(b, h.clock()+d+rand.N(d/2+1))
}

// plan turns GetPlan's answer into the job's steps, as agent.Node would
// report them, with simulated durations.
func (h *holder) plan(b *beater, c *simCluster, resp *clusterv1.GetPlanResponse) {
	h.mu.Lock()
	rnd := h.rnd.Float64
	install, upgrade, removal := h.o.ClusterInstall.pick(rnd), h.o.ClusterUpgrade.pick(rnd), h.o.ClusterRemoval.pick(rnd)
	h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	v := resp.Version
	c.version, c.began = v, h.clock()
	const (
		registering  = clusterv1.ReportStatusRequest_STATE_REGISTERING
		installing   = clusterv1.ReportStatusRequest_STATE_INSTALL_IN_PROGRESS
		active       = clusterv1.ReportStatusRequest_STATE_ACTIVE
		failed       = clusterv1.ReportStatusRequest_STATE_ERROR
		deregist     = clusterv1.ReportStatusRequest_STATE_DEREGISTERING
		uninstalling = clusterv1.ReportStatusRequest_STATE_UNINSTALL_IN_PROGRESS
		inactive     = clusterv1.ReportStatusRequest_STATE_INACTIVE
	)
	if p := resp.Plan; p != nil {
		kube := p.KubernetesVersion
		work, msg := install, fmt.Sprintf("Installing %s %s (simulated)", p.Distribution, kube)
		c.kind = "install"
		switch {
		case c.installed && c.kube != kube:
			work, msg, c.kind = upgrade, fmt.Sprintf("Upgrading %s from %s to %s (simulated)", p.Distribution, c.kube, kube), "upgrade"
		case c.installed:
			work, msg, c.kind = install/10, fmt.Sprintf("Applying plan %s (simulated)", v), "reconfigure"
		}
		last := simStep{state: active, plan: v, kube: kube, newKube: kube,
			msg: fmt.Sprintf("k3s %s runs as %s; node %s is Ready (simulated)", kube, strings.ToLower(strings.TrimPrefix(p.Role.String(), "ROLE_")), b.hostID)}
		if c.fault {
			last = simStep{state: failed, plan: v, kube: c.kube,
				msg: fmt.Sprintf("install: node %s not Ready after 10m0s: Ready is \"False\" (simulated failure)", b.hostID)}
		}
		c.steps = []simStep{
			{state: registering, plan: v, kube: c.kube, after: work * 3 / 10,
				msg: fmt.Sprintf("Fetching and verifying %d artifacts for %s %s (simulated)", len(p.Artifacts), p.Distribution, kube)},
			{state: installing, plan: v, kube: c.kube, msg: msg, after: work * 7 / 10},
			last,
		}
		return
	}
	c.kind = "removal"
	if !c.installed {
		c.steps = []simStep{{state: inactive, msg: "Not a member of a cluster"}}
		return
	}
	drain := resp.Removal.GetDrain()
	msg, d := "Leaving the cluster without draining", time.Duration(0)
	if drain {
		msg, d = "Draining the node (simulated)", removal*4/10
	}
	c.steps = []simStep{
		{state: deregist, plan: v, kube: c.kube, msg: msg, after: d},
		{state: uninstalling, plan: v, kube: c.kube, msg: "Uninstalling (simulated)", after: removal - d},
		{state: inactive, msg: "Removed from the cluster"},
	}
}

// reportHardware sends b's simulated inventory: one NIC with an address
// of 10.0.0.0/8 made from the host's ID (the same in every simulator
// process that holds the node).
func (h *holder) reportHardware(ctx context.Context, b *beater) error {
	tok, err := h.lockedToken(ctx, b)
	if err != nil {
		return err
	}
	f := fnv.New32a()
	f.Write([]byte(b.hostID))
	n := int(f.Sum32()&0xffffff) | 1 // never 10.x.y.0
	hw := &hostv1.Hardware{Hostname: strings.ToLower(b.hostID), Nics: []*hostv1.Nic{{
		DeviceName: "eth0", MacAddress: fmt.Sprintf("02:00:0a:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff), LinkUp: true, Mtu: 1500,
		IpAddresses: []*hostv1.IpAddress{{Address: fmt.Sprintf("10.%d.%d.%d/8", n>>16&0xff, n>>8&0xff, n&0xff), ConfigMethod: hostv1.IpAddress_CONFIG_METHOD_DYNAMIC}},
	}}}
	req := connect.NewRequest(&hostv1.ReportHardwareRequest{Hardware: hw})
	req.Header().Set("Authorization", "Bearer "+tok)
	start := h.clock()
	resp, err := h.hosts[b.conn].ReportHardware(ctx, req)
	h.cstats.rpc.Record(h.clock() - start)
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		// A server that takes no inventory: the node goes on without.
		none := ""
		b.hwDigest.Store(&none)
		return nil
	}
	if err != nil {
		h.clusterErr(b, fmt.Errorf("cluster: ReportHardware: %w", err))
		return err
	}
	d := resp.Msg.GetDigest()
	b.hwDigest.Store(&d)
	return nil
}

func (h *holder) getPlan(ctx context.Context, b *beater, have string) (*clusterv1.GetPlanResponse, error) {
	tok, err := h.lockedToken(ctx, b)
	if err != nil {
		return nil, err
	}
	req := connect.NewRequest(&clusterv1.GetPlanRequest{Version: have})
	req.Header().Set("Authorization", "Bearer "+tok)
	start := h.clock()
	resp, err := h.clusters[b.conn].GetPlan(ctx, req)
	h.cstats.rpc.Record(h.clock() - start)
	if err != nil {
		h.clusterErr(b, fmt.Errorf("cluster: GetPlan: %w", err))
		return nil, err
	}
	return resp.Msg, nil
}

func (h *holder) reportStatus(ctx context.Context, b *beater, s simStep) error {
	tok, err := h.lockedToken(ctx, b)
	if err != nil {
		return err
	}
	req := connect.NewRequest(&clusterv1.ReportStatusRequest{State: s.state, PlanVersion: s.plan, Message: s.msg, KubernetesVersion: s.kube})
	req.Header().Set("Authorization", "Bearer "+tok)
	start := h.clock()
	_, err = h.clusters[b.conn].ReportStatus(ctx, req)
	h.cstats.rpc.Record(h.clock() - start)
	if err != nil {
		h.clusterErr(b, fmt.Errorf("cluster: ReportStatus: %w", err))
	}
	return err
}

func (h *holder) clusterErr(b *beater, err error) {
	h.cstats.rpcErrs.Add(1)
	h.noteErr(err)
	if connect.CodeOf(err) == connect.CodeUnauthenticated {
		b.mu.Lock()
		b.token = ""
		b.mu.Unlock()
	}
}

// lockedToken is tokenOf for the cluster worker, which shares the token
// with the node's heartbeats.
func (h *holder) lockedToken(ctx context.Context, b *beater) (string, error) {
	tok, err := h.tokenOf(ctx, b, h.clock())
	if err != nil {
		h.cstats.rpcErrs.Add(1)
		h.noteErr(fmt.Errorf("cluster: %w", err))
	}
	return tok, err
}

// ClusterReport is what the simulated cluster nodes did during the hold.
type ClusterReport struct {
	// Nodes that heard a cluster version.
	Nodes int `json:"nodes"`
	// Final counts the nodes by the last state they reported ("" none
	// yet); Busy those with a job under way at the end.
	Final map[string]int `json:"final"`
	Busy  int            `json:"busy"`
	// Faulty nodes (their installations fail, --cluster-fail-share).
	Faulty int `json:"faulty"`
	// Reports counts the reports delivered by state.
	Reports map[string]int `json:"reports"`
	// Jobs are the durations of the finished jobs by kind (install,
	// upgrade, reconfigure, removal, failed), from GetPlan to the last
	// report.
	Jobs map[string]Latency `json:"jobs"`
	// Calls are GetPlan and ReportStatus.
	Calls Latency `json:"calls"`
	Off   bool    `json:"off,omitempty"` // the server has no cluster service
}

// clusterReport builds the ClusterReport; nil when no node heard a
// cluster version.
func (h *holder) clusterReport() *ClusterReport {
	if h.cstats.nodes.Load() == 0 && !h.clusterOff.Load() {
		return nil
	}
	r := &ClusterReport{Final: map[string]int{}, Jobs: map[string]Latency{}, Off: h.clusterOff.Load(),
		Calls: h.cstats.rpc.summary(h.cstats.rpcErrs.Load())}
	for _, b := range h.beaters {
		c := b.cl.Load()
		if c == nil {
			continue
		}
		c.mu.Lock()
		r.Nodes++
		r.Final[c.last]++
		if c.busy {
			r.Busy++
		}
		if c.fault {
			r.Faulty++
		}
		c.mu.Unlock()
	}
	h.cstats.mu.Lock()
	r.Reports = maps.Clone(h.cstats.reports)
	h.cstats.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(h.cstats.jobs)) {
		if j := h.cstats.jobs[k]; j.Count() > 0 {
			r.Jobs[k] = j.summary(0)
		}
	}
	return r
}
