package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// The Day 1 life of a node, end to end: the real server (Main) and the
// real node agent over HTTPS. A provisioned node heartbeats and is
// "Running" with its hardware in the API; stopped, it is "No Connection"
// within the timeout; started again, "Running"; a reboot asked through
// desiredPowerState reaches it in a heartbeat's answer and is done once.
func TestDay1SQLite(t *testing.T) {
	testDay1(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s"))
}

func TestDay1Postgres(t *testing.T) {
	testDay1(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s", "--database", freshPostgres(t)))
}

type e2eActions struct {
	mu      sync.Mutex
	reboots int
}

func (a *e2eActions) Reboot(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reboots++
	return nil
}
func (a *e2eActions) Shutdown(context.Context) error { return nil }
func (a *e2eActions) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reboots
}

// provision runs the micro-OS agent of a registered identity through its
// workflow to the reboot and returns the installed agent's configuration.
func (s *day0Server) provision(t *testing.T, hc *http.Client, id sim.Identity) agent.NodeConfig {
	t.Helper()
	p := &agent.Provisioner{Client: hc, URL: s.agentURL, Exec: &sim.Executor{},
		Identity: agent.Identity{UUID: id.UUID, Serial: id.Serial, Hostname: id.Hostname},
		Backoff:  agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := p.Run(ctx)
	if err != nil || !res.Rebooted {
		t.Fatalf("provisioner: got %+v, %v; want rebooted", res, err)
	}
	return agent.NodeConfig{URL: s.agentURL, ClientID: res.ClientID, ClientSecret: res.ClientSecret, TokenURL: res.TokenURL, HostID: res.HostID, Project: res.Project}
}

func testDay1(t *testing.T, s *day0Server) {
	ctx := t.Context()
	osID := s.createOS(t, eim.DefaultProject)
	id := sim.Generate(1, 11)[0]
	hostID := register(t, s, eim.DefaultProject, osID, []sim.Identity{id})[0]
	hc := s.agentClient(t)
	cfg := s.provision(t, hc, id)
	acts := &e2eActions{}
	stateDir := t.TempDir()
	hw := &hostv1.Hardware{Hostname: "edge-e2e", ProductName: "E2E Box",
		Cpu:  &hostv1.Cpu{Model: "Test CPU", Architecture: "x86_64", Sockets: 1, Cores: 4, Threads: 8},
		Nics: []*hostv1.Nic{{DeviceName: "eth0", MacAddress: "52:54:00:00:00:01", LinkUp: true, IpAddresses: []*hostv1.IpAddress{{Address: "192.0.2.50/24"}}}}}
	var beats atomic.Int64
	runNode := func() (stop func()) {
		nctx, cancel := context.WithCancel(ctx)
		n := &agent.Node{Client: hc, Config: cfg, Actions: acts, StateDir: stateDir,
			OnHeartbeat: func(*hostv1.HeartbeatResponse) { beats.Add(1) },
			Backoff:     agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second},
			Hardware:    func(context.Context) (*hostv1.Hardware, error) { return hw, nil }}
		done := make(chan error, 1)
		go func() { done <- n.Run(nctx) }()
		return func() {
			cancel()
			<-done
		}
	}
	host := func() map[string]any {
		var m map[string]any
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, hostID, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	status := func() string { return host()["hostStatus"].(string) }

	stop := runNode()
	waitFor(t, "the host Running with its hardware", func() bool {
		h := host()
		return h["hostStatus"] == "Running" && h["cpuModel"] == "Test CPU"
	})
	h := host()
	nics, _ := json.Marshal(h["hostNics"])
	var got []eim.HostNic
	if err := json.Unmarshal(nics, &got); err != nil || len(got) != 1 || len(got[0].IPAddresses) != 1 || got[0].IPAddresses[0].Address != "192.0.2.50/24" {
		t.Fatalf("hostNics %s (%v), want eth0 with 192.0.2.50/24", nics, err)
	}
	if h["cpuThreads"] != float64(8) || h["productName"] != "E2E Box" || h["hostStorages"] == nil {
		t.Fatalf("host %v", h)
	}

	// Stopped: "No Connection" within the 3 s timeout (plus the 1 s check).
	stop()
	stopped := time.Now()
	waitFor(t, "No Connection", func() bool { return status() == "No Connection" })
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("flagged %s after the node stopped, want about 3 s", took)
	}
	stop = runNode()
	waitFor(t, "Running again", func() bool { return status() == "Running" })

	// A reboot through the API.
	if err := s.admin.Patch(ctx, eim.DefaultProject, eim.KindHost, hostID, map[string]any{"desiredPowerState": "POWER_STATE_RESET"}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reboot carried out and recorded", func() bool {
		h := host()
		return acts.count() == 1 && h["currentPowerState"] == "POWER_STATE_RESET"
	})
	// The node "comes back" (a new agent, the same state directory): it
	// is Running and does not reboot again.
	stop()
	stop = runNode()
	defer stop()
	waitFor(t, "Running after the reboot", func() bool { return status() == "Running" })
	after := beats.Load()
	waitFor(t, "two more heartbeats", func() bool { return beats.Load() >= after+2 })
	if n := acts.count(); n != 1 {
		t.Fatalf("%d reboots, want 1", n)
	}

	// Networking: a second node of the same site reports the first one's
	// address; both addresses are flagged, through the API.
	var region, site map[string]any
	if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindRegion, map[string]any{"name": "eu"}, &region); err != nil {
		t.Fatal(err)
	}
	if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindSite, map[string]any{"name": "plant", "regionId": region["resourceId"]}, &site); err != nil {
		t.Fatal(err)
	}
	id2 := sim.Generate(1, 12)[0]
	host2 := register(t, s, eim.DefaultProject, osID, []sim.Identity{id2})[0]
	for _, h := range []string{hostID, host2} {
		if err := s.admin.Patch(ctx, eim.DefaultProject, eim.KindHost, h, map[string]any{"siteId": site["resourceId"]}, nil); err != nil {
			t.Fatal(err)
		}
	}
	n2 := &agent.Node{Client: hc, Config: s.provision(t, hc, id2),
		Hardware: func(context.Context) (*hostv1.Hardware, error) {
			return &hostv1.Hardware{Nics: []*hostv1.Nic{{DeviceName: "enp1s0", IpAddresses: []*hostv1.IpAddress{{Address: "192.0.2.50/24"}}}}}, nil
		}}
	n2ctx, n2cancel := context.WithCancel(ctx)
	n2done := make(chan error, 1)
	go func() { n2done <- n2.Run(n2ctx) }()
	defer func() { n2cancel(); <-n2done }()
	flagged := func(id, other string) bool {
		var h eim.Host
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, id, &h); err != nil {
			t.Fatal(err)
		}
		for _, nic := range h.HostNics {
			for _, ip := range nic.IPAddresses {
				if ip.Address == "192.0.2.50/24" && ip.Status == eim.IPAddressStatusConfigurationError && strings.Contains(ip.StatusDetail, other) {
					return true
				}
			}
		}
		return false
	}
	waitFor(t, "the duplicate address flagged on both hosts", func() bool {
		return flagged(host2, hostID) && flagged(hostID, host2)
	})
}
