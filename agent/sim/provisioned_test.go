package sim

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// serveFakeHosts serves f over TLS until the test ends and returns its URL
// and CA certificate.
func serveFakeHosts(t *testing.T, f *fakeHosts) (url, ca string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", f.token)
	mux.Handle(hostv1connect.NewHostServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

func provisionedNodes(ids ...int) []ProvisionedNode {
	var nodes []ProvisionedNode
	for i, n := range ids {
		id := fmt.Sprintf("host-%08d", n)
		nodes = append(nodes, ProvisionedNode{HostID: id, Project: "p", ClientID: "edgenode-" + id, ClientSecret: "secret-" + id, Line: i + 1})
	}
	return nodes
}

// Nodes provisioned before the run go straight to heartbeats: no Day 0,
// the first heartbeats within one interval, then the hold as after Day 0.
func TestRunProvisioned(t *testing.T) {
	f := &fakeHosts{timeout: 2500 * time.Millisecond, tokens: map[string]string{}, seen: map[string]time.Time{}}
	url, ca := serveFakeHosts(t, f)
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Options{URL: url, CA: ca, Nodes: provisionedNodes(10, 11, 12, 13, 14, 15, 16, 17),
		Connections: 2, Seed: 1, Hold: 5 * time.Second, StopShare: 0.5, StopAfter: 1500 * time.Millisecond, Workers: 4,
		Monitor: f, CheckEvery: time.Second, FlagTimeout: f.timeout, Deadline: time.Now().Add(10 * time.Second),
		Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Seeded || rep.Nodes != 8 || rep.Final[OutcomeRunning] != 8 || len(rep.Phases) != 0 {
		t.Errorf("report: got seeded %v, %d nodes, final %v, Day-0 phases %v; want seeded, 8 running, none", rep.Seeded, rep.Nodes, rep.Final, rep.Phases)
	}
	if !strings.Contains(progress.String(), "8 provisioned nodes: the first heartbeat answered after") {
		t.Errorf("progress: got %q, want the first heartbeat's line", progress.String())
	}
	h := rep.Hold
	var names []string
	for _, p := range h.Phases {
		names = append(names, p.Name)
	}
	if want := []string{PhaseSettle, PhaseSteady, PhaseStopped}; !slices.Equal(names, want) {
		t.Fatalf("phases: got %v, want %v", names, want)
	}
	// Settle is one interval (1 s), over which the first heartbeats
	// spread; after it every node heartbeats.
	if p := h.Phases[0]; p.Latency.Count == 0 || p.Latency.Errors != 0 {
		t.Errorf("settle phase: got %+v, want first heartbeats without errors", p)
	}
	if p := h.Phases[1]; p.Nodes != 8 || p.Latency.Errors != 0 {
		t.Errorf("steady phase: got %+v, want 8 nodes heartbeating without errors", p)
	}
	if h.Nodes != 8 || h.Revoked != 0 || h.IntervalSeconds != 1 || h.FalseNoConnection != 0 {
		t.Errorf("hold: got %d nodes, %d revoked, interval %vs, %d false No Connection; want 8, 0, 1 s, 0", h.Nodes, h.Revoked, h.IntervalSeconds, h.FalseNoConnection)
	}
	if d := h.Detection; d == nil || d.Stopped != 4 || !d.Met || d.FalsePositives != 0 || d.Missed != 0 {
		t.Errorf("detection: got %+v, want the 4 stopped flagged and no other", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 8 {
		t.Errorf("hosts heard from: got %d, want 8", len(f.seen))
	}
}

// A first node whose credentials the server refuses ends the run at once:
// the nodes file is not of that server.
func TestRunProvisionedRefused(t *testing.T) {
	f := &fakeHosts{timeout: time.Second, tokens: map[string]string{}, seen: map[string]time.Time{}}
	url, ca := serveFakeHosts(t, f)
	_, err := Run(context.Background(), Options{URL: url, CA: ca, Nodes: provisionedNodes(7, 8), Hold: time.Minute,
		Deadline: time.Now().Add(time.Minute)})
	if err == nil || !strings.Contains(err.Error(), "host host-00000007 (line 1): the server refused its credentials") {
		t.Fatalf("got error %v, want the first node's credentials refused", err)
	}
}

// A server that never answers ends the run at the deadline, with why.
func TestRunProvisionedNoAnswer(t *testing.T) {
	f := &fakeHosts{timeout: time.Second, tokens: map[string]string{}, seen: map[string]time.Time{}}
	url, ca := serveFakeHosts(t, f)
	nodes := provisionedNodes(1)
	nodes[0].ClientSecret = "wrong"
	nodes[0].TokenURL = url + "/no-such-endpoint"
	_, err := Run(context.Background(), Options{URL: url, CA: ca, Nodes: nodes, Hold: time.Minute,
		Deadline: time.Now().Add(time.Second), Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "no heartbeat of host host-00000001 (line 1) answered (context deadline exceeded); errors: token endpoint: HTTP 404") {
		t.Fatalf("got error %v, want no answer by the deadline and the token endpoint's 404", err)
	}
}
