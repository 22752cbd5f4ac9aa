package agent_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

func TestNodeReportsIn(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	s.token = func(n int, id, secret string) (int, string) {
		if id != "edgenode-host-1" || secret != "sec" {
			return 401, `{"error":"invalid_client"}`
		}
		if n == 1 {
			return 503, "overloaded"
		}
		return 200, ""
	}
	s.reportIn = func(n int) (*hostv1.ReportInResponse, error) {
		switch n {
		case 1:
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("restarting"))
		case 2:
			s.revokeTokens() // expired: the agent gets a new one
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("token expired"))
		}
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}, nil
	}
	url := s.start(t, ca)
	client, err := agent.Dial(url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var accepted int
	n := &agent.Node{
		Client: client, Wait: w.wait, Rand: noJitter,
		Config: agent.NodeConfig{URL: url, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p"},
		OnReportIn: func(*hostv1.ReportInResponse) {
			if accepted++; accepted == 2 {
				cancel()
			}
		},
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want canceled", err)
	}
	// token 503 → retry; ReportIn Unavailable → retry; Unauthenticated →
	// new token; then (a server without Heartbeat) ReportIn every 10 s.
	got := w.all()
	if len(got) < 4 || got[len(got)-1] != 10*time.Second || got[len(got)-2] != 10*time.Second {
		t.Errorf("waits = %v, want retries then 10 s heartbeats", got)
	}
	if accepted != 2 || s.calls("token") != 3 {
		t.Errorf("accepted %d report-ins with %d token requests; want 2, 3", accepted, s.calls("token"))
	}
}

// TestNodeHonoursTokenRetryAfter: a token endpoint that admits no more for
// now (a server back from a restart, its fleet asking at once) answers 503
// with a Retry-After; the node waits that long, plus a jitter of up to a
// quarter of it (at least a second), instead of its own short back-off.
func TestNodeHonoursTokenRetryAfter(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	busy := `{"error":"temporarily_unavailable","error_description":"too many token requests at once"}`
	s.token = func(n int, _, _ string) (int, string) {
		if n <= 2 {
			return http.StatusServiceUnavailable, busy
		}
		return http.StatusOK, ""
	}
	s.tokenRetryAfter = func(n int) string { return map[int]string{1: "7", 2: "3"}[n] }
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}, nil
	}
	url := s.start(t, ca)
	client, err := agent.Dial(url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n := &agent.Node{
		Client: client, Wait: w.wait, Rand: noJitter,
		Config:     agent.NodeConfig{URL: url, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p"},
		OnReportIn: func(*hostv1.ReportInResponse) { cancel() },
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want canceled", err)
	}
	got := w.all()
	if len(got) < 2 || got[0] < 7*time.Second || got[0] >= 7*time.Second+7*time.Second/4 || got[1] < 3*time.Second || got[1] >= 4*time.Second {
		t.Errorf("waits = %v, want 7 s (+ up to 1.75 s), then 3 s (+ up to 1 s)", got)
	}
	if s.calls("token") != 3 {
		t.Errorf("%d token requests, want 3", s.calls("token"))
	}
}

func TestParseRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{"7": 7 * time.Second, " 2 ": 2 * time.Second, "0.5": 500 * time.Millisecond,
		"": 0, "0": 0, "-3": 0, "soon": 0, "Wed, 21 Oct 2015 07:28:00 GMT": 0, "86400": 0} {
		if got := agent.ParseRetryAfter(v); got != want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// noJitter makes the ±10 % jitter of heartbeat waits zero.
func noJitter() float64 { return 0.5 }

func TestNodeCredentialsRevoked(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	s.token = func(int, string, string) (int, string) { return 401, `{"error":"invalid_client"}` }
	url := s.start(t, ca)
	client, _ := agent.Dial(url, ca.pem)
	n := &agent.Node{Client: client, Config: agent.NodeConfig{URL: url, ClientID: "c", ClientSecret: "s"}, Wait: (&waits{}).wait}
	if err := n.Run(t.Context()); !errors.Is(err, agent.ErrCredentialsRevoked) {
		t.Errorf("Run = %v, want ErrCredentialsRevoked", err)
	}
}

func TestNodeConfigRoundTrip(t *testing.T) {
	c := agent.NodeConfig{URL: "https://eim:8443", CACertPEM: "pem", ClientID: "edgenode-host-1", ClientSecret: "s", HostID: "host-1", Project: "p"}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m := configOf(t, b)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"caCertPem", "clientId", "clientSecret", "hostId", "project", "url"}; !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	p := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(p, b, 0o600)
	got, err := agent.LoadNodeConfig(p)
	if err != nil || got != c {
		t.Errorf("LoadNodeConfig = %+v, %v; want %+v", got, err, c)
	}
	os.WriteFile(p, []byte(`{"url":"https://x"}`), 0o600)
	if _, err := agent.LoadNodeConfig(p); err == nil {
		t.Error("config without credentials accepted")
	}
}

func TestNodeRefreshesTokenBeforeExpiry(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) { return &hostv1.ReportInResponse{}, nil }
	url := s.start(t, ca)
	client, _ := agent.Dial(url, ca.pem)
	now := time.Unix(1_700_000_000, 0)
	n := &agent.Node{Client: client, Config: agent.NodeConfig{URL: url, ClientID: "c", ClientSecret: "s"}, Now: func() time.Time { return now }}
	for _, step := range []struct {
		advance    time.Duration
		wantTokens int
	}{
		{0, 1},
		{11 * time.Minute, 1}, // the 900 s token is still fresh
		{time.Minute, 2},      // 12 min = 80% of its life: a new one
		{time.Minute, 2},
	} {
		now = now.Add(step.advance)
		if _, err := n.ReportIn(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := s.calls("token"); got != step.wantTokens {
			t.Errorf("after +%v: %d token requests, want %d", step.advance, got, step.wantTokens)
		}
	}
}
