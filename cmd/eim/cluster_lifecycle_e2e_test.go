package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// Issue 20's proof "cluster lifecycle through the API with simulated
// nodes", with real processes: the server (Main, as "eim server"),
// bench/seed writing eight running nodes into its store, and "eim-agent
// simulate" processes holding them as cluster nodes (docs/clusters-node.md)
// with heartbeats every second and installs, upgrades and removals of well
// under a second. Through the CLI and the v2 API: clusters created, a node
// added, an upgrade rolled a node at a time, a node removed with a drain and
// one forced, a node failing its install (a simulator whose nodes all fail)
// shown and retried, then healed; the clusters deleted and their hosts in a
// new cluster; and no host ever leaves "Running".
func TestClusterLifecycleSQLite(t *testing.T) {
	testClusterLifecycle(t, "")
}

func TestClusterLifecyclePostgres(t *testing.T) {
	testClusterLifecycle(t, freshPostgres(t))
}

// Simulated durations: short, so that every step is a heartbeat interval
// and a fraction of a second; the removal's drain (40 % of it) long enough
// for a poll to see the node draining.
const (
	simInstall = "300ms-800ms"
	simUpgrade = "300ms-800ms"
	simRemoval = "1s-1500ms"
	newKube    = "v1.34.1+k3s1"
)

func testClusterLifecycle(t *testing.T, database string) {
	if testing.Short() {
		t.Skip("builds bench/seed and eim-agent")
	}
	seedBin := buildTool(t, "github.com/eimhq/eim/bench/seed", "seed")
	agentBin := buildAgent(t)
	extra := []string{"--heartbeat-interval", "1s", "--heartbeat-timeout", "10s"}
	if database != "" {
		extra = append(extra, "--database", database)
	}
	s := startDay0(t, extra...)
	s.stop()
	s.hc.CloseIdleConnections()
	dir := t.TempDir()
	nodesFile := filepath.Join(dir, "nodes.jsonl")
	if database == "" {
		database = s.dataDir
	}
	out, err := exec.Command(seedBin, "--database", database, "--nodes", "8", "--out", nodesFile, "--seed", "20").CombinedOutput()
	noChildRace(t, "seed", out)
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	s.start(hostPort(t, s.api), hostPort(t, s.agentURL))
	ctx := context.Background()

	// Seven healthy nodes in one simulator; the eighth in another whose
	// installs all fail.
	hosts, lines := readNodesFile(t, nodesFile)
	goodFile, faultyFile := filepath.Join(dir, "good.jsonl"), filepath.Join(dir, "faulty.jsonl")
	writeLines(t, goodFile, lines[:7])
	writeLines(t, faultyFile, lines[7:])
	tokenFile := filepath.Join(s.dataDir, adminTokenFile)
	good := startSim(t, agentBin, s, goodFile, "--token-file", tokenFile, "--api", s.api, "--check-every", "1s", "--flag-timeout", "10s")
	faulty := startSim(t, agentBin, s, faultyFile, "--cluster-fail-share", "1", "--cluster-retry", "1s")
	h, bad := hosts[:7], hosts[7]

	// No host leaves "Running" while its node heartbeats, whatever its
	// cluster does: counted through the API every half second.
	running := watchRunning(t, s.admin, len(hosts))

	cli := cliRunner{t: t, url: s.api, tokenFile: tokenFile}
	w := &clusterWatch{t: t, cl: s.admin, seen: map[string][]string{}}

	// The tenant module gives the project its default templates.
	waitFor(t, "the default cluster template", func() bool {
		l, err := s.admin.ListClusterTemplates(ctx, eim.DefaultProject, client.ClusterQuery{})
		return err == nil && l.DefaultTemplateInfo != nil && l.DefaultTemplateInfo.Name == "baseline"
	})

	// Day 1: a three-node cluster (all, controlplane, worker), two
	// single-node ones and one on the faulty node.
	if got := strings.TrimSpace(cli.must("cluster", "create", "--name", "edge", "--node", h[0], "--node", h[1]+":controlplane", "--node", h[2]+":worker", "--label", "site=lab")); got != "edge" {
		t.Fatalf("cluster create: got %q, want edge", got)
	}
	for i, name := range []string{"solo-a", "solo-b"} {
		if _, err := s.admin.CreateCluster(ctx, eim.DefaultProject, &client.ClusterSpec{Name: name, Nodes: []client.ClusterNodeSpec{{ID: h[3+i], Role: "all"}}}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	cli.must("cluster", "create", "--name", "flaky", "--node", bad)
	for _, c := range []struct {
		name  string
		nodes []string
	}{{"edge", h[:3]}, {"solo-a", h[3:4]}, {"solo-b", h[4:5]}} {
		got := w.until(c.name, "ready", ready(c.nodes...))
		if got.KubernetesVersion != "v1.33.5+k3s1" || got.Template != "baseline-v0.1.0" || got.InfrastructureReady.Message != "ready" {
			t.Errorf("%s ready: kubernetesVersion %q, template %q, infrastructureReady %q; want v1.33.5+k3s1, baseline-v0.1.0, ready",
				c.name, got.KubernetesVersion, got.Template, got.InfrastructureReady.Message)
		}
	}
	var sum struct {
		TotalClusters, Ready, Error, InProgress int
	}
	if err := s.admin.Do(ctx, "GET", "/v2/projects/default/clusters/summary", nil, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.TotalClusters != 4 || sum.Ready < 3 {
		t.Errorf("summary: got %+v, want 4 clusters, at least 3 ready", sum)
	}

	// The faulty node: ERROR with its message, in the node's status and the
	// cluster's; retried by the node (--cluster-retry): a later ERROR.
	var failedAt string
	// The node's row shows its report at once; the cluster's status is the
	// reconciler's, a moment later: wait for both.
	fl := w.until("flaky", "the failure shown", func(c *client.Cluster) bool {
		n := nodeOf(c, bad)
		if n == nil || n.Status.Condition != "STATUS_CONDITION_NOTREADY" || c.LifecyclePhase.Message != "failed" {
			return false
		}
		failedAt = n.Status.Timestamp
		return true
	})
	msg := "install: node " + bad + " not Ready after 10m0s"
	if fl.LifecyclePhase.Message != "failed" || fl.LifecyclePhase.Indicator != string(eim.StatusError) ||
		!strings.HasPrefix(fl.ProviderStatus.Message, "error: "+bad+": "+msg) || fl.ProviderStatus.Indicator != string(eim.StatusError) ||
		!strings.Contains(fl.NodeHealth.Message, msg) || !strings.Contains(nodeOf(fl, bad).Status.Reason, msg) {
		t.Errorf("flaky after the failure: %s\nwant failed, an error naming %s and %q", asJSON(fl), bad, msg)
	}
	// Retried, and failed again: the node's failure is reported anew (a
	// later time), not only its new attempt (which the simulator would be
	// stopped in the middle of).
	w.until("flaky", "the failed install retried and failed again", func(c *client.Cluster) bool {
		n := nodeOf(c, bad)
		return n != nil && n.Status.Condition == "STATUS_CONDITION_NOTREADY" && n.Status.Timestamp != failedAt && strings.Contains(n.Status.Reason, msg)
	})
	// The node healed (its simulator replaced by a healthy one): ACTIVE at
	// the version it failed, and the cluster is ready without a new request.
	frep := faulty.stop()
	if c := frep.Hold.Clusters; c == nil || c.Faulty != 1 || c.Reports["ERROR"] < 2 || c.Reports["ACTIVE"] != 0 {
		t.Errorf("faulty simulator's clusters: got %s, want one faulty node, ERROR reported at least twice, never ACTIVE", asJSON(c))
	}
	healed := startSim(t, agentBin, s, faultyFile)
	w.until("flaky", "ready after the retry", ready(bad))

	// A node added joins the running cluster.
	cli.must("cluster", "nodes", "add", "edge", h[5]+":worker")
	w.until("edge", "ready with the node added", ready(h[0], h[1], h[2], h[5]))

	// An upgrade: a template with another Kubernetes version, rolled one
	// node at a time, control plane first, each in the order it joined.
	tf := filepath.Join(dir, "template.json")
	if err := os.WriteFile(tf, []byte(`{"name":"baseline","version":"v0.2.0","kubernetesVersion":"`+newKube+`","controlplaneprovidertype":"k3s","infraprovidertype":"intel"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli.must("cluster-template", "create", tf)
	cli.must("cluster", "upgrade", "edge", "--template", "baseline", "--version", "v0.2.0")
	var order []string
	notReady := 0
	up := w.until("edge", "upgraded", func(c *client.Cluster) bool {
		busy := 0
		for _, n := range c.Nodes {
			if n.Status.Condition != "STATUS_CONDITION_READY" {
				busy++
			}
			if strings.Contains(n.Status.Reason, "k3s "+newKube+" runs") && !slices.Contains(order, n.ID) {
				order = append(order, n.ID)
			}
		}
		notReady = max(notReady, busy)
		return c.LifecyclePhase.Message == "active" && len(order) == 4
	})
	if want := []string{h[0], h[1], h[2], h[5]}; !slices.Equal(order, want) {
		t.Errorf("upgrade order: got %v, want %v (control plane first, then by joining)", order, want)
	}
	if notReady > 1 {
		t.Errorf("upgrade: %d nodes were not ready at once, want one at a time", notReady)
	}
	if up.KubernetesVersion != newKube || up.Template != "baseline-v0.2.0" || up.ProviderStatus.Message != "ready" {
		t.Errorf("edge after the upgrade: %s", asJSON(up))
	}
	for _, id := range []string{h[0], h[1], h[2], h[5]} {
		if !slices.ContainsFunc(w.reasons(id), func(r string) bool { return strings.HasPrefix(r, "Upgrading k3s from v1.33.5+k3s1 to "+newKube) }) {
			t.Errorf("node %s: never seen upgrading; reasons seen: %q", id, w.reasons(id))
		}
	}

	// Removals: one drained, one forced; each row goes once the node says
	// INACTIVE, and the freed hosts join another cluster.
	cli.must("cluster", "nodes", "remove", "edge", h[2])
	cli.must("cluster", "nodes", "remove", "edge", h[5], "--force")
	w.until("edge", "the two nodes gone", func(c *client.Cluster) bool {
		return len(c.Nodes) == 2 && c.NodeQuantity == 2 && c.LifecyclePhase.Message == "active"
	})
	if !slices.Contains(w.reasons(h[2]), "Draining the node (simulated)") {
		t.Errorf("node %s (removed with a drain): reasons seen %q, want it draining", h[2], w.reasons(h[2]))
	}
	if slices.Contains(w.reasons(h[5]), "Draining the node (simulated)") {
		t.Errorf("node %s (removed with --force): drained", h[5])
	}
	cli.must("cluster", "create", "--name", "again", "--node", h[2], "--node", h[5]+":worker")
	w.until("again", "ready", ready(h[2], h[5]))

	// Deletion: every node uninstalls, the clusters go when all said
	// INACTIVE; then their hosts form a new cluster.
	for _, name := range []string{"edge", "solo-a", "solo-b", "flaky", "again"} {
		cli.must("cluster", "delete", name)
	}
	for _, name := range []string{"edge", "solo-a", "solo-b", "flaky", "again"} {
		w.deleting(name)
	}
	w.gone()
	if got := strings.TrimSpace(cli.must("cluster", "create", "--name", "reborn", "--node", h[0], "--node", h[3]+":controlplane", "--node", h[1]+":worker", "--node", bad+":worker", "--node", h[6]+":worker")); got != "reborn" {
		t.Fatalf("create reborn: %q", got)
	}
	w.until("reborn", "ready", ready(h[0], h[3], h[1], bad, h[6]))
	cli.must("cluster", "delete", "reborn")
	w.deleting("reborn")
	w.gone()

	if v := running(); v != "" {
		t.Error(v)
	}
	for _, p := range []struct {
		name  string
		proc  *simProc
		nodes int
	}{{"healthy", good, 7}, {"healed", healed, 1}} {
		rep := p.proc.stop()
		hr := rep.Hold
		if hr.Nodes != p.nodes || hr.FalseNoConnection != 0 || hr.Revoked != 0 {
			t.Errorf("%s simulator's hold: %d nodes, %d false No Connection, %d revoked; want %d, 0, 0", p.name, hr.Nodes, hr.FalseNoConnection, hr.Revoked, p.nodes)
		}
		if c := hr.Clusters; c == nil || c.Nodes != p.nodes || c.Busy != 0 || c.Final["INACTIVE"] != p.nodes || c.Faulty != 0 {
			t.Errorf("%s simulator's cluster nodes: %s; want %d nodes INACTIVE at the end, none busy or faulty", p.name, asJSON(c), p.nodes)
		}
	}
}

// ready: every node of the cluster is one of ids and READY, and the
// cluster says so as docs/clusters.md has it.
func ready(ids ...string) func(*client.Cluster) bool {
	return func(c *client.Cluster) bool {
		if c.LifecyclePhase.Message != "active" || c.ProviderStatus.Message != "ready" || c.ControlPlaneReady.Message != "ready" ||
			c.NodeHealth.Message != "nodes are healthy" || c.NodeQuantity != len(ids) || len(c.Nodes) != len(ids) {
			return false
		}
		for _, id := range ids {
			if n := nodeOf(c, id); n == nil || n.Status.Condition != "STATUS_CONDITION_READY" {
				return false
			}
		}
		return true
	}
}

func nodeOf(c *client.Cluster, id string) *client.ClusterNode {
	for i := range c.Nodes {
		if c.Nodes[i].ID == id {
			return &c.Nodes[i]
		}
	}
	return nil
}

func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// clusterWatch polls clusters through the API and keeps every reason each
// node was seen with.
type clusterWatch struct {
	t    *testing.T
	cl   *client.Client
	seen map[string][]string // host → reasons, in order, without repeats
}

const clusterDeadline = 45 * time.Second

// until polls the cluster until cond holds and returns it.
func (w *clusterWatch) until(name, what string, cond func(*client.Cluster) bool) *client.Cluster {
	w.t.Helper()
	deadline := time.Now().Add(clusterDeadline)
	var last *client.Cluster
	var lastErr error
	for time.Now().Before(deadline) {
		c, err := w.cl.GetCluster(context.Background(), eim.DefaultProject, name)
		if err == nil {
			w.note(c)
			last = c
			if cond(c) {
				w.t.Logf("cluster %s %s after %.1f s", name, what, time.Since(deadline.Add(-clusterDeadline)).Seconds())
				return c
			}
		}
		lastErr = err
		time.Sleep(40 * time.Millisecond)
	}
	w.t.Fatalf("cluster %s: not %s within %s; last seen %s (err %v)", name, what, clusterDeadline, asJSON(last), lastErr)
	return nil
}

func (w *clusterWatch) note(c *client.Cluster) {
	for _, n := range c.Nodes {
		rs := w.seen[n.ID]
		if r := n.Status.Reason; r != "" && (len(rs) == 0 || rs[len(rs)-1] != r) {
			w.seen[n.ID] = append(rs, r)
		}
	}
}

func (w *clusterWatch) reasons(id string) []string { return w.seen[id] }

// deleting polls a cluster being deleted until the reconciler has taken
// up its deletion (or it is gone).
func (w *clusterWatch) deleting(name string) {
	w.t.Helper()
	deadline := time.Now().Add(clusterDeadline)
	for time.Now().Before(deadline) {
		c, err := w.cl.GetCluster(context.Background(), eim.DefaultProject, name)
		if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && c.LifecyclePhase.Message == "deleting") {
			return
		}
		time.Sleep(40 * time.Millisecond)
	}
	w.t.Fatalf("cluster %s: not deleting within %s", name, clusterDeadline)
}

// gone polls the project's clusters, every one being deleted, until there
// are none.
func (w *clusterWatch) gone() {
	w.t.Helper()
	deadline := time.Now().Add(clusterDeadline)
	var last []client.Cluster
	for time.Now().Before(deadline) {
		cs, n, err := w.cl.ListClusters(context.Background(), eim.DefaultProject, client.ClusterQuery{})
		if err == nil && n == 0 {
			w.t.Logf("clusters gone after %.1f s", time.Since(deadline.Add(-clusterDeadline)).Seconds())
			return
		}
		if err == nil {
			last = cs
			for _, c := range cs {
				if c.LifecyclePhase.Message != "deleting" {
					w.t.Fatalf("cluster %s while deleted: %s", c.Name, asJSON(c))
				}
			}
		}
		time.Sleep(40 * time.Millisecond)
	}
	w.t.Fatalf("clusters not gone within %s: %s", clusterDeadline, asJSON(last))
}

// watchRunning counts the project's hosts "Running" every half second
// until the test ends; the returned func says what went wrong, "" nothing.
func watchRunning(t *testing.T, cl *client.Client, want int) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var problem string
	var checks int
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			page, err := cl.List(ctx, eim.DefaultProject, eim.KindHost, client.ListOptions{Filter: `hostStatus="Running"`, PageSize: 1})
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			checks++
			if err == nil && page.Total != want && problem == "" {
				problem = fmt.Sprintf("hosts Running: got %d of %d at %s", page.Total, want, time.Now().Format(time.TimeOnly))
			}
			mu.Unlock()
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return func() string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if problem == "" && checks == 0 {
			return "hosts Running: never counted"
		}
		return problem
	}
}

// simProc is an "eim-agent simulate --nodes-file" process holding its
// nodes until stopped.
type simProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	report string
	stdout bytes.Buffer
	stderr syncBuffer
	done   chan error
	once   sync.Once
	rep    *sim.Report
}

func startSim(t *testing.T, bin string, s *day0Server, nodesFile string, extra ...string) *simProc {
	t.Helper()
	p := &simProc{t: t, report: filepath.Join(t.TempDir(), "report.json"), done: make(chan error, 1)}
	args := append([]string{"simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
		"--nodes-file", nodesFile, "--report", p.report, "--json", "--backoff-min", "100ms", "--backoff-max", "1s",
		"--hold", "10m", "--settle", "2s", "--verbose",
		"--cluster-install-time", simInstall, "--cluster-upgrade-time", simUpgrade, "--cluster-removal-time", simRemoval}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop interrupts the simulator (it ends its hold and writes its report)
// and returns the report.
func (p *simProc) stop() *sim.Report {
	p.t.Helper()
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
			p.t.Errorf("eim-agent simulate did not end within 30 s of SIGINT; stderr:\n%s", p.stderr.String())
		}
		noChildRace(p.t, "eim-agent simulate", []byte(p.stderr.String()))
		if p.t.Failed() {
			p.t.Logf("eim-agent simulate's warnings:\n%s", p.stderr.String())
		}
		b, err := os.ReadFile(p.report)
		if err != nil {
			p.t.Errorf("simulator report: %v; stderr:\n%s", err, p.stderr.String())
			p.rep = &sim.Report{Hold: &sim.HoldReport{}}
			return
		}
		var rep sim.Report
		if err := json.Unmarshal(b, &rep); err != nil || rep.Hold == nil {
			p.t.Errorf("simulator report: %v, want a hold: %s", err, b)
			rep.Hold = &sim.HoldReport{}
		}
		p.rep = &rep
	})
	return p.rep
}

// readNodesFile returns the hosts of a bench/seed nodes file and its lines.
func readNodesFile(t *testing.T, file string) (hosts, lines []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n sim.ProvisionedNode
		if err := json.Unmarshal(sc.Bytes(), &n); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		hosts, lines = append(hosts, n.HostID), append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return hosts, lines
}

func writeLines(t *testing.T, file string, lines []string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
