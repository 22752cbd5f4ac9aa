package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// nodeFor returns a node of the scripted server s with a fake clock that
// the node's waits advance.
func nodeFor(t *testing.T, s *southbound) (*agent.Node, *fakeClock) {
	t.Helper()
	ca := newTestCA(t)
	if s.token == nil {
		s.token = func(int, string, string) (int, string) { return 200, "" }
	}
	if s.reportIn == nil {
		s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
			return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}, nil
		}
	}
	url := s.start(t, ca)
	client, err := agent.Dial(url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	return &agent.Node{
		Client: client, Rand: noJitter, Now: c.now, Wait: c.wait,
		Config: agent.NodeConfig{URL: url, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p"},
	}, c
}

// fakeClock advances by every wait and records them.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.waits = append(c.waits, d)
	return nil
}

// The node heartbeats at the server's interval; the hardware inventory goes
// when the server asks for it, then only when it changed (seen at the
// change check) or the full-report interval passed; the heartbeat carries
// the accepted digest.
func TestNodeHeartbeatAndHardware(t *testing.T) {
	s := &southbound{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var digests []string
	s.heartbeat = func(n int, req *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		mu.Lock()
		digests = append(digests, req.HardwareDigest)
		mu.Unlock()
		if n == 40 {
			cancel()
		}
		return &hostv1.HeartbeatResponse{IntervalSeconds: 30, SendHardware: req.HardwareDigest == "", HardwareIntervalSeconds: 3600}, nil
	}
	var sent []*hostv1.Hardware
	s.hardware = func(n int, req *hostv1.ReportHardwareRequest) (*hostv1.ReportHardwareResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, req.Hardware)
		return &hostv1.ReportHardwareResponse{Digest: "sha256:" + req.Hardware.Hostname}, nil
	}
	n, clock := nodeFor(t, s)
	n.HardwareCheck = 5 * time.Minute
	collections := 0
	n.Hardware = func(context.Context) (*hostv1.Hardware, error) {
		collections++
		name := "a"
		if clock.now().After(time.Date(2026, 11, 23, 12, 7, 0, 0, time.UTC)) {
			name = "b" // the hostname changed after 7 minutes
		}
		return &hostv1.Hardware{Hostname: name}, nil
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	// 40 heartbeats 30 s apart: 19.5 minutes. Reports: at the start (asked)
	// and after the change (seen at the 10-minute check).
	if len(sent) != 2 || sent[0].Hostname != "a" || sent[1].Hostname != "b" {
		t.Fatalf("sent %v, want a then b", sent)
	}
	if collections < 4 || collections > 6 {
		t.Errorf("collected %d times in 20 minutes, want about every 5 minutes", collections)
	}
	if digests[0] != "" || digests[1] != "sha256:a" || digests[39] != "sha256:b" {
		t.Errorf("digests %v", digests)
	}
	for _, w := range clock.waits[1:] {
		if w != 30*time.Second {
			t.Fatalf("waits %v, want 30 s each", clock.waits)
		}
	}
}

type recordActions struct {
	mu             sync.Mutex
	reboots, shuts int
	err            error
}

func (a *recordActions) Reboot(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reboots++
	return a.err
}

func (a *recordActions) Shutdown(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shuts++
	return a.err
}

// A reboot action is recorded in the state directory, reported STARTED,
// then carried out; the agent of the next boot, seeing the same action
// again, does not reboot again but reports it STARTED.
func TestNodeRebootOnce(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var results []*hostv1.ActionResult
	for boot := 1; boot <= 2; boot++ {
		s := &southbound{}
		ctx, cancel := context.WithCancel(t.Context())
		s.heartbeat = func(n int, req *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if req.ActionResult != nil {
				results = append(results, req.ActionResult)
				cancel()
				return &hostv1.HeartbeatResponse{IntervalSeconds: 10}, nil
			}
			return &hostv1.HeartbeatResponse{IntervalSeconds: 10, Action: &hostv1.HostAction{Kind: hostv1.HostAction_KIND_REBOOT, Id: "reboot-42"}}, nil
		}
		n, _ := nodeFor(t, s)
		acts := &recordActions{}
		n.Actions, n.StateDir = acts, dir
		if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("boot %d: Run = %v", boot, err)
		}
		cancel()
		want := 1
		if boot == 2 {
			want = 0
		}
		if acts.reboots != want {
			t.Fatalf("boot %d: %d reboots, want %d", boot, acts.reboots, want)
		}
	}
	if len(results) != 2 || results[0].Id != "reboot-42" || results[0].State != hostv1.ActionResult_STATE_STARTED || results[1].State != hostv1.ActionResult_STATE_STARTED {
		t.Fatalf("results %v, want reboot-42 STARTED twice", results)
	}
}

// A failed action, or one the agent cannot carry out, is reported FAILED
// with the reason, once.
func TestNodeActionFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actions agent.Actions
		want    string
	}{
		{"error", &recordActions{err: errors.New("systemctl poweroff: access denied")}, "systemctl poweroff: access denied"},
		{"no actions", nil, "this agent does not carry out host actions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &southbound{}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var failed *hostv1.ActionResult
			s.heartbeat = func(n int, req *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
				if r := req.ActionResult; r != nil && r.State == hostv1.ActionResult_STATE_FAILED {
					failed = r
					cancel()
					return &hostv1.HeartbeatResponse{}, nil
				}
				if n > 10 {
					cancel()
				}
				return &hostv1.HeartbeatResponse{Action: &hostv1.HostAction{Kind: hostv1.HostAction_KIND_SHUTDOWN, Id: "shutdown-7"}}, nil
			}
			n, _ := nodeFor(t, s)
			n.Actions = tc.actions
			n.Run(ctx)
			if failed == nil || failed.Id != "shutdown-7" || failed.Detail != tc.want {
				t.Fatalf("failure %v, want shutdown-7: %s", failed, tc.want)
			}
		})
	}
}

// Heartbeat errors back off; the heartbeat resumes at its interval.
func TestNodeHeartbeatBackoff(t *testing.T) {
	s := &southbound{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.heartbeat = func(n int, req *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		switch {
		case n <= 3:
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("not now"))
		case n == 5:
			cancel()
		}
		return &hostv1.HeartbeatResponse{IntervalSeconds: 10}, nil
	}
	n, clock := nodeFor(t, s)
	n.Backoff = agent.Backoff{Min: 2 * time.Second, Max: 32 * time.Second}
	n.Run(ctx)
	w := clock.waits
	if len(w) != 4 || w[0] < 2*time.Second || w[1] < 4*time.Second || w[2] < 8*time.Second || w[3] != 10*time.Second {
		t.Fatalf("waits %v, want 2, 4, 8 s (plus jitter) then 10 s", w)
	}
}
