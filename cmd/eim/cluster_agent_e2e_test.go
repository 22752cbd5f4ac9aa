package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// recordingSystem stands in for the node's programs (systemctl, k3s
// kubectl, sh): it records each command and says the node is Ready; the
// files, downloads and digests are the agent's real ones.
type recordingSystem struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recordingSystem) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.mu.Lock()
	r.cmds = append(r.cmds, line)
	r.mu.Unlock()
	if strings.Contains(line, " get node ") {
		return []byte("True"), nil
	}
	return nil, nil
}

func (r *recordingSystem) Release(context.Context, []string) error { return nil }

func (r *recordingSystem) ran(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cmds {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// The real agent's cluster installer (agent.Node with agent.K3s on a
// temporary root, its programs recorded) against the real server, k3s and
// its air-gap images served by the server's artifact store
// (--cluster-artifacts): the plan fetched with the node's token, the
// artifacts downloaded from the agent listener, verified and put in
// place, the node ACTIVE and the cluster ready; then the cluster deleted:
// the node uninstalls, says INACTIVE, and the cluster is gone.
func TestClusterRealAgentSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bench/seed")
	}
	seedBin := buildTool(t, "github.com/eimhq/eim/bench/seed", "seed")
	const kube = "v1.33.5+k3s1"
	store := t.TempDir()
	binary, images := make([]byte, 64<<10), make([]byte, 128<<10)
	rand.Read(binary)
	rand.Read(images)
	for name, b := range map[string][]byte{"k3s": binary, "k3s-airgap-images-amd64.tar.zst": images} {
		p := filepath.Join(store, "k3s", kube, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startDay0(t, "--heartbeat-interval", "1s", "--cluster-artifacts", store)
	s.stop()
	s.hc.CloseIdleConnections()
	nodesFile := filepath.Join(t.TempDir(), "nodes.jsonl")
	out, err := exec.Command(seedBin, "--database", s.dataDir, "--nodes", "1", "--out", nodesFile, "--seed", "21").CombinedOutput()
	noChildRace(t, "seed", out)
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	s.start(hostPort(t, s.api), hostPort(t, s.agentURL))
	f, err := os.Open(nodesFile)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := sim.ReadNodes(f)
	f.Close()
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes file: %d nodes, %v", len(nodes), err)
	}
	host := nodes[0].HostID

	root, state := t.TempDir(), t.TempDir()
	sys := &recordingSystem{}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	hc, err := agent.Dial(s.agentURL, s.ca(t))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	n := &agent.Node{
		Client: hc, StateDir: state, Logger: logger, ClusterCheck: 200 * time.Millisecond,
		Config: agent.NodeConfig{URL: s.agentURL, CACertPEM: s.ca(t), ClientID: nodes[0].ClientID, ClientSecret: nodes[0].ClientSecret,
			HostID: host, Project: eim.DefaultProject},
		Cluster: &agent.K3s{Root: root, StateDir: filepath.Join(state, "k3s"), System: sys, Project: eim.DefaultProject, CACertPEM: s.ca(t),
			PollInterval: 10 * time.Millisecond, ReadyTimeout: 10 * time.Second, Logger: logger},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent: %v", err)
		}
		if t.Failed() {
			t.Logf("agent's log:\n%s", logs.String())
		}
	}()

	waitFor(t, "the default cluster template", func() bool {
		l, err := s.admin.ListClusterTemplates(ctx, eim.DefaultProject, client.ClusterQuery{})
		return err == nil && l.DefaultTemplateInfo != nil && l.DefaultTemplateInfo.Name == "baseline"
	})
	if _, err := s.admin.CreateCluster(ctx, eim.DefaultProject, &client.ClusterSpec{Name: "real", Nodes: []client.ClusterNodeSpec{{ID: host, Role: "all"}}}); err != nil {
		t.Fatal(err)
	}
	w := &clusterWatch{t: t, cl: s.admin, seen: map[string][]string{}}
	c := w.until("real", "ready", ready(host))
	if r := nodeOf(c, host).Status.Reason; !strings.Contains(r, "k3s "+kube+" runs as control plane and worker") {
		t.Errorf("node's reason: %q", r)
	}
	checkContent := func(p string, want []byte) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (err %v), want the artifact store's %d bytes", p, len(got), err, len(want))
		}
	}
	checkContent("/usr/local/bin/k3s", binary)
	checkContent("/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst", images)
	dropIn, _ := os.ReadFile(filepath.Join(root, "/etc/rancher/k3s/config.yaml.d/90-eim.yaml"))
	if !strings.Contains(string(dropIn), "token-file: ") || !strings.Contains(string(dropIn), "cluster-init: true") {
		t.Errorf("drop-in:\n%s\nwant token-file and cluster-init", dropIn)
	}
	if tok, err := os.ReadFile(filepath.Join(root, "/etc/rancher/k3s/eim-join-token")); err != nil || len(bytes.TrimSpace(tok)) == 0 {
		t.Errorf("join token: %q (err %v)", tok, err)
	}
	if cfg, _ := os.ReadFile(filepath.Join(root, "/etc/rancher/k3s/config.yaml")); !strings.Contains(string(cfg), `node-name: "`+host+`"`) {
		t.Errorf("config.yaml:\n%s\nwant node-name %s", cfg, host)
	}
	if unit, _ := os.ReadFile(filepath.Join(root, "/etc/systemd/system/eim-connect.service")); !strings.Contains(string(unit), "--cluster "+eim.DefaultProject+"/real") {
		t.Errorf("connect unit:\n%s\nwant --cluster %s/real", unit, eim.DefaultProject)
	}
	if !sys.ran("systemctl") {
		t.Errorf("no systemctl command recorded")
	}

	// Deleted: the node uninstalls and says INACTIVE; the cluster goes.
	if err := s.admin.DeleteCluster(ctx, eim.DefaultProject, "real", false); err != nil {
		t.Fatal(err)
	}
	w.deleting("real")
	w.gone()
	waitFor(t, "the uninstall", func() bool {
		_, err := os.Stat(filepath.Join(root, "/usr/local/bin/k3s"))
		return errors.Is(err, os.ErrNotExist)
	})
	if _, err := os.Stat(filepath.Join(root, "/etc/rancher/k3s")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/rancher/k3s after the uninstall: %v", err)
	}
	var h eim.Host
	if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, host, &h); err != nil || h.HostStatus != "Running" {
		t.Errorf("host %s: status %q (err %v), want Running", host, h.HostStatus, err)
	}
}
