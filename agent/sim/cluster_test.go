package sim

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// fakeClusters is a minimal clusters server: tokens, heartbeats naming
// each host's cluster version, GetPlan answering the version's plan or
// removal, and ReportStatus recording each host's states.
type fakeClusters struct {
	hostv1connect.UnimplementedHostServiceHandler
	clusterv1connect.UnimplementedClusterServiceHandler

	mu      sync.Mutex
	tokens  map[string]string // token → host
	n       int
	version string
	answer  *clusterv1.GetPlanResponse
	states  map[string][]string // host → "STATE version"
	msgs    map[string]string   // host → the last message
	addrs   map[string]string   // host → the address of its inventory
	beats   map[string]string   // host → the hardware digest of its last heartbeat
}

func (f *fakeClusters) ReportHardware(_ context.Context, req *connect.Request[hostv1.ReportHardwareRequest]) (*connect.Response[hostv1.ReportHardwareResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.states[id]) > 0 {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("inventory after a cluster report"))
	}
	var addrs []string
	for _, n := range req.Msg.GetHardware().GetNics() {
		for _, a := range n.GetIpAddresses() {
			addrs = append(addrs, a.GetAddress())
		}
	}
	f.addrs[id] = strings.Join(addrs, ",")
	return connect.NewResponse(&hostv1.ReportHardwareResponse{Digest: "hw-" + id}), nil
}

func (f *fakeClusters) token(w http.ResponseWriter, r *http.Request) {
	id, _ := strings.CutPrefix(r.FormValue("client_id"), "edgenode-")
	f.mu.Lock()
	f.n++
	tok := fmt.Sprintf("tok-%s-%d", id, f.n)
	f.tokens[tok] = id
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":900}`, tok)
}

func (f *fakeClusters) host(h http.Header) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.tokens[strings.TrimPrefix(h.Get("Authorization"), "Bearer ")]
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("unknown token"))
	}
	return id, nil
}

func (f *fakeClusters) Heartbeat(_ context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats[id] = req.Msg.HardwareDigest
	return connect.NewResponse(&hostv1.HeartbeatResponse{IntervalSeconds: 1, ClusterVersion: f.version}), nil
}

func (f *fakeClusters) GetPlan(_ context.Context, req *connect.Request[clusterv1.GetPlanRequest]) (*connect.Response[clusterv1.GetPlanResponse], error) {
	if _, err := f.host(req.Header()); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Msg.Version == f.answer.Version {
		return connect.NewResponse(&clusterv1.GetPlanResponse{Version: f.version, Unchanged: true}), nil
	}
	return connect.NewResponse(f.answer), nil
}

func (f *fakeClusters) ReportStatus(_ context.Context, req *connect.Request[clusterv1.ReportStatusRequest]) (*connect.Response[clusterv1.ReportStatusResponse], error) {
	id, err := f.host(req.Header())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[id] = append(f.states[id], strings.TrimPrefix(req.Msg.State.String(), "STATE_")+" "+req.Msg.PlanVersion)
	f.msgs[id] = req.Msg.Message
	return connect.NewResponse(&clusterv1.ReportStatusResponse{}), nil
}

func (f *fakeClusters) script(version string, a *clusterv1.GetPlanResponse) {
	f.mu.Lock()
	f.version, f.answer, f.states = version, a, map[string][]string{}
	f.mu.Unlock()
}

// settled returns each host's states once every host's last one is
// final, or nil.
func (f *fakeClusters) settled(hosts int, final ...string) map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.states) < hosts {
		return nil
	}
	for _, s := range f.states {
		if !slices.ContainsFunc(final, func(p string) bool { return strings.HasPrefix(s[len(s)-1], p) }) {
			return nil
		}
	}
	out := map[string][]string{}
	for k, v := range f.states {
		out[k] = slices.Clone(v)
	}
	return out
}

func waitFor[T any](t *testing.T, what string, f func() T, ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v := f()
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Simulated cluster nodes go through the agent's states with the
// simulated durations: installs (the faulty ones end in ERROR with a
// message and are not retried before the retry wait), an upgrade, and a
// removal — the nodes that never installed just say INACTIVE.
func TestClusterNodes(t *testing.T) {
	f := &fakeClusters{tokens: map[string]string{}, states: map[string][]string{}, msgs: map[string]string{}, addrs: map[string]string{}, beats: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", f.token)
	mux.Handle(hostv1connect.NewHostServiceHandler(f))
	mux.Handle(clusterv1connect.NewClusterServiceHandler(f))
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

	const nodes = 12
	install := Range{100 * time.Millisecond, 300 * time.Millisecond}
	o := Options{URL: srv.URL, Seed: 7, Now: time.Now, Workers: 4,
		ClusterInstall: install, ClusterUpgrade: Range{50 * time.Millisecond, 100 * time.Millisecond},
		ClusterRemoval: Range{50 * time.Millisecond, 100 * time.Millisecond}, ClusterFailShare: 0.25, ClusterRetry: time.Hour,
		Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond}}
	plan := func(v, kube string) *clusterv1.GetPlanResponse {
		return &clusterv1.GetPlanResponse{Version: v, Plan: &clusterv1.Plan{ClusterName: "c", Role: clusterv1.Plan_ROLE_ALL,
			Distribution: "k3s", KubernetesVersion: kube, Init: true, JoinToken: "secret",
			Artifacts: []*clusterv1.Artifact{{Kind: clusterv1.Artifact_KIND_BINARY, Name: "k3s", Url: "/boot/artifacts/k3s"}}}}
	}
	f.script("v1", plan("v1", "v1.33.5+k3s1"))
	h := newHolder(o, []*http.Client{hc})
	h.start(context.Background())
	for i := range nodes {
		id := fmt.Sprintf("host-%08d", i)
		h.add(i, 0, agent.Result{HostID: id, ClientID: "edgenode-" + id, ClientSecret: "s"}, time.Second)
	}

	got := waitFor(t, "installs", func() map[string][]string { return f.settled(nodes, "ACTIVE", "ERROR") },
		func(m map[string][]string) bool { return m != nil })
	var active, failed []string
	for id, s := range got {
		switch {
		case slices.Equal(s, []string{"REGISTERING v1", "INSTALL_IN_PROGRESS v1", "ACTIVE v1"}):
			active = append(active, id)
		case slices.Equal(s, []string{"REGISTERING v1", "INSTALL_IN_PROGRESS v1", "ERROR v1"}):
			failed = append(failed, id)
			if m := f.msgs[id]; !strings.Contains(m, "not Ready") {
				t.Errorf("%s: ERROR message %q", id, m)
			}
		default:
			t.Errorf("%s: states %q", id, s)
		}
	}
	if len(failed) == 0 || len(active) == 0 {
		t.Fatalf("%d active, %d failed: want some of each with a fail share of 0.25", len(active), len(failed))
	}
	// Before its first report, each node sent an inventory with an
	// address of its own (others join a control-plane node there), and its
	// heartbeats carry the inventory's digest after.
	f.mu.Lock()
	seen := map[string]bool{}
	for id := range got {
		a := f.addrs[id]
		if ip, _, err := net.ParseCIDR(a); err != nil || !ip.IsGlobalUnicast() || !strings.HasPrefix(a, "10.") || seen[a] {
			t.Errorf("%s: inventory address %q, want one 10.x.y.z/8 of its own", id, a)
		}
		seen[a] = true
	}
	f.mu.Unlock()
	waitFor(t, "heartbeats with the inventory's digest", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for id := range got {
			if f.beats[id] != "hw-"+id {
				return false
			}
		}
		return true
	}, func(ok bool) bool { return ok })

	// The upgrade: the active nodes upgrade; the faulty ones try the new
	// version at once (the retry's wait is for the same version) and fail
	// again.
	f.script("v2", plan("v2", "v1.34.1+k3s1"))
	got = waitFor(t, "upgrades", func() map[string][]string { return f.settled(nodes, "ACTIVE", "ERROR") },
		func(m map[string][]string) bool { return m != nil })
	for _, id := range active {
		if s := got[id]; !slices.Equal(s, []string{"REGISTERING v2", "INSTALL_IN_PROGRESS v2", "ACTIVE v2"}) {
			t.Errorf("%s: upgrade states %q", id, s)
		}
	}
	for _, id := range failed {
		if s := got[id]; !slices.Equal(s, []string{"REGISTERING v2", "INSTALL_IN_PROGRESS v2", "ERROR v2"}) {
			t.Errorf("failed node %s: states %q", id, s)
		}
	}

	// The removal.
	f.script("v3", &clusterv1.GetPlanResponse{Version: "v3", Removal: &clusterv1.Removal{Drain: true}})
	got = waitFor(t, "removals", func() map[string][]string { return f.settled(nodes, "INACTIVE") },
		func(m map[string][]string) bool { return m != nil })
	for _, id := range active {
		if s := got[id]; !slices.Equal(s, []string{"DEREGISTERING v3", "UNINSTALL_IN_PROGRESS v3", "INACTIVE "}) {
			t.Errorf("%s: removal states %q", id, s)
		}
	}
	for _, id := range failed {
		if s := got[id]; !slices.Equal(s, []string{"INACTIVE "}) {
			t.Errorf("%s never installed: removal states %q", id, s)
		}
	}
	// The server has every node's last report; the simulator takes its
	// answer a moment later: closed before, a node's last call would be
	// cut (an error) and it would end busy.
	waitFor(t, "the simulator's own view of the removals", h.clusterReport, func(r *ClusterReport) bool {
		return r != nil && r.Final["INACTIVE"] == nodes && r.Busy == 0
	})
	h.close()
	rep := h.report(context.Background()).Clusters
	if rep == nil || rep.Nodes != nodes || rep.Faulty == 0 || rep.Final["INACTIVE"] != nodes || rep.Busy != 0 {
		t.Fatalf("cluster report %+v", rep)
	}
	if j := rep.Jobs["install"]; j.Count != int64(len(active)) || j.P50 < float64(install.Min.Milliseconds()) {
		t.Errorf("install jobs %+v: want %d taking at least %v", j, len(active), install.Min)
	}
	if rep.Jobs["upgrade"].Count != int64(len(active)) || rep.Jobs["removal"].Count != nodes || rep.Calls.Errors != 0 {
		t.Errorf("jobs %+v, calls %+v", rep.Jobs, rep.Calls)
	}
	if rep.Reports["ACTIVE"] != 2*len(active) || rep.Reports["INACTIVE"] != nodes {
		t.Errorf("reports %v", rep.Reports)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		err  bool
	}{
		{"5s-20s", Range{5 * time.Second, 20 * time.Second}, false},
		{"10s", Range{10 * time.Second, 10 * time.Second}, false},
		{"20s-5s", Range{}, true},
		{"x", Range{}, true},
		{"1s-", Range{}, true},
	} {
		got, err := ParseRange(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
