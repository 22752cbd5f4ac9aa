package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/eimhq/eim/agent/pods"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
)

// The node's edge workloads (the workloads module's device side): the
// heartbeat loop learns the version of the node's set of workloads
// (HeartbeatResponse.workloads_version) and wakes a loop of its own, which
// fetches the set (WorkloadService.GetWorkloads) only when the version
// moved, runs each workload as a podman pod (PodRunner), removes the pods
// no longer wanted, and reports each workload's status when it changed
// (ReportStatus), polling podman every WorkloadCheck whatever the
// heartbeat's pace. A third loop sends the files of the workloads' egress
// data paths through upload grants (workloads_upload.go).
//
// Podman's labels say which pods exist at which revision; the state
// directory (StateDir/workloads.json, mode 0600: it holds the workloads'
// secrets, as podman's own secret store does) keeps the set applied and
// its version, the versions superseded (never applied again), the boot
// the pods were last seen in, the phases reported and their transition
// times, and the log requests answered.

// workloadsFile is the name of the workloads state in StateDir.
const workloadsFile = "workloads.json"

// maxSuperseded and maxLogIDs bound the state's memories: a version or a
// log request older than that many is not coming back.
const (
	maxSuperseded = 64
	maxLogIDs     = 256
	// maxLogBytes is the most of a container's log sent.
	maxLogBytes = 64 << 10
	// maxLastError bounds a workload's last error.
	maxLastError = 1000
)

// DefaultWorkloadRetry bounds the waits before a workload that failed to
// start (an image that cannot be pulled) is tried again.
var DefaultWorkloadRetry = Backoff{Min: 10 * time.Second, Max: 5 * time.Minute}

// PodRunner runs the node's edge workloads as pods: a *pods.Runner.
// Its methods are called from one goroutine.
type PodRunner interface {
	Apply(ctx context.Context, p pods.Pod) error
	Remove(ctx context.Context, workload string) error
	Start(ctx context.Context, workload string) error
	List(ctx context.Context) ([]pods.Info, error)
	Logs(ctx context.Context, workload, container string, tail int) ([]byte, error)
}

// edgeState is what the workloads loop keeps in the state directory.
type edgeState struct {
	// Applied is the version of Set.
	Applied string `json:"applied,omitempty"`
	// Set is the set of that version (protojson of GetWorkloadsResponse,
	// its workloads only).
	Set json.RawMessage `json:"set,omitempty"`
	// Superseded are versions replaced, newest last.
	Superseded []string `json:"superseded,omitempty"`
	// BootID is the boot the pods were last seen in: another means the
	// device rebooted, and the pods podman did not restart are started.
	BootID string `json:"bootId,omitempty"`
	// Phases are the phases last reported, by workload, with the time
	// each began (Unix seconds).
	Phases map[string]edgePhase `json:"phases,omitempty"`
	// LogsDone are the log requests answered, newest last; LogsPending
	// are those to answer.
	LogsDone    []string          `json:"logsDone,omitempty"`
	LogsPending []json.RawMessage `json:"logsPending,omitempty"`
}

type edgePhase struct {
	Phase int32 `json:"phase"`
	Since int64 `json:"since"`
}

// edgeRun is a Node's workload state, shared by the heartbeat loop (which
// sets the version wanted) and the workloads loop (which owns the rest).
type edgeRun struct {
	mu         sync.Mutex
	wanted     string
	wantFull   bool // the server asked for a full status report
	off        bool // the server has no workloads service
	changed    chan struct{}
	paths      []dataPath    // the data paths, for the data loops
	pathsKnown bool          // paths are those of an applied set (not of a lost state)
	pathsSet   chan struct{} // wakes the upload loop when paths changed
	ingressSet chan struct{} // wakes the download loop

	// The workloads loop's own.
	path       string // "" keeps the state in memory
	st         edgeState
	set        []*workloadsv1.Workload // of st.Applied, by name
	rebooted   bool                    // start the pods not running, once
	retry      retrier                 // GetWorkloads
	notUntil   time.Time
	apply      map[string]*applyState // by workload
	removing   map[string]string      // pods being removed → last error
	lastSent   *workloadsv1.ReportStatusRequest
	lastListed time.Time
}

// applyState is how a workload's application goes.
type applyState struct {
	revision int64
	err      string // the last failure, "" after a success
	retry    retrier
	notUntil time.Time
}

func loadEdge(dir, bootID string) (*edgeRun, error) {
	e := &edgeRun{changed: make(chan struct{}, 1), pathsSet: make(chan struct{}, 1), ingressSet: make(chan struct{}, 1),
		apply: map[string]*applyState{}, removing: map[string]string{}}
	if dir != "" {
		e.path = filepath.Join(dir, workloadsFile)
		b, err := os.ReadFile(e.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("workloads state: %w", err)
		default:
			if err := json.Unmarshal(b, &e.st); err != nil {
				// Damaged: the set is fetched again (version ""), and the
				// pods found are kept or replaced by it.
				e.st = edgeState{}
			}
		}
	}
	if len(e.st.Set) > 0 {
		var m workloadsv1.GetWorkloadsResponse
		if err := protojson.Unmarshal(e.st.Set, &m); err != nil {
			e.st.Applied, e.st.Set = "", nil
		} else {
			e.set = m.Workloads
		}
	}
	if bootID != "" && e.st.BootID != bootID {
		e.rebooted = e.st.BootID != ""
		e.st.BootID = bootID
	}
	if e.st.Phases == nil {
		e.st.Phases = map[string]edgePhase{}
	}
	e.paths, e.pathsKnown = dataPaths(e.set), e.st.Applied != ""
	return e, nil
}

// save writes the state; called from the workloads loop.
func (e *edgeRun) save() error {
	if e.path == "" {
		return nil
	}
	b, err := json.Marshal(&e.st)
	if err != nil {
		return err
	}
	return writeFileAtomic(e.path, b, 0o600, 0o700)
}

// workloadsVersion is the heartbeat's part: it notes the version an
// answer names (and whether the server wants a full status) and wakes the
// workloads loop when there is something to do. "" (a server without the
// workloads module) changes nothing: a device does not remove its pods
// because a server does not know of them.
func (n *Node) workloadsVersion(version string, statusWanted bool) {
	e := n.edge
	if e == nil {
		return
	}
	e.mu.Lock()
	wake := !e.off && ((version != "" && version != e.wanted) || (statusWanted && !e.wantFull))
	if version != "" {
		e.wanted = version
	}
	if statusWanted {
		e.wantFull = true
	}
	e.mu.Unlock()
	if wake {
		select {
		case e.changed <- struct{}{}:
		default:
		}
	}
}

// runWorkloads is the workloads loop: a check at start, when the
// heartbeat wakes it, and every WorkloadCheck (every second while a
// workload is deploying).
func (n *Node) runWorkloads(ctx context.Context) {
	every := n.WorkloadCheck
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		busy := n.workloadsCheck(ctx)
		d := every
		if busy {
			d = min(every, time.Second)
		}
		t.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.edge.changed:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
	}
}

// workloadsCheck fetches the set when its version moved, brings the pods
// to it, answers log requests and reports the status when it changed. It
// returns whether a workload is on its way (check again soon).
func (n *Node) workloadsCheck(ctx context.Context) bool {
	e := n.edge
	e.mu.Lock()
	wanted, off := e.wanted, e.off
	e.mu.Unlock()
	if off {
		return false
	}
	if wanted != "" && wanted != e.st.Applied && !n.now().Before(e.notUntil) {
		n.fetchWorkloads(ctx, wanted)
	}
	if e.st.Applied == "" {
		// No set fetched yet: no authority to touch a pod (a lost state
		// file and a server away must not remove what runs).
		return false
	}
	infos, err := n.Pods.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log().Warn("cannot list the workloads' pods", "err", err)
		}
		return true
	}
	busy := n.reconcile(ctx, infos)
	if busy {
		// What the reconcile did is what the status must say.
		if infos, err = n.Pods.List(ctx); err != nil {
			return true
		}
	}
	e.lastListed = n.now()
	n.answerLogs(ctx, infos)
	for _, info := range infos {
		if info.Status == pods.Deploying {
			busy = true
		}
	}
	n.reportWorkloads(ctx, infos)
	return busy
}

// fetchWorkloads gets the set of the version wanted and makes it the
// one applied, unless it is older than the one applied.
func (n *Node) fetchWorkloads(ctx context.Context, wanted string) {
	e := n.edge
	now := n.now()
	resp, err := n.wc.GetWorkloads(ctx, connect.NewRequest(&workloadsv1.GetWorkloadsRequest{Version: e.st.Applied}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		e.mu.Lock()
		e.off = true
		e.mu.Unlock()
		n.log().Info("the server has no workloads service: device workloads ignored")
		return
	}
	if err == nil && resp.Msg.Unchanged {
		err = fmt.Errorf("the server says version %q is unchanged, its heartbeat named %q", resp.Msg.Version, wanted)
	}
	if err == nil && resp.Msg.Version == "" {
		err = errors.New("the server answered a set without a version")
	}
	if err == nil && superseded(resp.Msg.Version, e.st.Applied, e.st.Superseded) {
		err = fmt.Errorf("the server offers version %q, older than %q applied: kept %q", resp.Msg.Version, e.st.Applied, e.st.Applied)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		d := e.retry.next(err)
		e.notUntil = now.Add(d)
		n.log().Warn("workloads not fetched", "err", err, "retry_in", d)
		return
	}
	e.retry.reset()
	e.notUntil = time.Time{}
	m := resp.Msg
	set := slices.Clone(m.Workloads)
	slices.SortFunc(set, func(a, b *workloadsv1.Workload) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	b, err := protojson.Marshal(&workloadsv1.GetWorkloadsResponse{Version: m.Version, Workloads: set})
	if err != nil {
		n.log().Error("cannot keep the workloads", "err", err)
		return
	}
	if e.st.Applied != "" && e.st.Applied != m.Version {
		e.st.Superseded = append(e.st.Superseded, e.st.Applied)
		if len(e.st.Superseded) > maxSuperseded {
			e.st.Superseded = e.st.Superseded[len(e.st.Superseded)-maxSuperseded:]
		}
	}
	e.st.Applied, e.st.Set, e.set = m.Version, b, set
	for _, r := range m.LogRequests {
		if slices.Contains(e.st.LogsDone, r.Id) || r.Id == "" {
			continue
		}
		if rb, err := protojson.Marshal(r); err == nil {
			e.st.LogsPending = append(e.st.LogsPending, rb)
		}
	}
	if err := e.save(); err != nil {
		n.log().Error("cannot record the workloads state", "err", err)
	}
	e.mu.Lock()
	e.paths, e.pathsKnown = dataPaths(set), true
	e.mu.Unlock()
	for _, c := range []chan struct{}{e.pathsSet, e.ingressSet} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	names := make([]string, len(set))
	for i, w := range set {
		names[i] = w.Name + "@" + strconv.FormatInt(w.Revision, 10)
	}
	n.log().Info("workloads to run", "version", m.Version, "workloads", names, "log_requests", len(m.LogRequests))
}

// superseded tells whether version v must not replace applied: it is a
// version this device saw replaced, or both are numbers and v is smaller.
func superseded(v, applied string, old []string) bool {
	if v == applied {
		return false
	}
	if slices.Contains(old, v) {
		return true
	}
	a, err1 := strconv.ParseUint(applied, 10, 64)
	b, err2 := strconv.ParseUint(v, 10, 64)
	return err1 == nil && err2 == nil && b < a
}

// reconcile brings the pods to the set: it removes the pods of workloads
// not in it, plays those missing or at another revision, and starts
// those stopped. It returns whether it changed anything.
func (n *Node) reconcile(ctx context.Context, infos []pods.Info) bool {
	e := n.edge
	changed := false
	byName := map[string]pods.Info{}
	for _, info := range infos {
		byName[info.Workload] = info
	}
	wanted := map[string]bool{}
	for _, w := range e.set {
		wanted[w.Name] = true
	}
	for _, info := range infos {
		if wanted[info.Workload] {
			continue
		}
		changed = true
		n.log().Info("removing a workload no longer wanted", "workload", info.Workload, "revision", info.Revision)
		if err := n.Pods.Remove(ctx, info.Workload); err != nil {
			if ctx.Err() != nil {
				return changed
			}
			e.removing[info.Workload] = truncate(err.Error(), maxLastError)
			n.log().Warn("workload not removed", "workload", info.Workload, "err", err)
			continue
		}
		delete(e.removing, info.Workload)
		delete(e.apply, info.Workload)
	}
	for name := range e.removing {
		if _, ok := byName[name]; !ok {
			delete(e.removing, name) // gone, by us or someone else
		}
	}
	rebooted := e.rebooted
	e.rebooted = false
	for _, w := range e.set {
		if ctx.Err() != nil {
			return changed
		}
		a := e.apply[w.Name]
		if a == nil || a.revision != w.Revision {
			a = &applyState{revision: w.Revision, retry: retrier{b: n.workloadRetry()}}
			e.apply[w.Name] = a
		}
		info, ok := byName[w.Name]
		// An incomplete pod (a play interrupted) is applied again: Apply
		// replaces it.
		if ok && info.Revision == w.Revision && !info.Incomplete {
			// Podman does not restart a pod after a reboot, nor one an
			// operator stopped: the set says it runs.
			if info.Status != pods.Stopped && !(rebooted && !anyRunning(info)) {
				continue
			}
			if n.now().Before(a.notUntil) {
				continue
			}
			changed = true
			n.log().Info("starting a stopped workload", "workload", w.Name, "revision", w.Revision, "rebooted", rebooted)
			if err := n.Pods.Start(ctx, w.Name); err != nil {
				n.applyFailed(ctx, a, w, "start: "+err.Error())
				continue
			}
			a.err, a.notUntil = "", time.Time{}
			a.retry.reset()
			continue
		}
		if n.now().Before(a.notUntil) {
			continue
		}
		changed = true
		n.log().Info("deploying a workload", "workload", w.Name, "revision", w.Revision)
		if err := n.deploy(ctx, w); err != nil {
			n.applyFailed(ctx, a, w, err.Error())
			continue
		}
		a.err, a.notUntil = "", time.Time{}
		a.retry.reset()
		n.log().Info("workload deployed", "workload", w.Name, "revision", w.Revision)
	}
	if changed {
		if err := e.save(); err != nil {
			n.log().Warn("cannot record the workloads state", "err", err)
		}
	}
	return changed
}

func anyRunning(info pods.Info) bool {
	for _, c := range info.Containers {
		if c.State == "running" {
			return true
		}
	}
	return false
}

func (n *Node) applyFailed(ctx context.Context, a *applyState, w *workloadsv1.Workload, msg string) {
	if ctx.Err() != nil {
		return // stopping: not the workload's fault
	}
	d := a.retry.next(errors.New(msg))
	a.err, a.notUntil = truncate(msg, maxLastError), n.now().Add(d)
	n.log().Warn("workload not deployed", "workload", w.Name, "revision", w.Revision, "err", msg, "retry_in", d)
}

func (n *Node) workloadRetry() Backoff {
	if n.WorkloadRetry.Min > 0 {
		return n.WorkloadRetry
	}
	return DefaultWorkloadRetry
}

// deploy creates the directories the pod mounts and plays it.
func (n *Node) deploy(ctx context.Context, w *workloadsv1.Workload) error {
	dirs, err := pods.HostPaths(w.PodYaml)
	if err != nil {
		return err
	}
	for _, d := range w.DataPaths {
		if filepath.IsAbs(d.Source) {
			dirs = append(dirs, d.Source)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	p := pods.Pod{Workload: w.Name, Revision: w.Revision, YAML: w.PodYaml, ConfigMaps: w.ConfigMaps}
	if len(w.Secrets) > 0 {
		p.Secrets = map[string]map[string][]byte{}
		for _, s := range w.Secrets {
			items := map[string][]byte{}
			for _, it := range s.Items {
				items[it.Key] = it.Value
			}
			p.Secrets[s.Name] = items
		}
	}
	for _, r := range w.RegistryAuth {
		p.Registries = append(p.Registries, pods.Registry{Server: r.Registry, Username: r.Username, Password: r.Password})
	}
	return n.Pods.Apply(ctx, p)
}
