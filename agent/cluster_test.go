package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/internal/syncbuf"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// fakeSystem records the commands K3s runs instead of running them; the
// files, downloads and checks are real. The node turns Ready after
// notReady polls; a command starting with a key of fail fails.
type fakeSystem struct {
	mu       sync.Mutex
	cmds     []string
	released [][]string
	notReady int
	fail     map[string]error
}

func (f *fakeSystem) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, line)
	for prefix, err := range f.fail {
		if strings.HasPrefix(line, prefix) {
			return []byte("error: the fake says no"), err
		}
	}
	if strings.Contains(line, " get node ") {
		if f.notReady > 0 {
			f.notReady--
			return []byte("False"), nil
		}
		return []byte("True"), nil
	}
	return nil, nil
}

func (f *fakeSystem) Release(_ context.Context, dirs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, dirs)
	return nil
}

// commands returns the commands run since the last call.
func (f *fakeSystem) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cmds
	f.cmds = nil
	return c
}

func (f *fakeSystem) setNotReady(n int, fail map[string]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notReady, f.fail = n, fail
}

// clusterServer is the scripted southbound with a ClusterService and the
// artifacts: /boot/artifacts/NAME needs a node token (the EIM artifact
// store), /mirror/NAME refuses one (another server must never see it).
type clusterServer struct {
	*southbound
	clusterv1connect.UnimplementedClusterServiceHandler
	url string

	mu        sync.Mutex
	version   string // the heartbeats' cluster_version
	answer    *clusterv1.GetPlanResponse
	asked     []string // GetPlan's versions
	reports   []*clusterv1.ReportStatusRequest
	files     map[string][]byte
	downloads map[string]int
	tokenSent []string // mirror paths a token was sent to
}

func newClusterServer(t *testing.T) (*clusterServer, *testCA) {
	ca := newTestCA(t)
	s := &clusterServer{southbound: &southbound{}, files: map[string][]byte{}, downloads: map[string]int{}}
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 1}, nil
	}
	s.heartbeat = func(int, *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return &hostv1.HeartbeatResponse{IntervalSeconds: 1, ClusterVersion: s.version}, nil
	}
	mux := http.NewServeMux()
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.Handle(clusterv1connect.NewClusterServiceHandler(s))
	mux.HandleFunc("/oauth2/token", s.serveToken)
	mux.HandleFunc("GET /boot/artifacts/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r.Header); err != nil {
			http.Error(w, "no node token", http.StatusUnauthorized)
			return
		}
		s.serveFile(w, r)
	})
	mux.HandleFunc("GET /mirror/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			s.mu.Lock()
			s.tokenSent = append(s.tokenSent, r.URL.Path)
			s.mu.Unlock()
		}
		s.serveFile(w, r)
	})
	s.url = ca.startTLS(t, mux).URL
	return s, ca
}

func (s *clusterServer) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.files[r.URL.Path]
	s.downloads[r.URL.Path]++
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}

func (s *clusterServer) GetPlan(_ context.Context, req *connect.Request[clusterv1.GetPlanRequest]) (*connect.Response[clusterv1.GetPlanResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, req.Msg.Version)
	if s.answer == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no plan scripted"))
	}
	if req.Msg.Version == s.answer.Version {
		return connect.NewResponse(&clusterv1.GetPlanResponse{Version: s.answer.Version, Unchanged: true}), nil
	}
	return connect.NewResponse(s.answer), nil
}

func (s *clusterServer) ReportStatus(_ context.Context, req *connect.Request[clusterv1.ReportStatusRequest]) (*connect.Response[clusterv1.ReportStatusResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.reports = append(s.reports, req.Msg)
	s.mu.Unlock()
	return connect.NewResponse(&clusterv1.ReportStatusResponse{}), nil
}

// script makes the heartbeats name version and GetPlan answer a.
func (s *clusterServer) script(version string, a *clusterv1.GetPlanResponse) {
	s.mu.Lock()
	s.version, s.answer = version, a
	s.mu.Unlock()
}

// states returns the states reported so far (STATE_ prefix dropped),
// with the plan version: "REGISTERING v1".
func (s *clusterServer) states() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reports {
		out = append(out, strings.TrimPrefix(r.State.String(), "STATE_")+" "+r.PlanVersion)
	}
	return out
}

func (s *clusterServer) lastReport() *clusterv1.ReportStatusRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reports) == 0 {
		return nil
	}
	return s.reports[len(s.reports)-1]
}

func (s *clusterServer) resetReports() {
	s.mu.Lock()
	s.reports, s.asked = nil, nil
	s.mu.Unlock()
}

func (s *clusterServer) downloaded(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads[p]
}

// addArtifact serves b at p and returns its plan entry.
func (s *clusterServer) addArtifact(p, name string, kind clusterv1.Artifact_Kind, b []byte) *clusterv1.Artifact {
	s.mu.Lock()
	s.files[p] = b
	s.mu.Unlock()
	loc := p
	if strings.HasPrefix(p, "/mirror/") {
		loc = s.url + p
	}
	return &clusterv1.Artifact{Kind: kind, Name: name, Url: loc, Sha256: sha256Hex(b), Size: uint64(len(b))}
}

const (
	joinToken    = "K10secret-join-token::server:0123456789abcdef"
	connectToken = "eimct_ct-0a1b2c3d.s3cr3t-connect"
)

// fakeK3s is a stand-in for the k3s binary: a script with its version.
func fakeK3s(version string) []byte {
	return []byte("#!/bin/sh\necho 'k3s version " + version + "'\n")
}

// clusterNode is a Node with a K3s installer on a root directory, whose
// system is f. Logs go to logs.
type clusterNode struct {
	root, state string
	sys         *fakeSystem
	logs        *syncBuffer
}

type syncBuffer = syncbuf.Buffer

func newClusterNode(t *testing.T) *clusterNode {
	d := t.TempDir()
	return &clusterNode{root: filepath.Join(d, "root"), state: filepath.Join(d, "state"), sys: &fakeSystem{}, logs: &syncBuffer{}}
}

func (c *clusterNode) k3s(ca *testCA) *agent.K3s {
	return &agent.K3s{Root: c.root, StateDir: c.state, System: c.sys, NodeName: "Edge-1", Project: "p1",
		CACertPEM: ca.pem, AgentPath: "/usr/local/bin/eim-agent", PollInterval: time.Millisecond, ReadyTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// run runs a Node until the server's last report is a final state of
// version (ACTIVE, ERROR or INACTIVE) or the test's deadline.
func (c *clusterNode) run(t *testing.T, s *clusterServer, ca *testCA, now func() time.Time, until func(*clusterv1.ReportStatusRequest) bool) {
	t.Helper()
	client, err := agent.Dial(s.url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	n := &agent.Node{
		Client: client, StateDir: c.state, Cluster: c.k3s(ca), Now: now,
		Config:       agent.NodeConfig{URL: s.url, CACertPEM: ca.pem, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p1"},
		Logger:       slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Wait:         func(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, 5*time.Millisecond) },
		ClusterCheck: 10 * time.Millisecond, ClusterRetry: agent.Backoff{Min: time.Hour, Max: time.Hour},
		OnHeartbeat: func(*hostv1.HeartbeatResponse) {
			// Until the server has the final report and the node knows it
			// has (else a restart delivers it again, which is right but
			// makes the next run's sequence longer).
			b, _ := os.ReadFile(filepath.Join(c.state, "cluster.json"))
			if r := s.lastReport(); r != nil && until(r) && !bytes.Contains(b, []byte(`"reports"`)) {
				cancel()
			}
		},
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v; reports %v", err, s.states())
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func final(version string) func(*clusterv1.ReportStatusRequest) bool {
	return func(r *clusterv1.ReportStatusRequest) bool {
		switch r.State {
		case clusterv1.ReportStatusRequest_STATE_ACTIVE, clusterv1.ReportStatusRequest_STATE_ERROR:
			return r.PlanVersion == version
		case clusterv1.ReportStatusRequest_STATE_INACTIVE:
			return true
		}
		return false
	}
}

// basePlan is an init control-plane plan with a binary from the artifact
// store, images from a mirror URL, a file and a pre-install command.
func basePlan(s *clusterServer, kube string, images []byte) *clusterv1.Plan {
	return &clusterv1.Plan{
		ClusterId: "cluster-0000000a", ClusterName: "edge", Role: clusterv1.Plan_ROLE_ALL, Distribution: "k3s",
		KubernetesVersion: kube, Init: true, JoinToken: joinToken,
		ConfigYaml:         "node-name: edge-1\nwrite-kubeconfig-mode: \"0600\"\ncluster-cidr: 10.42.0.0/16\n",
		Files:              []*clusterv1.File{{Path: "/etc/rancher/k3s/registries.yaml", Content: "mirrors: {}\n", Mode: 0o640}},
		PreInstallCommands: []string{"sysctl -w net.ipv4.ip_forward=1"},
		Artifacts: []*clusterv1.Artifact{
			s.addArtifact("/boot/artifacts/k3s-"+kube, "k3s", clusterv1.Artifact_KIND_BINARY, fakeK3s(kube)),
			s.addArtifact("/mirror/k3s-airgap-images-"+kube+".tar", "k3s-airgap-images-amd64.tar", clusterv1.Artifact_KIND_IMAGES, images),
		},
		DrainBeforeUpgrade: true, DrainTimeoutSeconds: 120,
		Connect: &clusterv1.Connect{ServerUrl: "https://eim.example:8443", Token: connectToken, Upstream: "https://127.0.0.1:6443"},
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func checkFile(t *testing.T, path string, want []byte, mode fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if st.Mode().Perm() != mode {
		t.Errorf("%s: mode %o, want %o", path, st.Mode().Perm(), mode)
	}
	if want != nil {
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: content %.80q, want %.80q", path, got, want)
		}
	}
}

// checkNoSecret fails if a secret is in the logs, a command or a state
// file.
func checkNoSecret(t *testing.T, c *clusterNode, cmds []string) {
	t.Helper()
	for _, secret := range []string{joinToken, connectToken} {
		if strings.Contains(c.logs.String(), secret) {
			t.Errorf("a secret is in the logs")
		}
		for _, cmd := range cmds {
			if strings.Contains(cmd, secret) {
				t.Errorf("a secret is on a command line: %s", cmd)
			}
		}
		filepath.WalkDir(c.state, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
					t.Errorf("a secret is in the state file %s", p)
				}
			}
			return nil
		})
	}
}

// A node installs its plan: downloads (the store's with its token, the
// mirror's without), verifies, writes the binary, images, configuration,
// token and units, starts k3s, waits for Ready, starts the connect agent
// and reports REGISTERING → INSTALL_IN_PROGRESS → ACTIVE. A restarted
// agent with the same state applies nothing again.
func TestClusterInstall(t *testing.T) {
	s, ca := newClusterServer(t)
	c := newClusterNode(t)
	images := randomBytes(t, 300<<10)
	p := basePlan(s, "v1.33.5+k3s1", images)
	s.script("v1", &clusterv1.GetPlanResponse{Version: "v1", Plan: p})
	c.sys.setNotReady(3, nil)
	c.run(t, s, ca, nil, final("v1"))

	if got, want := s.states(), []string{"REGISTERING v1", "INSTALL_IN_PROGRESS v1", "ACTIVE v1"}; !slices.Equal(got, want) {
		t.Fatalf("states %q, want %q", got, want)
	}
	if r := s.lastReport(); r.KubernetesVersion != "v1.33.5+k3s1" || !strings.Contains(r.Message, "node edge-1 is Ready") {
		t.Errorf("ACTIVE report %v", r)
	}
	root := c.root
	checkFile(t, filepath.Join(root, "usr/local/bin/k3s"), fakeK3s("v1.33.5+k3s1"), 0o755)
	checkFile(t, filepath.Join(root, "var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar"), images, 0o644)
	checkFile(t, filepath.Join(root, "etc/rancher/k3s/config.yaml"), []byte(p.ConfigYaml), 0o600)
	checkFile(t, filepath.Join(root, "etc/rancher/k3s/eim-join-token"), []byte(joinToken+"\n"), 0o600)
	checkFile(t, filepath.Join(root, "etc/rancher/k3s/registries.yaml"), []byte("mirrors: {}\n"), 0o640)
	checkFile(t, filepath.Join(root, "etc/eim/connect/token"), []byte(connectToken+"\n"), 0o600)
	checkFile(t, filepath.Join(root, "etc/eim/connect/ca.crt"), []byte(ca.pem), 0o600)
	checkFile(t, filepath.Join(root, "var/lib/rancher/k3s/server/manifests/eim-node-drain.yaml"), nil, 0o600)
	dropIn, _ := os.ReadFile(filepath.Join(root, "etc/rancher/k3s/config.yaml.d/90-eim.yaml"))
	if !strings.Contains(string(dropIn), `token-file: "/etc/rancher/k3s/eim-join-token"`) || !strings.Contains(string(dropIn), "cluster-init: true") {
		t.Errorf("drop-in:\n%s", dropIn)
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/k3s.service"))
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/k3s server\n") {
		t.Errorf("k3s.service:\n%s", unit)
	}
	cu, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/eim-connect.service"))
	if want := "ExecStart=/usr/local/bin/eim-agent connect --server https://eim.example:8443 --ca /etc/eim/connect/ca.crt --cluster p1/edge --token-file /etc/eim/connect/token --upstream https://127.0.0.1:6443"; !strings.Contains(string(cu), want) {
		t.Errorf("eim-connect.service:\n%s\nwant %s", cu, want)
	}
	cmds := c.sys.commands()
	ready := `/usr/local/bin/k3s kubectl --kubeconfig /etc/rancher/k3s/k3s.yaml get node edge-1 -o jsonpath={.status.conditions[?(@.type=="Ready")].status}`
	want := []string{"sh -c sysctl -w net.ipv4.ip_forward=1", "systemctl daemon-reload", "systemctl enable k3s.service",
		"systemctl --no-block restart k3s.service", ready, ready, ready, ready,
		"systemctl enable eim-connect.service", "systemctl --no-block restart eim-connect.service"}
	if !slices.Equal(cmds, want) {
		t.Errorf("commands:\n%s\nwant\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
	if s.downloaded("/boot/artifacts/k3s-v1.33.5+k3s1") != 1 || s.downloaded("/mirror/k3s-airgap-images-v1.33.5+k3s1.tar") != 1 {
		t.Errorf("downloads %v, want one each", s.downloads)
	}
	if len(s.tokenSent) > 0 {
		t.Errorf("the node token went to a URL outside EIM: %v", s.tokenSent)
	}
	checkNoSecret(t, c, cmds)

	// A restarted agent: the heartbeats name the version applied, and
	// nothing is fetched, run or reported.
	s.resetReports()
	client, _ := agent.Dial(s.url, ca.pem)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	beats := 0
	n := &agent.Node{Client: client, StateDir: c.state, Cluster: c.k3s(ca), ClusterCheck: 5 * time.Millisecond,
		Config: agent.NodeConfig{URL: s.url, CACertPEM: ca.pem, ClientID: "edgenode-host-1", ClientSecret: "sec"},
		Wait:   func(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, 5*time.Millisecond) },
		OnHeartbeat: func(*hostv1.HeartbeatResponse) {
			if beats++; beats == 10 {
				cancel()
			}
		}}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(s.asked) > 0 || len(s.states()) > 0 || len(c.sys.commands()) > 0 {
		t.Errorf("after a restart: GetPlan %q, reports %q", s.asked, s.states())
	}
}

// testFetcher downloads as the node does, without a token (the mirror).
type testFetcher struct{ hc *http.Client }

func (f testFetcher) Fetch(ctx context.Context, loc string) (io.ReadCloser, int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("GET %s: %s", loc, resp.Status)
	}
	return resp.Body, resp.ContentLength, nil
}

// A plan applied again downloads nothing, restarts nothing and changes no
// file; one with a new Kubernetes version drains, replaces the binary,
// restarts and uncordons.
func TestK3sIdempotentAndUpgrade(t *testing.T) {
	s, ca := newClusterServer(t)
	c := newClusterNode(t)
	hc, _ := agent.Dial(s.url, ca.pem)
	defer hc.CloseIdleConnections()
	f := testFetcher{hc}
	mirror := func(p *clusterv1.Plan) { // all from the mirror: testFetcher has no token
		p.Artifacts[0] = s.addArtifact("/mirror/k3s-"+p.KubernetesVersion, "k3s", clusterv1.Artifact_KIND_BINARY, fakeK3s(p.KubernetesVersion))
	}
	images := randomBytes(t, 64<<10)
	p1 := basePlan(s, "v1.33.5+k3s1", images)
	mirror(p1)
	k := c.k3s(ca)
	ctx := t.Context()
	if err := k.Prepare(ctx, p1, f); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Install(ctx, "v1", p1); err != nil {
		t.Fatal(err)
	}
	c.sys.commands()
	config := filepath.Join(c.root, "etc/rancher/k3s/config.yaml")
	st1, _ := os.Stat(config)

	// Again, by a new installer on the same state (a restarted agent).
	k = c.k3s(ca)
	if err := k.Prepare(ctx, p1, f); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Install(ctx, "v1", p1); err != nil {
		t.Fatal(err)
	}
	if n := s.downloaded("/mirror/k3s-v1.33.5+k3s1"); n != 1 {
		t.Errorf("binary downloaded %d times, want once", n)
	}
	cmds := c.sys.commands()
	for _, cmd := range cmds {
		if strings.Contains(cmd, "restart") || strings.HasPrefix(cmd, "sh -c") || strings.Contains(cmd, "daemon-reload") {
			t.Errorf("applied again: %s", cmd)
		}
	}
	if st2, _ := os.Stat(config); !st2.ModTime().Equal(st1.ModTime()) {
		t.Errorf("config.yaml rewritten")
	}

	// The upgrade: same images, a new binary.
	p2 := basePlan(s, "v1.34.1+k3s1", images)
	mirror(p2)
	p2.PreInstallCommands = nil
	if err := k.Prepare(ctx, p2, f); err != nil {
		t.Fatal(err)
	}
	msg, err := k.Install(ctx, "v2", p2)
	if err != nil {
		t.Fatal(err)
	}
	if s.downloaded("/mirror/k3s-airgap-images-v1.34.1+k3s1.tar") != 0 {
		t.Errorf("the same images were downloaded again (the cache is by sha256)")
	}
	checkFile(t, filepath.Join(c.root, "usr/local/bin/k3s"), fakeK3s("v1.34.1+k3s1"), 0o755)
	cmds = c.sys.commands()
	kc := "/usr/local/bin/k3s kubectl --kubeconfig /etc/rancher/k3s/k3s.yaml "
	order := []string{kc + "drain edge-1 --ignore-daemonsets --delete-emptydir-data --timeout=2m0s",
		"systemctl --no-block restart k3s.service", kc + "get node edge-1", kc + "uncordon edge-1"}
	i := 0
	for _, cmd := range cmds {
		if i < len(order) && strings.HasPrefix(cmd, order[i]) {
			i++
		}
	}
	if i != len(order) {
		t.Errorf("upgrade commands:\n%s\nwant in order:\n%s", strings.Join(cmds, "\n"), strings.Join(order, "\n"))
	}
	if kube, any := k.Installed(); kube != "v1.34.1+k3s1" || !any || !strings.Contains(msg, "v1.34.1+k3s1") {
		t.Errorf("Installed() = %q, %v; message %q", kube, any, msg)
	}
}

// A download that does not match its sha256 or size fails, and nothing
// of it stays in the cache or on the node.
func TestK3sBadArtifact(t *testing.T) {
	s, ca := newClusterServer(t)
	hc, _ := agent.Dial(s.url, ca.pem)
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		name   string
		change func(a *clusterv1.Artifact)
		want   string
	}{
		{"sha256", func(a *clusterv1.Artifact) { a.Sha256 = sha256Hex([]byte("something else")) }, "sha256 mismatch"},
		{"longer", func(a *clusterv1.Artifact) { a.Size-- }, "the plan says"},
		{"shorter", func(a *clusterv1.Artifact) { a.Size++ }, "the plan says"},
		{"not hex", func(a *clusterv1.Artifact) { a.Sha256 = "xyz" }, "not 64 hex digits"},
		{"missing", func(a *clusterv1.Artifact) { a.Url = s.url + "/mirror/nothing" }, "404"},
		{"name", func(a *clusterv1.Artifact) { a.Name = "../k3s" }, "not a plain file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClusterNode(t)
			p := basePlan(s, "v1.33.5+k3s1", []byte("images"))
			p.Artifacts[0] = s.addArtifact("/mirror/k3s-bad", "k3s", clusterv1.Artifact_KIND_BINARY, fakeK3s("bad"))
			tc.change(p.Artifacts[0])
			k := c.k3s(ca)
			err := k.Prepare(t.Context(), p, testFetcher{hc})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %v, want %q", err, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Join(c.state, "artifacts"))
			if len(ents) > 0 {
				t.Errorf("the cache holds %v", ents)
			}
			if _, any := k.Installed(); any {
				t.Errorf("something installed")
			}
		})
	}
}

// A failed installation reports ERROR with the step; the agent restarted
// later retries it without running the pre-install commands again, and
// without downloading again, and reaches ACTIVE.
func TestClusterFailureAndResume(t *testing.T) {
	s, ca := newClusterServer(t)
	c := newClusterNode(t)
	p := basePlan(s, "v1.33.5+k3s1", randomBytes(t, 1000))
	p.Role, p.Init, p.ServerUrl, p.Connect = clusterv1.Plan_ROLE_WORKER, false, "https://10.0.0.1:6443", nil
	s.script("v1", &clusterv1.GetPlanResponse{Version: "v1", Plan: p})
	c.sys.setNotReady(1<<30, nil)
	c.run(t, s, ca, nil, final("v1"))
	if got, want := s.states(), []string{"REGISTERING v1", "INSTALL_IN_PROGRESS v1", "ERROR v1"}; !slices.Equal(got, want) {
		t.Fatalf("states %q, want %q", got, want)
	}
	if m := s.lastReport().Message; !strings.HasPrefix(m, "install: node edge-1 not Ready after 2s: Ready is \"False\"") {
		t.Errorf("ERROR message %q", m)
	}
	first := c.sys.commands()
	if !slices.Contains(first, "systemctl --no-block restart k3s-agent.service") || slices.Contains(first, "systemctl enable eim-connect.service") {
		t.Errorf("a worker runs k3s agent and no connect agent: %q", first)
	}
	dropIn, _ := os.ReadFile(filepath.Join(c.root, "etc/rancher/k3s/config.yaml.d/90-eim.yaml"))
	if !strings.Contains(string(dropIn), `server: "https://10.0.0.1:6443"`) || strings.Contains(string(dropIn), "cluster-init") {
		t.Errorf("a joining worker's drop-in:\n%s", dropIn)
	}

	// Restarted an hour later (past the retry's wait); now it gets Ready.
	s.resetReports()
	c.sys.setNotReady(0, nil)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	c.run(t, s, ca, later, final("v1"))
	if got, want := s.states(), []string{"REGISTERING v1", "INSTALL_IN_PROGRESS v1", "ACTIVE v1"}; !slices.Equal(got, want) {
		t.Fatalf("after the restart: states %q, want %q", got, want)
	}
	cmds := c.sys.commands()
	if slices.ContainsFunc(cmds, func(s string) bool { return strings.HasPrefix(s, "sh -c") }) {
		t.Errorf("pre-install commands ran again: %q", cmds)
	}
	if n := s.downloaded("/boot/artifacts/k3s-v1.33.5+k3s1"); n != 1 {
		t.Errorf("binary downloaded %d times, want once", n)
	}
}

// Removal: drain, uninstall (units stopped and disabled, processes and
// mounts released, files removed), DEREGISTERING →
// UNINSTALL_IN_PROGRESS → INACTIVE; a drain that fails reports ERROR and
// uninstalls nothing.
func TestClusterRemoval(t *testing.T) {
	s, ca := newClusterServer(t)
	c := newClusterNode(t)
	p := basePlan(s, "v1.33.5+k3s1", randomBytes(t, 1000))
	s.script("v1", &clusterv1.GetPlanResponse{Version: "v1", Plan: p})
	c.run(t, s, ca, nil, final("v1"))
	c.sys.commands()
	outside := filepath.Join(c.root, "etc/hostname")
	os.WriteFile(outside, []byte("edge-1\n"), 0o644)

	s.resetReports()
	s.script("v2", &clusterv1.GetPlanResponse{Version: "v2", Removal: &clusterv1.Removal{Drain: true, DrainTimeoutSeconds: 30}})
	c.sys.setNotReady(0, map[string]error{"/usr/local/bin/k3s kubectl --kubeconfig /etc/rancher/k3s/k3s.yaml drain": errors.New("exit status 1")})
	c.run(t, s, ca, nil, final("v2"))
	if got, want := s.states(), []string{"DEREGISTERING v2", "ERROR v2"}; !slices.Equal(got, want) {
		t.Fatalf("states %q, want %q", got, want)
	}
	if m := s.lastReport().Message; !strings.Contains(m, "drain: kubectl drain edge-1: exit status 1: error: the fake says no") {
		t.Errorf("ERROR message %q", m)
	}
	if _, err := os.Stat(filepath.Join(c.root, "usr/local/bin/k3s")); err != nil {
		t.Errorf("a failed drain uninstalled: %v", err)
	}

	s.resetReports()
	c.sys.setNotReady(0, nil)
	c.sys.commands()
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	c.run(t, s, ca, later, final("v2"))
	if got, want := s.states(), []string{"DEREGISTERING v2", "UNINSTALL_IN_PROGRESS v2", "INACTIVE "}; !slices.Equal(got, want) {
		t.Fatalf("states %q, want %q", got, want)
	}
	cmds := c.sys.commands()
	for _, want := range []string{"/usr/local/bin/k3s kubectl --kubeconfig /etc/rancher/k3s/k3s.yaml drain edge-1 --ignore-daemonsets --delete-emptydir-data --timeout=30s",
		"systemctl disable --now eim-connect.service", "systemctl disable --now k3s.service", "systemctl daemon-reload"} {
		if !slices.Contains(cmds, want) {
			t.Errorf("removal ran no %q: %q", want, cmds)
		}
	}
	if len(c.sys.released) != 1 || !slices.Contains(c.sys.released[0], "/var/lib/rancher/k3s") {
		t.Errorf("released %v", c.sys.released)
	}
	for _, p := range []string{"usr/local/bin/k3s", "etc/rancher/k3s", "var/lib/rancher/k3s", "etc/systemd/system/k3s.service",
		"etc/systemd/system/eim-connect.service", "etc/eim/connect/token", "../state/artifacts", "../state/k3s.json"} {
		if _, err := os.Stat(filepath.Join(c.root, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the removal: %v", p, err)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the removal removed a file it did not write: %v", err)
	}

	// Removed again (a new version with no plan): nothing installed, so
	// INACTIVE at once.
	s.resetReports()
	s.script("v3", &clusterv1.GetPlanResponse{Version: "v3"})
	c.run(t, s, ca, nil, final("v3"))
	if got, want := s.states(), []string{"INACTIVE "}; !slices.Equal(got, want) {
		t.Fatalf("states %q, want %q", got, want)
	}
}
