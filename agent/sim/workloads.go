package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"gopkg.in/yaml.v3"

	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
)

// Simulated edge workloads: a node of the hold whose heartbeat answer
// names a workloads_version it has not applied fetches its set with
// GetWorkloads (the version it has), as agent.Node's workloads loop does,
// and runs simulated pods instead of podman's: each workload of the set
// at a new revision is Deploying, then Running after the start time (or,
// for the pods given a fault, crashing: its first container exits with
// SimulatedExitCode and is restarted, with a back-off, for ever). A pod
// whose workload left the set is gone from the next report. The node sends
// ReportStatus (its whole set) only when something in it changed, and in
// full when an answer carries workloads_status_wanted. As for cluster
// nodes, a node's steps are items of a schedule served by the hold's
// workers: ten thousand deploying nodes cost a heap entry each.

// Defaults of the simulated pods.
const (
	// DefaultWorkloadStart is how long a pod takes from its deploy to
	// Running (±50 %): an image already pulled, started by podman.
	DefaultWorkloadStart = 3 * time.Second
	// SimulatedExitCode is the exit code of a crashing container.
	SimulatedExitCode = 3
	// DefaultWorkloadRestart is the wait before a crashed container's
	// first restart, doubled after each up to crashBackoffMax (the
	// back-off of a Kubernetes crash loop).
	DefaultWorkloadRestart = 10 * time.Second
	crashBackoffMax        = 5 * time.Minute
	// deployCheck is how often the agent looks at its pods while one
	// deploys.
	deployCheck = time.Second
)

// WorkloadFaults are the shares (0..1) of the simulated pods that crash:
// Share for any revision, ByRevision for the revisions named (it takes the
// place of Share for them). Whether a pod crashes is decided from the seed,
// the host, the workload and the revision: the same device crashes the same
// revision again after a restart of the simulator.
type WorkloadFaults struct {
	Share      float64
	ByRevision map[int64]float64
}

func (f WorkloadFaults) share(rev int64) float64 {
	if s, ok := f.ByRevision[rev]; ok {
		return s
	}
	return f.Share
}

// Crashes tells whether the pod of host's workload at rev crashes.
func (f WorkloadFaults) Crashes(seed uint64, host, workload string, rev int64) bool {
	s := f.share(rev)
	if s <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s/%d", seed, host, workload, rev)
	return float64(h.Sum64()>>11)/float64(1<<53) < s
}

// WorkloadDeploy is a line of Options.WorkloadDeploys: a node deployed a
// workload's revision (it fetched a set naming it) at At (Unix
// nanoseconds).
type WorkloadDeploy struct {
	At       int64  `json:"at"`
	HostID   string `json:"hostId"`
	Workload string `json:"workload"`
	Revision int64  `json:"revision"`
}

// noteDeploy writes a deploy to Options.WorkloadDeploys.
func (h *holder) noteDeploy(d WorkloadDeploy) {
	if h.o.WorkloadDeploys == nil {
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	h.wstats.deploysMu.Lock()
	defer h.wstats.deploysMu.Unlock()
	if _, err := h.o.WorkloadDeploys.Write(append(b, '\n')); err != nil && !h.wstats.deploysFailed {
		h.wstats.deploysFailed = true
		h.noteErr(fmt.Errorf("workloads: write a deploy: %w", err))
	}
}

// simWorkloads is a simulated node's workloads side, guarded by mu.
type simWorkloads struct {
	mu      sync.Mutex
	wanted  string // the version the last answer named
	applied string
	full    bool // an answer asked for the status in full
	pods    map[string]*simPod
	dirty   bool // the status changed since it was last sent
	nextAt  time.Duration
	running bool // a step is under way
	again   bool // something was heard while it ran
	fails   int
	reports int
}

// simPod is one simulated pod: a workload at one revision.
type simPod struct {
	name       string
	rev        int64
	containers []string
	phase      workloadsv1.WorkloadStatus_Phase
	since      int64 // Unix seconds of its last phase change
	crash      bool
	started    int64
	finished   int64
	restarts   int32
	deployed   time.Duration // holder clock of its deploy
	told       bool          // a report saying Running was answered
	// next is when the pod changes by itself (holder clock): Running or
	// its crash at the end of its start, then each restart; -1 never.
	next time.Duration
}

// workloadStats is what the hold counts of the simulated workloads.
type workloadStats struct {
	nodes      atomic.Int64 // that heard a version
	get        histogram
	getErrs    atomic.Int64
	status     histogram
	statusErrs atomic.Int64
	backwards  atomic.Int64
	deployed   histogram    // a pod's deploy until the report that said Running was answered
	last       atomic.Int64 // Unix nanoseconds of the last report answered
	off        atomic.Bool
	names      sync.Map // FNV-64 of a pod YAML → its container names
	// deploysMu serializes the lines of Options.WorkloadDeploys.
	deploysMu     sync.Mutex
	deploysFailed bool
}

// workloadsHeard is the heartbeat's part: it notes the version and the
// status request of an answer and schedules the node's step when there is
// something to do.
func (h *holder) workloadsHeard(b *beater, version string, full bool) {
	if version == "" || h.wstats.off.Load() {
		return // a server without the workloads module: nothing changes
	}
	w := b.wl.Load()
	if w == nil {
		w = &simWorkloads{pods: map[string]*simPod{}, nextAt: -1}
		if b.wl.CompareAndSwap(nil, w) {
			h.wstats.nodes.Add(1)
		} else {
			w = b.wl.Load()
		}
	}
	now := h.clock()
	w.mu.Lock()
	w.wanted = version
	w.full = w.full || full
	start := false
	if w.needFetch() || w.full {
		if w.running {
			w.again = true
		} else if w.nextAt < 0 || w.nextAt > now {
			w.nextAt, start = now, true
		}
	}
	w.mu.Unlock()
	if start {
		h.wsched.Add(b, now)
	}
}

// needFetch tells whether the version heard is one to fetch: not the one
// applied, and not older (a lagging replica's answer); w.mu is held.
func (w *simWorkloads) needFetch() bool {
	if w.wanted == "" || w.wanted == w.applied {
		return false
	}
	return !older(w.wanted, w.applied)
}

// older tells whether version a is older than b, when both are numbers.
func older(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// workloadStep runs b's step due at at: fetch the set when the version
// moved, move the pods whose time came, report the status when it changed,
// and schedule the next step.
func (h *holder) workloadStep(ctx context.Context, b *beater, at time.Duration) {
	w := b.wl.Load()
	w.mu.Lock()
	if w.running || at != w.nextAt {
		w.mu.Unlock()
		return // replaced by an earlier step
	}
	w.running, w.again, w.nextAt = true, false, -1
	fetch, have := w.needFetch(), w.applied
	w.mu.Unlock()
	if fetch {
		set, err := h.getWorkloads(ctx, b, have)
		if ctx.Err() != nil {
			return
		}
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			h.wstats.off.Store(true)
			h.noteErr(errors.New("workloads: the server has no workloads service"))
			return
		}
		if err != nil {
			h.workloadRetry(b, w)
			return
		}
		h.applySet(b, w, set)
	}
	now := h.clock()
	w.mu.Lock()
	for _, p := range w.pods {
		w.dirty = h.advance(p, now) || w.dirty
	}
	send := w.dirty || w.full
	var req *workloadsv1.ReportStatusRequest
	if send {
		req = w.report()
	}
	w.mu.Unlock()
	if send {
		if err := h.sendStatus(ctx, b, req); err != nil {
			if ctx.Err() == nil {
				h.workloadRetry(b, w)
			}
			return
		}
		answered := h.clock()
		w.mu.Lock()
		w.dirty, w.full, w.fails = false, false, 0
		w.reports++
		for _, ws := range req.Workloads {
			p := w.pods[ws.Name]
			if p != nil && !p.told && p.rev == ws.Revision && ws.Phase == workloadsv1.WorkloadStatus_PHASE_RUNNING {
				// Once per pod: the first report saying Running.
				p.told = true
				h.wstats.deployed.Record(answered - p.deployed)
			}
		}
		w.mu.Unlock()
		h.wstats.last.Store(h.o.Now().UnixNano())
	}
	h.workloadNext(b, w)
}

// workloadNext schedules b's next step: at once when a version or a full
// status was heard meanwhile, else when a pod changes next.
func (h *holder) workloadNext(b *beater, w *simWorkloads) {
	now := h.clock()
	w.mu.Lock()
	next := time.Duration(-1)
	for _, p := range w.pods {
		if p.next >= 0 && (next < 0 || p.next < next) {
			next = p.next
		}
	}
	if w.again || w.needFetch() || w.full || w.dirty {
		next = now
	}
	w.running, w.again = false, false
	w.nextAt = next
	w.mu.Unlock()
	if next >= 0 {
		h.wsched.Add(b, next)
	}
}

// workloadRetry schedules the step again after a failed call, backing off
// as the heartbeats do.
func (h *holder) workloadRetry(b *beater, w *simWorkloads) {
	bo := h.o.Backoff
	if bo.Min <= 0 {
		bo.Min = 2 * time.Second
	}
	if bo.Max < bo.Min {
		bo.Max = max(bo.Min, 32*time.Second)
	}
	w.mu.Lock()
	d := max(bo.Min/4, time.Millisecond)
	for i := 0; i < w.fails && d < bo.Max; i++ {
		d *= 2
	}
	w.fails++
	d = min(d, bo.Max)
	at := h.clock() + d + time.Duration(h.jitterN(int64(d/2+1)))
	w.running, w.again, w.nextAt = false, false, at
	w.mu.Unlock()
	h.wsched.Add(b, at)
}

func (h *holder) jitterN(n int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rnd.Int64N(n)
}

// applySet makes the pods what a GetWorkloads answer says: a workload new
// or at another revision is deployed afresh, one no longer listed goes.
func (h *holder) applySet(b *beater, w *simWorkloads, set *workloadsv1.GetWorkloadsResponse) {
	now := h.clock()
	unix := h.o.Now().Unix()
	w.mu.Lock()
	defer w.mu.Unlock()
	if set.Unchanged {
		w.applied = set.Version // the server says the node has it
		return
	}
	if older(set.Version, w.applied) {
		// Never backwards: keep what runs, as the agent does.
		h.wstats.backwards.Add(1)
		return
	}
	listed := make(map[string]bool, len(set.Workloads))
	for _, wl := range set.Workloads {
		listed[wl.Name] = true
		if p := w.pods[wl.Name]; p != nil && p.rev == wl.Revision {
			continue
		}
		h.mu.Lock()
		start := jitter(h.rnd, h.workloadStart())
		h.mu.Unlock()
		// The agent sees a pod start at its next check, every second
		// while a workload deploys: pods started within the same second
		// are in one report.
		start = (start + deployCheck - 1) / deployCheck * deployCheck
		w.pods[wl.Name] = &simPod{name: wl.Name, rev: wl.Revision, containers: h.containerNames(wl.PodYaml),
			phase: workloadsv1.WorkloadStatus_PHASE_DEPLOYING, since: unix, deployed: now, next: now + start,
			crash: h.o.WorkloadFaults.Crashes(h.o.Seed, b.hostID, wl.Name, wl.Revision)}
		w.dirty = true
		h.noteDeploy(WorkloadDeploy{At: h.o.Now().UnixNano(), HostID: b.hostID, Workload: wl.Name, Revision: wl.Revision})
	}
	for name := range w.pods {
		if !listed[name] {
			delete(w.pods, name)
			w.dirty = true
		}
	}
	w.applied = set.Version
}

func (h *holder) workloadRestart() time.Duration {
	if h.o.WorkloadRestart > 0 {
		return h.o.WorkloadRestart
	}
	return DefaultWorkloadRestart
}

func (h *holder) workloadStart() time.Duration {
	if h.o.WorkloadStart > 0 {
		return h.o.WorkloadStart
	}
	return DefaultWorkloadStart
}

// advance moves p to where it is at now: Running (or crashed) at the end
// of its start, restarted after each back-off. It tells whether its status
// changed.
func (h *holder) advance(p *simPod, now time.Duration) bool {
	changed := false
	for p.next >= 0 && p.next <= now {
		at := h.o.Now().Add(p.next - now).Unix()
		switch {
		case p.phase == workloadsv1.WorkloadStatus_PHASE_DEPLOYING && !p.crash:
			p.phase, p.since, p.started, p.next = workloadsv1.WorkloadStatus_PHASE_RUNNING, at, at, -1
		case p.phase == workloadsv1.WorkloadStatus_PHASE_DEPLOYING:
			// Every container started; the first one exits at once.
			p.phase = workloadsv1.WorkloadStatus_PHASE_DEGRADED
			if len(p.containers) == 1 {
				p.phase = workloadsv1.WorkloadStatus_PHASE_EXITED
			}
			p.since, p.started, p.finished = at, at, at
			p.next += h.workloadRestart()
		default:
			// A restart of the crashed container, which exits again.
			p.restarts++
			p.started, p.finished = at, at
			d := h.workloadRestart()
			for i := int32(0); i < p.restarts && d < crashBackoffMax; i++ {
				d *= 2
			}
			p.next += min(d, crashBackoffMax)
		}
		changed = true
	}
	return changed
}

// report is the node's whole status, as ReportStatus takes it; w.mu is
// held.
func (w *simWorkloads) report() *workloadsv1.ReportStatusRequest {
	req := &workloadsv1.ReportStatusRequest{Version: w.applied}
	for _, name := range slices.Sorted(maps.Keys(w.pods)) {
		p := w.pods[name]
		ws := &workloadsv1.WorkloadStatus{Name: p.name, Revision: p.rev, Phase: p.phase, TransitionTime: p.since}
		for i, c := range p.containers {
			cs := &workloadsv1.ContainerStatus{Name: c}
			switch {
			case p.phase == workloadsv1.WorkloadStatus_PHASE_DEPLOYING:
				cs.State = "created"
			case p.crash && i == 0:
				cs.State, cs.ExitCode, cs.Restarts = "exited", SimulatedExitCode, p.restarts
				cs.StartedTime, cs.FinishedTime = p.started, p.finished
				cs.Error = fmt.Sprintf("exited with code %d (simulated crash)", SimulatedExitCode)
			default:
				cs.State, cs.StartedTime = "running", p.started
			}
			ws.Containers = append(ws.Containers, cs)
		}
		req.Workloads = append(req.Workloads, ws)
	}
	return req
}

// containerNames reads the container names of a rendered pod YAML,
// remembered per distinct YAML (a fleet runs a few).
func (h *holder) containerNames(pod []byte) []string {
	f := fnv.New64a()
	f.Write(pod)
	key := f.Sum64()
	if v, ok := h.wstats.names.Load(key); ok {
		return v.([]string)
	}
	var m struct {
		Spec struct {
			Containers []struct {
				Name string `yaml:"name"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	}
	var names []string
	if err := yaml.Unmarshal(pod, &m); err == nil {
		for _, c := range m.Spec.Containers {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		names = []string{"main"} // a pod the simulator cannot read still runs one container
	}
	h.wstats.names.Store(key, names)
	return names
}

func (h *holder) getWorkloads(ctx context.Context, b *beater, have string) (*workloadsv1.GetWorkloadsResponse, error) {
	tok, err := h.tokenOf(ctx, b, h.clock())
	if err != nil {
		h.wstats.getErrs.Add(1)
		h.noteErr(fmt.Errorf("workloads: %w", err))
		return nil, err
	}
	req := connect.NewRequest(&workloadsv1.GetWorkloadsRequest{Version: have})
	req.Header().Set("Authorization", "Bearer "+tok)
	start := h.clock()
	resp, err := h.workloads[b.conn].GetWorkloads(ctx, req)
	if err != nil {
		if ctx.Err() == nil && connect.CodeOf(err) != connect.CodeUnimplemented {
			h.wstats.getErrs.Add(1)
			h.workloadErr(b, fmt.Errorf("workloads: GetWorkloads: %w", err))
		}
		return nil, err
	}
	h.wstats.get.Record(h.clock() - start)
	return resp.Msg, nil
}

func (h *holder) sendStatus(ctx context.Context, b *beater, m *workloadsv1.ReportStatusRequest) error {
	tok, err := h.tokenOf(ctx, b, h.clock())
	if err != nil {
		h.wstats.statusErrs.Add(1)
		h.noteErr(fmt.Errorf("workloads: %w", err))
		return err
	}
	req := connect.NewRequest(m)
	req.Header().Set("Authorization", "Bearer "+tok)
	start := h.clock()
	_, err = h.workloads[b.conn].ReportStatus(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			h.wstats.statusErrs.Add(1)
			h.workloadErr(b, fmt.Errorf("workloads: ReportStatus: %w", err))
		}
		return err
	}
	h.wstats.status.Record(h.clock() - start)
	return nil
}

func (h *holder) workloadErr(b *beater, err error) {
	h.noteErr(err)
	if connect.CodeOf(err) == connect.CodeUnauthenticated {
		b.mu.Lock()
		b.token = ""
		b.mu.Unlock()
	}
}

// WorkloadReport is what the simulated workloads did during the hold.
type WorkloadReport struct {
	// Nodes that heard a workloads version.
	Nodes int `json:"nodes"`
	// Pods at the end by phase (Running, Deploying, Degraded, Exited),
	// and by revision and phase.
	Pods       map[string]int            `json:"pods"`
	ByRevision map[string]map[string]int `json:"byRevision"`
	// Crashing pods (their revision's fault share).
	Crashing int `json:"crashing"`
	// Unsent counts nodes whose last status was not delivered yet.
	Unsent int `json:"unsent"`
	// Reports delivered (ReportStatus answered).
	Reports int `json:"reports"`
	// Get is GetWorkloads, Status ReportStatus: each call's latency.
	Get    Latency `json:"getWorkloads"`
	Status Latency `json:"reportStatus"`
	// Deploy is a pod's deploy (its set fetched) until the server
	// answered the report saying it runs.
	Deploy Latency `json:"deploy"`
	// Backwards counts answers older than the version applied, refused.
	Backwards int64 `json:"backwards,omitempty"`
	// LastReport is when the last report was answered (Unix seconds).
	LastReport float64 `json:"lastReport"`
	Off        bool    `json:"off,omitempty"` // the server has no workloads service
}

// workloadReport builds the WorkloadReport; nil when no node heard a
// workloads version. h.mu is held.
func (h *holder) workloadReport() *WorkloadReport {
	if h.wstats.nodes.Load() == 0 && !h.wstats.off.Load() {
		return nil
	}
	r := &WorkloadReport{Pods: map[string]int{}, ByRevision: map[string]map[string]int{}, Off: h.wstats.off.Load(),
		Get: h.wstats.get.summary(h.wstats.getErrs.Load()), Status: h.wstats.status.summary(h.wstats.statusErrs.Load()),
		Deploy: h.wstats.deployed.summary(0), Backwards: h.wstats.backwards.Load()}
	if l := h.wstats.last.Load(); l > 0 {
		r.LastReport = round3(float64(l) / 1e9)
	}
	for _, b := range h.beaters {
		w := b.wl.Load()
		if w == nil {
			continue
		}
		w.mu.Lock()
		r.Nodes++
		r.Reports += w.reports
		if w.dirty {
			r.Unsent++
		}
		for _, p := range w.pods {
			ph := PhaseName(p.phase)
			r.Pods[ph]++
			rev := strconv.FormatInt(p.rev, 10)
			if r.ByRevision[rev] == nil {
				r.ByRevision[rev] = map[string]int{}
			}
			r.ByRevision[rev][ph]++
			if p.crash {
				r.Crashing++
			}
		}
		w.mu.Unlock()
	}
	return r
}

// PhaseName is a phase as the API writes it (Running, Deploying, …).
func PhaseName(p workloadsv1.WorkloadStatus_Phase) string {
	s := p.String()
	if len(s) > len("PHASE_") {
		s = s[len("PHASE_"):]
	}
	if s == "" {
		return "Unknown"
	}
	return s[:1] + strings.ToLower(s[1:])
}
