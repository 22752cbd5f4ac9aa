package agent_test

import (
	"context"
	"errors"
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
