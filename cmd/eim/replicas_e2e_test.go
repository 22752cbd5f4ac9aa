package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/tcplb"
)

// The replica chaos test: seven "eim server" processes on one PostgreSQL,
// in three groups behind round-robin proxies — three of the API, three of
// the modules nodes call (onboarding, provisioning, host, maintenance,
// telemetry), one of the rest (os) — while a fleet of simulated nodes goes
// through zero-touch Day 0 and then heartbeats. One process of each group
// is SIGKILLed during Day 0 and again during the heartbeats, and started
// again. At the end every node must be RUNNING, provisioned once, with one
// host and one instance each; no host may ever have been "No Connection"
// but the ones that stopped, and those within their timeout plus one lease
// period.

const (
	chaosNodes    = 48
	chaosInterval = 4 * time.Second
	chaosTimeout  = 3 * chaosInterval // the server's default: three intervals
	chaosLease    = 10 * time.Second  // the default: the bound is claimed at the defaults' proportions
)

// replica is one "eim server" child process that can be killed and started
// again on the same addresses.
type replica struct {
	name    string
	args    []string
	agent   bool // it has an agent listener
	logFile string
	starts  int
	child
	http    string // host:port
	agentAt string // host:port
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	r.starts++
	httpAddr, agentAddr := "127.0.0.1:0", "127.0.0.1:0"
	if r.http != "" {
		httpAddr = r.http
	}
	if r.agentAt != "" {
		agentAddr = r.agentAt
	}
	args := append([]string{"server", "--http-addr", httpAddr, "--agent-addr", agentAddr, "--replica-id", fmt.Sprintf("%s-%d", r.name, r.starts)}, r.args...)
	var h, a []string
	r.child = startChild(t, r.logFile, fmt.Sprintf("%s start %d", r.name, r.starts), args, func(out string) bool {
		h, a = httpLineRE.FindStringSubmatch(out), agentsRE.FindStringSubmatch(out)
		return h != nil && (a != nil || !r.agent)
	})
	r.http = strings.TrimPrefix(h[1], "http://")
	if a != nil {
		r.agentAt = strings.TrimPrefix(a[1], "https://")
	}
}

// newRRProxy starts a round-robin TCP proxy (the plain layer-4 load
// balancer in front of a group of replicas) for the test.
func newRRProxy(t *testing.T, backends func() []string) *tcplb.Proxy {
	t.Helper()
	p, err := tcplb.Listen("127.0.0.1:0", backends)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// noConnectionMonitor counts the project's hosts "No Connection" through
// the API.
type noConnectionMonitor struct {
	cl      *client.Client
	project string
}

func (m noConnectionMonitor) NoConnection(ctx context.Context) (int, error) {
	ids, err := m.NoConnectionIDs(ctx)
	return len(ids), err
}

func (m noConnectionMonitor) NoConnectionIDs(ctx context.Context) ([]string, error) {
	hosts, _, err := client.ListOf[eim.Host](ctx, m.cl, m.project, client.ListOptions{Filter: `hostStatus="No Connection"`, PageSize: 100})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(hosts))
	for i, h := range hosts {
		ids[i] = h.ResourceID
	}
	return ids, nil
}

func TestReplicaChaosPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs seven server processes and kills six of them")
	}
	dsn := freshPostgres(t)
	base := t.TempDir()
	dataDir, bootDir := filepath.Join(base, "data"), filepath.Join(base, "boot")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := []byte("a tiny disk image\n")
	if err := os.WriteFile(filepath.Join(bootDir, "os.img"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--database", dsn, "--data-dir", dataDir, "--boot-artifacts", bootDir, "--log-level", "warn", "--rate-limit", "0",
		"--lease-ttl", chaosLease.String(), "--heartbeat-interval", chaosInterval.String(),
		// Seven processes share the test server with other packages' tests.
		"--database-max-conns", "4"}

	var mu sync.Mutex // guards the replicas' addresses, read by the proxies
	addrsOf := func(rs []*replica, agent bool) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for _, r := range rs {
				a := r.http
				if agent {
					a = r.agentAt
				}
				if a != "" {
					out = append(out, a)
				}
			}
			return out
		}
	}
	group := func(name string, n int, agent bool, extra ...string) []*replica {
		var rs []*replica
		for i := range n {
			rs = append(rs, &replica{name: fmt.Sprintf("%s%d", name, i+1), agent: agent,
				args: append(append([]string{}, common...), extra...), logFile: filepath.Join(base, fmt.Sprintf("%s%d.log", name, i+1))})
		}
		return rs
	}
	apis := group("api", 3, false, "--modules", "api")
	nodeMods := group("south", 3, true, "--modules", "onboarding,provisioning,host,maintenance,telemetry")
	rest := group("rest", 1, false, "--modules", "os")
	apiLB := newRRProxy(t, addrsOf(apis, false))
	agentLB := newRRProxy(t, addrsOf(nodeMods, true))
	bootLB := newRRProxy(t, addrsOf(nodeMods, false))
	for _, r := range nodeMods {
		r.args = append(r.args, "--agent-url", "https://"+agentLB.Addr())
	}
	all := append(append(append([]*replica{}, apis...), nodeMods...), rest...)
	t.Cleanup(func() {
		for _, r := range all {
			r.kill()
		}
		if t.Failed() {
			for _, r := range all {
				b, _ := os.ReadFile(r.logFile)
				t.Logf("%s output (%d starts):\n%s", r.name, r.starts, b)
			}
		}
	})
	// One after the other: the first API process creates the signing key,
	// the admin token and the default project; the first node-side one
	// the agent CA.
	for _, r := range all {
		mu.Lock()
		r.start(t)
		mu.Unlock()
	}
	restart := func(rs ...*replica) {
		for _, r := range rs {
			r.kill()
		}
		time.Sleep(time.Second)
		for _, r := range rs {
			mu.Lock()
			r.start(t)
			mu.Unlock()
		}
	}

	ctx := context.Background()
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	admin := client.New("http://"+apiLB.Addr(), tok, nil)
	// The modules' processes announce themselves within a refresh of the
	// API's view: until then an OS profile is refused (501).
	var osRes eim.OS
	sum := sha256.Sum256(img)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := admin.Create(ctx, eim.DefaultProject, eim.KindOS, map[string]string{
			"name": "tiny-os", "profileName": "tiny-os", "imageUrl": "http://" + bootLB.Addr() + "/boot/artifacts/os.img", "sha256": hex.EncodeToString(sum[:]),
		}, &osRes)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create the OS: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Zero-touch: hosts registered without instances get one from the
	// onboarding module's reconciler (run once, under a lease).
	if _, err := admin.UpdateProjectSettings(ctx, eim.DefaultProject, client.SettingsChange{DefaultOSID: &osRes.ResourceID}); err != nil {
		t.Fatal(err)
	}
	ids := sim.Generate(chaosNodes, 21)
	hostIDs, err := sim.Registration{Client: admin, Project: eim.DefaultProject}.Register(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}

	var simLog syncBuffer
	const hold, stopAfter = 45 * time.Second, 15 * time.Second
	flagBar := chaosTimeout + chaosLease
	fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ca := string(must(os.ReadFile(filepath.Join(dataDir, "ca.crt"))))
	repc := make(chan *sim.Report, 1)
	go func() {
		rep, err := sim.Run(fctx, sim.Options{
			URL: "https://" + agentLB.Addr(), CA: ca, Identities: ids,
			Connections: 6, ActionTime: 100 * time.Millisecond, RebootShare: 0.25, Seed: 21,
			Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond},
			Logger:  slog.New(slog.NewTextHandler(&simLog, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Hold:    hold, StopShare: 0.25, StopAfter: stopAfter,
			Monitor: noConnectionMonitor{cl: admin, project: eim.DefaultProject}, CheckEvery: 250 * time.Millisecond,
			FlagTimeout: flagBar,
		})
		if err != nil {
			fmt.Fprintf(&simLog, "simulator: %v\n", err)
		}
		repc <- rep
	}()
	ks := &killServer{admin: admin}
	kills := 0
	// Day 0: one process of each group killed as nodes are discovered, and
	// one of the first two groups again as they report in.
	c := ks.waitCounts(t, "a quarter of the nodes discovered", eim.DefaultProject, func(c fleetCounts) bool { return c.discovered+c.inProgress >= chaosNodes/4 })
	restart(apis[0], nodeMods[0], rest[0])
	kills += 3
	t.Logf("killed api1, south1, rest1 during Day 0 (%v)", c)
	c = ks.waitCounts(t, "half of the nodes running", eim.DefaultProject, func(c fleetCounts) bool { return c.running >= chaosNodes/2 })
	restart(apis[1], nodeMods[1])
	kills += 2
	t.Logf("killed api2, south2 as nodes reported in (%v)", c)
	// Heartbeats: every node running; one of each group killed a few
	// seconds in, and a node-side one again as a quarter of the nodes
	// stop (its share of their watch must be taken over).
	ks.waitCounts(t, "every node running", eim.DefaultProject, func(c fleetCounts) bool { return c.running == chaosNodes })
	holdStart := time.Now()
	time.Sleep(4 * time.Second)
	restart(apis[2], nodeMods[2], rest[0])
	kills += 3
	t.Logf("killed api3, south3, rest1 during the heartbeats")
	time.Sleep(time.Until(holdStart.Add(stopAfter)))
	restart(nodeMods[0])
	kills++
	t.Logf("killed south1 as a quarter of the nodes stopped")

	var rep *sim.Report
	select {
	case rep = <-repc:
	case <-time.After(3 * time.Minute):
		t.Fatal("the fleet did not finish")
	}
	if rep == nil {
		t.Fatalf("the simulator did not run: %s", simLog.String())
	}
	if t.Failed() || rep.Final[sim.OutcomeRunning] != chaosNodes || rep.Unexpected != 0 {
		t.Logf("agents' warnings and errors:\n%s", simLog.String())
	}
	wantReport(t, rep, chaosNodes, 0)

	// Nothing twice: one host and one instance per node, one workflow
	// attempt each, created once.
	hosts, page, err := client.ListOf[eim.Host](ctx, admin, eim.DefaultProject, client.ListOptions{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	insts, ipage, err := client.ListOf[eim.Instance](ctx, admin, eim.DefaultProject, client.ListOptions{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	perHost := map[string]int{}
	for _, in := range insts {
		if in.Host != nil {
			perHost[in.Host.ResourceID]++
		}
	}
	dup := 0
	for _, n := range perHost {
		if n > 1 {
			dup++
		}
	}
	if page.Total != chaosNodes || len(hosts) != chaosNodes || ipage.Total != chaosNodes || dup != 0 {
		t.Errorf("hosts %d, instances %d (hosts with more than one: %d); want %d of each, one per host", page.Total, ipage.Total, dup, chaosNodes)
	}
	checkProvisionedOnce(t, admin, eim.DefaultProject, hostIDs)

	h := rep.Hold
	if h == nil || !h.Monitored || h.Detection == nil {
		t.Fatalf("no monitored hold in the report: %+v", rep.Hold)
	}
	d := h.Detection
	t.Logf("replica chaos: %d processes, %d kills; %d nodes running, %d hosts, %d instances, duplicated 0; "+
		"heartbeating %d nodes, false No Connection %d; %d stopped, all flagged %.1f s after the last one's last heartbeat (bar: timeout %s + lease %s)",
		len(all), kills, rep.Final[sim.OutcomeRunning], page.Total, ipage.Total, h.Nodes, h.FalseNoConnection,
		d.Stopped, d.AllFlaggedSeconds-d.LastBeatSeconds, chaosTimeout, chaosLease)
	if h.FalseNoConnection != 0 {
		t.Errorf("%d hosts were \"No Connection\" that should not have been", h.FalseNoConnection)
	}
	// From the last heartbeat of a stopped node: the timeout counts from
	// a node's last heartbeat, and the last one flagged is at most the
	// last one heard.
	if since := d.AllFlaggedSeconds - d.LastBeatSeconds; d.Stopped == 0 || d.AllFlaggedSeconds < 0 || since > flagBar.Seconds() {
		t.Errorf("stopped nodes: %d, all flagged %.1f s after the last one's last heartbeat; want every one within %s", d.Stopped, since, flagBar)
	}
}
