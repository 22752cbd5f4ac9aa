package sim

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// fakeHosts is a token endpoint, a HostService and a Monitor in one: it
// issues short-lived tokens, answers heartbeats with a 1 s interval, asks
// one host for a reboot, and counts a host "No Connection" once it was
// silent for timeout.
type fakeHosts struct {
	hostv1connect.UnimplementedHostServiceHandler
	timeout time.Duration

	mu      sync.Mutex
	tokens  map[string]string // token → host
	fetches int
	seen    map[string]time.Time
	results []*hostv1.ActionResult
}

const (
	fakeActionHost  = "host-00000003"
	fakeRevokedHost = "host-00000007"
)

func (f *fakeHosts) token(w http.ResponseWriter, r *http.Request) {
	id, _ := strings.CutPrefix(r.FormValue("client_id"), "edgenode-")
	w.Header().Set("Content-Type", "application/json")
	if id == fakeRevokedHost || r.FormValue("client_secret") != "secret-"+id {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	f.mu.Lock()
	f.fetches++
	tok := fmt.Sprintf("tok-%s-%d", id, f.fetches)
	f.tokens[tok] = id
	f.mu.Unlock()
	// Two seconds: the nodes refresh every other heartbeat.
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":2}`, tok)
}

func (f *fakeHosts) Heartbeat(ctx context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.tokens[strings.TrimPrefix(req.Header().Get("Authorization"), "Bearer ")]
	if !ok {
		return nil, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("unknown token"))
	}
	f.seen[id] = time.Now()
	out := &hostv1.HeartbeatResponse{IntervalSeconds: 1}
	if r := req.Msg.ActionResult; r != nil {
		f.results = append(f.results, r)
	}
	if id == fakeActionHost && len(f.results) == 0 {
		out.Action = &hostv1.HostAction{Id: "act-1", Kind: hostv1.HostAction_KIND_REBOOT}
	}
	return connect.NewResponse(out), nil
}

func (f *fakeHosts) NoConnectionIDs(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, at := range f.seen {
		if time.Since(at) > f.timeout {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (f *fakeHosts) NoConnection(ctx context.Context) (int, error) {
	ids, err := f.NoConnectionIDs(ctx)
	return len(ids), err
}

func TestHold(t *testing.T) {
	f := &fakeHosts{timeout: 2500 * time.Millisecond, tokens: map[string]string{}, seen: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", f.token)
	mux.Handle(hostv1connect.NewHostServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	var pool []*http.Client
	for range 2 {
		hc, err := agent.Dial(srv.URL, ca)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		pool = append(pool, hc)
	}

	o := Options{URL: srv.URL, Seed: 1, Now: time.Now, Hold: 6500 * time.Millisecond, StopShare: 0.5, StopAfter: 2 * time.Second,
		Workers: 4, Monitor: f, CheckEvery: time.Second, FlagTimeout: f.timeout, Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}}
	h := newHolder(o, pool)
	h.start(context.Background())
	for i := range 11 {
		id := fmt.Sprintf("host-%08d", i)
		h.add(i, i%2, agent.Result{HostID: id, ClientID: "edgenode-" + id, ClientSecret: "secret-" + id}, time.Second)
	}
	rep := h.hold(context.Background())

	var names []string
	for _, p := range rep.Phases {
		names = append(names, p.Name)
	}
	if want := []string{PhaseDay0, PhaseSettle, PhaseSteady, PhaseStopped}; !slices.Equal(names, want) {
		t.Fatalf("phases: got %v, want %v", names, want)
	}
	steady := rep.Phases[2]
	if steady.Latency.Count == 0 || steady.Latency.Errors != 0 || steady.Nodes != 10 || steady.Rate <= 0 {
		t.Errorf("steady phase: got %+v, want heartbeats of 10 nodes without errors", steady)
	}
	if rep.Nodes != 11 || rep.Revoked != 1 || rep.IntervalSeconds != 1 {
		t.Errorf("got %d nodes, %d revoked, interval %vs; want 11, 1, 1s", rep.Nodes, rep.Revoked, rep.IntervalSeconds)
	}
	// Every live node fetched a token and refreshed it at least once.
	if rep.Tokens.Count < 20 || rep.Tokens.Errors != 1 {
		t.Errorf("tokens: got %+v, want ≥ 20 fetched and the revoked node's error", rep.Tokens)
	}
	d := rep.Detection
	if d == nil {
		t.Fatal("no detection report")
	}
	if d.Stopped != 5 || !d.Met || d.Flagged != 5 || d.FalsePositives != 0 || d.Missed != 0 || rep.FalseNoConnection != 0 {
		t.Errorf("detection: got %+v, false No Connection %d; want 5 stopped, flagged, no false one", d, rep.FalseNoConnection)
	}
	if d.AllFlaggedSeconds < 1 || d.AllFlaggedSeconds > d.BarSeconds || d.LastBeatSeconds > 0.5 {
		t.Errorf("detection: all flagged after %vs (bar %vs), last beat %+vs: want after the silence, within the bar", d.AllFlaggedSeconds, d.BarSeconds, d.LastBeatSeconds)
	}
	if p := rep.Phases[3]; p.Checks < 3 || p.MaxNoConnection != 5 || p.Nodes != 5 {
		t.Errorf("stopped phase: got %+v, want checks every second, 5 flagged, 5 nodes left", p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.results) == 0 || f.results[0].Id != "act-1" || f.results[0].State != hostv1.ActionResult_STATE_FAILED {
		t.Errorf("action results: got %v, want act-1 FAILED", f.results)
	}
}
