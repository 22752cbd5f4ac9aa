package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/internal/syncbuf"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// fakeWorkloads is a minimal workloads server: tokens, heartbeats naming
// a version (and, once per host when asked, workloads_status_wanted),
// GetWorkloads answering the scripted set, and ReportStatus recording
// every report of each host.
type fakeWorkloads struct {
	hostv1connect.UnimplementedHostServiceHandler
	workloadsv1connect.UnimplementedWorkloadServiceHandler

	mu      sync.Mutex
	tokens  map[string]string // token → host
	n       int
	beat    string // the version heartbeats name
	set     *workloadsv1.GetWorkloadsResponse
	wanted  map[string]bool // hosts to send workloads_status_wanted once
	gets    map[string][]string
	reports map[string][]*workloadsv1.ReportStatusRequest
}

func newFakeWorkloads() *fakeWorkloads {
	return &fakeWorkloads{tokens: map[string]string{}, wanted: map[string]bool{}, gets: map[string][]string{},
		reports: map[string][]*workloadsv1.ReportStatusRequest{}}
}

func (f *fakeWorkloads) token(w http.ResponseWriter, r *http.Request) {
	id, _ := strings.CutPrefix(r.FormValue("client_id"), "edgenode-")
	f.mu.Lock()
	f.n++
	tok := fmt.Sprintf("tok-%s-%d", id, f.n)
	f.tokens[tok] = id
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":900}`, tok)
}

func (f *fakeWorkloads) host(h http.Header) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.tokens[strings.TrimPrefix(h.Get("Authorization"), "Bearer ")]
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("unknown token"))
	}
	return id, nil
}

func (f *fakeWorkloads) Heartbeat(_ context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wanted := f.wanted[id]
	delete(f.wanted, id)
	return connect.NewResponse(&hostv1.HeartbeatResponse{IntervalSeconds: 1, WorkloadsVersion: f.beat, WorkloadsStatusWanted: wanted}), nil
}

func (f *fakeWorkloads) GetWorkloads(_ context.Context, req *connect.Request[workloadsv1.GetWorkloadsRequest]) (*connect.Response[workloadsv1.GetWorkloadsResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets[id] = append(f.gets[id], req.Msg.Version)
	if req.Msg.Version == f.set.Version {
		return connect.NewResponse(&workloadsv1.GetWorkloadsResponse{Version: f.set.Version, Unchanged: true}), nil
	}
	return connect.NewResponse(f.set), nil
}

func (f *fakeWorkloads) ReportStatus(_ context.Context, req *connect.Request[workloadsv1.ReportStatusRequest]) (*connect.Response[workloadsv1.ReportStatusResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports[id] = append(f.reports[id], req.Msg)
	return connect.NewResponse(&workloadsv1.ReportStatusResponse{}), nil
}

func (f *fakeWorkloads) script(beat string, set *workloadsv1.GetWorkloadsResponse) {
	f.mu.Lock()
	f.beat = beat
	if set != nil {
		f.set = set
	}
	f.mu.Unlock()
}

// last returns each host's last report, a copy of the counts of reports
// and GetWorkloads calls.
func (f *fakeWorkloads) last() (map[string]*workloadsv1.ReportStatusRequest, map[string]int, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, reps, gets := map[string]*workloadsv1.ReportStatusRequest{}, map[string]int{}, map[string]int{}
	for id, rs := range f.reports {
		out[id], reps[id] = rs[len(rs)-1], len(rs)
	}
	for id, g := range f.gets {
		gets[id] = len(g)
	}
	return out, reps, gets
}

func podYAML(name string, containers ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n", name)
	for _, c := range containers {
		fmt.Fprintf(&b, "    - name: %s\n      image: reg.example/%s:1\n", c, c)
	}
	return []byte(b.String())
}

// phaseOf returns the phase, revision and containers of a workload in a
// report, or "absent".
func phaseOf(r *workloadsv1.ReportStatusRequest, name string) (string, int64, []*workloadsv1.ContainerStatus) {
	for _, w := range r.GetWorkloads() {
		if w.Name == name {
			return PhaseName(w.Phase), w.Revision, w.Containers
		}
	}
	return "absent", 0, nil
}

// Simulated nodes follow their workloads as the agent does: they fetch
// the set only when the heartbeat's version moved (never an older one),
// report Deploying then Running after the start time, only when the status
// changed (and in full when asked); a revision given a crash share crashes
// on that share of the devices, the same ones as the seed decides, with
// the exit code and growing restarts; a workload left out of the set is
// gone from the reports.
func TestWorkloadNodes(t *testing.T) {
	f := newFakeWorkloads()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", f.token)
	mux.Handle(hostv1connect.NewHostServiceHandler(f))
	mux.Handle(workloadsv1connect.NewWorkloadServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	hc, err := agent.Dial(srv.URL, ca)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()

	const nodes = 20
	start := 300 * time.Millisecond
	faults := WorkloadFaults{ByRevision: map[int64]float64{2: 0.5}}
	deploys := &lockedBuffer{}
	o := Options{URL: srv.URL, Seed: 27, Now: time.Now, Workers: 4, WorkloadStart: start, WorkloadFaults: faults,
		WorkloadRestart: 100 * time.Millisecond, Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		WorkloadDeploys: deploys}
	f.script("1", &workloadsv1.GetWorkloadsResponse{Version: "1", Workloads: []*workloadsv1.Workload{
		{Name: "cam", Revision: 1, PodYaml: podYAML("cam", "reader", "sidecar")},
		{Name: "gw", Revision: 1, PodYaml: podYAML("gw", "gw")},
	}})
	h := newHolder(o, []*http.Client{hc})
	h.start(context.Background())
	defer h.close()
	began := time.Now()
	for i := range nodes {
		id := fmt.Sprintf("host-%08d", i)
		h.add(i, 0, agent.Result{HostID: id, ClientID: "edgenode-" + id, ClientSecret: "s"}, time.Second)
	}
	allRunning := func(rev int64, names ...string) func(map[string]*workloadsv1.ReportStatusRequest) bool {
		return func(m map[string]*workloadsv1.ReportStatusRequest) bool {
			if len(m) < nodes {
				return false
			}
			for _, r := range m {
				for _, n := range names {
					if ph, rv, _ := phaseOf(r, n); ph != "Running" || rv != rev {
						return false
					}
				}
			}
			return true
		}
	}
	last := func() map[string]*workloadsv1.ReportStatusRequest { m, _, _ := f.last(); return m }
	waitFor(t, "every node running revision 1", last, allRunning(1, "cam", "gw"))
	if d := time.Since(began); d < start/2 {
		t.Fatalf("running after %v: the start time is %v ± 50 %%", d, start)
	}
	f.mu.Lock()
	for id, rs := range f.reports {
		if ph, _, cs := phaseOf(rs[0], "cam"); ph != "Deploying" || len(cs) != 2 || cs[0].Name != "reader" || cs[0].State != "created" {
			t.Errorf("%s: first report %v", id, rs[0])
		}
		if rs[0].Version != "1" {
			t.Errorf("%s: report of version %q", id, rs[0].Version)
		}
		if len(rs) > 3 { // Deploying, then each pod's Running (together or not)
			t.Errorf("%s: %d reports before running, want at most 3", id, len(rs))
		}
	}
	f.mu.Unlock()

	// Heartbeats go on; the version and the status stay: no fetch, no
	// report. Then one node is asked for its status in full.
	_, reps, gets := f.last()
	time.Sleep(2500 * time.Millisecond)
	_, reps2, gets2 := f.last()
	for id := range reps {
		if reps2[id] != reps[id] || gets2[id] != 1 || gets[id] != 1 {
			t.Errorf("%s: unchanged status: reports %d → %d, GetWorkloads %d → %d; want no new report and one fetch", id, reps[id], reps2[id], gets[id], gets2[id])
		}
	}
	f.mu.Lock()
	f.wanted["host-00000003"] = true
	f.mu.Unlock()
	waitFor(t, "the status sent in full when asked", func() int { _, r, _ := f.last(); return r["host-00000003"] }, func(n int) bool { return n == reps["host-00000003"]+1 })

	// An older version named by a lagging server is not fetched.
	f.script("0", nil)
	time.Sleep(1500 * time.Millisecond)
	if _, _, g := f.last(); g["host-00000000"] != 1 {
		t.Fatalf("an older version was fetched: %d GetWorkloads", g["host-00000000"])
	}

	// Revision 2 of cam, half of whose pods crash; gw leaves the set.
	f.script("2", &workloadsv1.GetWorkloadsResponse{Version: "2", Workloads: []*workloadsv1.Workload{
		{Name: "cam", Revision: 2, PodYaml: podYAML("cam", "reader", "sidecar")},
	}})
	settled := func(m map[string]*workloadsv1.ReportStatusRequest) bool {
		for _, r := range m {
			ph, rv, cs := phaseOf(r, "cam")
			if rv != 2 || ph == "Deploying" || len(r.Workloads) != 1 || (ph == "Degraded" && cs[0].Restarts < 2) {
				return false
			}
		}
		return len(m) == nodes
	}
	got := waitFor(t, "revision 2 settled", last, settled)
	crashed := 0
	for id, r := range got {
		ph, _, cs := phaseOf(r, "cam")
		want := faults.Crashes(o.Seed, id, "cam", 2)
		switch {
		case want && ph == "Degraded":
			crashed++
			if c := cs[0]; c.State != "exited" || c.ExitCode != SimulatedExitCode || c.Restarts < 2 || cs[1].State != "running" {
				t.Errorf("%s: crashed pod's containers %v", id, cs)
			}
		case !want && ph == "Running":
		default:
			t.Errorf("%s: cam at revision 2 is %s, crash decided %v", id, ph, want)
		}
		if r.Version != "2" {
			t.Errorf("%s: report of version %q", id, r.Version)
		}
	}
	if crashed < 3 || crashed > nodes-3 {
		t.Fatalf("%d of %d pods crashed with a share of 0.5", crashed, nodes)
	}

	// The simulator's report.
	waitFor(t, "every report answered", h.workloadReport, func(r *WorkloadReport) bool { return r != nil && r.Unsent == 0 })
	h.mu.Lock()
	rep := h.workloadReport()
	h.mu.Unlock()
	if rep.Nodes != nodes || rep.Pods["Running"] != nodes-crashed || rep.Pods["Degraded"] != crashed || rep.Crashing != crashed ||
		rep.ByRevision["2"]["Degraded"] != crashed || rep.Status.Errors != 0 || rep.Get.Count != 2*nodes || rep.Deploy.Count < nodes {
		t.Fatalf("report %+v", rep)
	}

	// The deploys' log: each node deployed cam 1, gw 1 and cam 2, once
	// each, cam 2 after cam 1; restarts of crashed pods are no deploys.
	type key struct {
		host, workload string
		rev            int64
	}
	at := map[key][]int64{}
	sc := bufio.NewScanner(strings.NewReader(deploys.String()))
	for sc.Scan() {
		var d WorkloadDeploy
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("deploy line %q: %v", sc.Text(), err)
		}
		if d.At < began.UnixNano() || d.At > time.Now().UnixNano() {
			t.Errorf("deploy %+v: at is not the deploy's time", d)
		}
		k := key{d.HostID, d.Workload, d.Revision}
		at[k] = append(at[k], d.At)
	}
	if len(at) != 3*nodes {
		t.Errorf("deploys: got %d (host, workload, revision), want %d", len(at), 3*nodes)
	}
	for i := range nodes {
		id := fmt.Sprintf("host-%08d", i)
		c1, g1, c2 := at[key{id, "cam", 1}], at[key{id, "gw", 1}], at[key{id, "cam", 2}]
		if len(c1) != 1 || len(g1) != 1 || len(c2) != 1 || c2[0] < c1[0] {
			t.Errorf("%s: deploys of cam 1 %v, gw 1 %v, cam 2 %v; want one each, cam 2 after cam 1", id, c1, g1, c2)
		}
	}
}

// lockedBuffer is a bytes.Buffer written from several goroutines.
type lockedBuffer = syncbuf.Buffer

// A single-container pod that crashes is Exited; the decision of a crash
// follows the share of the revision, else the default share.
func TestWorkloadFaults(t *testing.T) {
	f := WorkloadFaults{Share: 0.2, ByRevision: map[int64]float64{3: 1, 4: 0}}
	n := 0
	for i := range 1000 {
		if f.Crashes(1, fmt.Sprintf("host-%d", i), "w", 1) {
			n++
		}
		if !f.Crashes(1, fmt.Sprintf("host-%d", i), "w", 3) || f.Crashes(1, fmt.Sprintf("host-%d", i), "w", 4) {
			t.Fatal("a revision's own share is not followed")
		}
	}
	if n < 150 || n > 250 {
		t.Fatalf("%d of 1000 crash with a share of 0.2", n)
	}
	h := &holder{o: Options{Now: time.Now, WorkloadRestart: time.Second}, wstats: new(workloadStats)}
	p := &simPod{containers: []string{"only"}, phase: workloadsv1.WorkloadStatus_PHASE_DEPLOYING, crash: true, next: 0}
	if !h.advance(p, 0) || p.phase != workloadsv1.WorkloadStatus_PHASE_EXITED || p.next != time.Second {
		t.Fatalf("crashed single container: %+v", p)
	}
	// Restarts back off: 1 s, then 2 s, 4 s…
	h.advance(p, time.Second)
	h.advance(p, 3*time.Second)
	if p.restarts != 2 || p.next != 7*time.Second {
		t.Fatalf("after two restarts: %+v", p)
	}
	w := &simWorkloads{pods: map[string]*simPod{"w": p}}
	r := w.report()
	if c := r.Workloads[0].Containers[0]; c.ExitCode != SimulatedExitCode || c.Restarts != 2 || c.State != "exited" {
		t.Fatalf("report %v", r)
	}
}
