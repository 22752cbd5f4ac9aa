package agent_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/pods"
	"github.com/eimhq/eim/internal/podmantest"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// workloadServer is a test stand-in for the workloads module's southbound
// side (the module is being built beside this agent): the generated
// WorkloadService handler served over TLS on 127.0.0.1 with the scripted
// host service, and an object store on 127.0.0.1 that takes a PUT or
// DELETE only with the signature its grants carry.
type workloadServer struct {
	*southbound
	workloadsv1connect.UnimplementedWorkloadServiceHandler
	url   string
	store *httptest.Server
	key   []byte // signs the grants

	mu       sync.Mutex
	version  string // the heartbeats' workloads_version
	answer   *workloadsv1.GetWorkloadsResponse
	asked    []string // GetWorkloads' versions
	wantFull bool     // the next heartbeat asks for a full status
	statuses []*workloadsv1.ReportStatusRequest
	logs     []*workloadsv1.ReportLogsRequest
	uploads  []*workloadsv1.ReportUploadsRequest
	objects  map[string]string
	requests []string // the store's, "PUT key"
}

func newWorkloadServer(t *testing.T) (*workloadServer, *testCA) {
	ca := newTestCA(t)
	s := &workloadServer{southbound: &southbound{}, objects: map[string]string{}, key: make([]byte, 32)}
	rand.Read(s.key)
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 1}, nil
	}
	s.heartbeat = func(int, *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		full := s.wantFull
		s.wantFull = false
		return &hostv1.HeartbeatResponse{IntervalSeconds: 1, WorkloadsVersion: s.version, WorkloadsStatusWanted: full}, nil
	}
	mux := http.NewServeMux()
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.Handle(workloadsv1connect.NewWorkloadServiceHandler(s))
	mux.HandleFunc("/oauth2/token", s.serveToken)
	s.url = ca.startTLS(t, mux).URL
	s.store = httptest.NewServer(http.HandlerFunc(s.serveStore))
	t.Cleanup(s.store.Close)
	return s, ca
}

func (s *workloadServer) sign(method, key string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(method + " " + key))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *workloadServer) serveStore(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/bucket/")
	if !hmac.Equal([]byte(r.Header.Get("X-Signature")), []byte(s.sign(r.Method, key))) {
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+key)
	switch r.Method {
	case http.MethodPut:
		s.objects[key] = string(b)
	case http.MethodDelete:
		delete(s.objects, key)
	}
}

func (s *workloadServer) GetWorkloads(_ context.Context, req *connect.Request[workloadsv1.GetWorkloadsRequest]) (*connect.Response[workloadsv1.GetWorkloadsResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, req.Msg.Version)
	if s.answer == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no workloads scripted"))
	}
	if req.Msg.Version == s.answer.Version {
		return connect.NewResponse(&workloadsv1.GetWorkloadsResponse{Version: s.answer.Version, Unchanged: true}), nil
	}
	return connect.NewResponse(s.answer), nil
}

func (s *workloadServer) ReportStatus(_ context.Context, req *connect.Request[workloadsv1.ReportStatusRequest]) (*connect.Response[workloadsv1.ReportStatusResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.statuses = append(s.statuses, req.Msg)
	s.mu.Unlock()
	return connect.NewResponse(&workloadsv1.ReportStatusResponse{}), nil
}

func (s *workloadServer) ReportLogs(_ context.Context, req *connect.Request[workloadsv1.ReportLogsRequest]) (*connect.Response[workloadsv1.ReportLogsResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.logs = append(s.logs, req.Msg)
	s.mu.Unlock()
	return connect.NewResponse(&workloadsv1.ReportLogsResponse{}), nil
}

func (s *workloadServer) GrantUploads(_ context.Context, req *connect.Request[workloadsv1.GrantUploadsRequest]) (*connect.Response[workloadsv1.GrantUploadsResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	resp := &workloadsv1.GrantUploadsResponse{ExpiresTime: time.Now().Add(15 * time.Minute).Unix()}
	for _, c := range req.Msg.Changes {
		key := "host-1/" + req.Msg.Workload + "/" + req.Msg.Target + "/" + c.Path
		m := http.MethodPut
		if !c.Present {
			m = http.MethodDelete
		}
		resp.Grants = append(resp.Grants, &workloadsv1.Grant{Path: c.Path, Method: m, Url: s.store.URL + "/bucket/" + key,
			Headers: []*workloadsv1.Header{{Name: "X-Signature", Value: s.sign(m, key)}}})
	}
	return connect.NewResponse(resp), nil
}

func (s *workloadServer) ReportUploads(_ context.Context, req *connect.Request[workloadsv1.ReportUploadsRequest]) (*connect.Response[workloadsv1.ReportUploadsResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.uploads = append(s.uploads, req.Msg)
	s.mu.Unlock()
	return connect.NewResponse(&workloadsv1.ReportUploadsResponse{}), nil
}

// publish makes the heartbeats name version and GetWorkloads answer it.
func (s *workloadServer) publish(version string, logs []*workloadsv1.LogRequest, ws ...*workloadsv1.Workload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = version
	s.answer = &workloadsv1.GetWorkloadsResponse{Version: version, Workloads: ws, LogRequests: logs}
}

// status returns the last status reported of workload (nil when none or
// absent from the last report) and the last report's version.
func (s *workloadServer) status(workload string) (*workloadsv1.WorkloadStatus, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.statuses) == 0 {
		return nil, ""
	}
	last := s.statuses[len(s.statuses)-1]
	for _, w := range last.Workloads {
		if w.Name == workload {
			return w, last.Version
		}
	}
	return nil, last.Version
}

func (s *workloadServer) anyStatus(match func(*workloadsv1.WorkloadStatus) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.statuses {
		for _, w := range r.Workloads {
			if match(w) {
				return true
			}
		}
	}
	return false
}

func (s *workloadServer) object(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.objects[key]
	return v, ok
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", what, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countingRunner counts a runner's calls; onApply, if set, runs when an
// Apply starts.
type countingRunner struct {
	*pods.Runner
	mu      sync.Mutex
	lists   int
	applies map[string]int
	onApply func(p pods.Pod)
}

func (c *countingRunner) List(ctx context.Context) ([]pods.Info, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Runner.List(ctx)
}

func (c *countingRunner) Apply(ctx context.Context, p pods.Pod) error {
	c.mu.Lock()
	c.applies[fmt.Sprintf("%s@%d", p.Workload, p.Revision)]++
	f := c.onApply
	c.mu.Unlock()
	if f != nil {
		f(p)
	}
	return c.Runner.Apply(ctx, p)
}

func (c *countingRunner) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applies[key]
}

// TestWorkloadsPodman runs a device's workloads on real podman through
// the agent, against a test server of the WorkloadService contract: a
// workload runs, a log tail is answered, revision 2 replaces the pod, a
// container exiting 3 shows Degraded with its exit code and restarts, the
// agent stopped mid-deploy and restarted leaves one pod, a stopped pod is
// started after a reboot, an image that cannot be pulled is an Error
// retried, an older version is refused, a removed workload's pod goes.
// The export directory's files reach the object store, changed ones
// again, deleted ones deleted.
func TestWorkloadsPodman(t *testing.T) {
	dir := t.TempDir()
	runID := hex.EncodeToString(randomBytes(t, 4))
	env, err := podmantest.Setup(filepath.Join(dir, "podman"), "localhost/eim-agent-test:"+runID)
	if env.Skip != "" {
		if os.Getenv("EIM_REQUIRE_PODMAN") != "" {
			t.Fatalf("EIM_REQUIRE_PODMAN is set but %s", env.Skip)
		}
		t.Skip(env.Skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.RemoveImage)

	s, ca := newWorkloadServer(t)
	name := "t" + runID + "-app"
	bad := "t" + runID + "-bad"
	runner := &countingRunner{Runner: pods.New(pods.Config{ContainersConf: env.Conf, Network: "none", TempDir: dir}), applies: map[string]int{}}
	t.Cleanup(func() {
		runner.Runner.Remove(context.Background(), name)
		runner.Runner.Remove(context.Background(), bad)
	})
	export := filepath.Join(dir, "data", "export") // created by the agent
	state := filepath.Join(dir, "state")
	heartbeats := 0
	var hbMu sync.Mutex
	client, err := agent.Dial(s.url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()

	// start runs a Node until stop is called; bootID names the boot.
	start := func(bootID string) (stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		n := &agent.Node{
			Client: client, StateDir: state, BootID: bootID, Pods: runner,
			Config:        agent.NodeConfig{URL: s.url, CACertPEM: ca.pem, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p1"},
			Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			Wait:          func(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, 20*time.Millisecond) },
			WorkloadCheck: 500 * time.Millisecond, WorkloadRetry: agent.Backoff{Min: 200 * time.Millisecond, Max: time.Second},
			UploadRetry: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second},
			OnHeartbeat: func(*hostv1.HeartbeatResponse) {
				hbMu.Lock()
				heartbeats++
				hbMu.Unlock()
			},
		}
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		}
	}

	pod := func(rev int, restart string, containers ...string) []byte {
		y := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  volumes:
  - name: export
    hostPath:
      path: %s
      type: Directory
  containers:
`, name, restart, export)
		for _, c := range containers {
			cname, args, _ := strings.Cut(c, " ")
			y += fmt.Sprintf(`  - name: %s
    image: %s
    command: ["/prog", %s]
    volumeMounts:
    - name: export
      mountPath: /export
`, cname, env.Image, args)
		}
		return []byte(y)
	}
	workload := func(rev int64, y []byte) *workloadsv1.Workload {
		return &workloadsv1.Workload{Name: name, Revision: rev, PodYaml: y, DataPaths: []*workloadsv1.DataPath{{
			Direction: workloadsv1.DataPath_DIRECTION_EGRESS, Source: export, Target: "out", IntervalSeconds: 1,
			BandwidthBytesPerSecond: 1 << 20,
		}}}
	}
	phase := func(rev int64, want workloadsv1.WorkloadStatus_Phase) func() (bool, string) {
		return func() (bool, string) {
			st, _ := s.status(name)
			return st != nil && st.Revision == rev && st.Phase == want, fmt.Sprintf("%v", st)
		}
	}
	podsOf := func(w string) []pods.Info {
		infos, err := runner.Runner.List(context.Background())
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var out []pods.Info
		for _, info := range infos {
			if info.Workload == w {
				out = append(out, info)
			}
		}
		return out
	}
	objectIs := func(key, want string) func() (bool, string) {
		return func() (bool, string) {
			got, ok := s.object(key)
			return ok && got == want, fmt.Sprintf("%q (present %v)", got, ok)
		}
	}
	key := "host-1/" + name + "/out/"

	// Revision 1 runs; its file reaches the store.
	s.publish("1", nil, workload(1, pod(1, "Always", `main "echo:started", "write:/export/a.txt=one", "write:/export/sub/b.txt=bee", "forever"`)))
	began := time.Now()
	stop := start("boot-1")
	waitFor(t, "revision 1 Running", phase(1, workloadsv1.WorkloadStatus_PHASE_RUNNING))
	t.Logf("revision 1 reported Running %v after the agent started", time.Since(began).Round(time.Millisecond))
	st, version := s.status(name)
	if version != "1" || len(st.Containers) != 1 || st.Containers[0].Name != "main" || st.Containers[0].State != "running" || st.TransitionTime == 0 {
		t.Errorf("status of revision 1: got %v (version %q), want container main running, a transition time, version 1", st, version)
	}
	waitFor(t, "a.txt uploaded", objectIs(key+"a.txt", "one"))
	waitFor(t, "sub/b.txt uploaded", objectIs(key+"sub/b.txt", "bee"))
	// A status is sent when it changed, and in full when the server asks.
	s.mu.Lock()
	reports := len(s.statuses)
	s.mu.Unlock()
	for range 3 {
		runner.mu.Lock()
		lists := runner.lists
		runner.mu.Unlock()
		waitFor(t, "two podman checks", func() (bool, string) {
			runner.mu.Lock()
			defer runner.mu.Unlock()
			return runner.lists >= lists+2, fmt.Sprint(runner.lists)
		})
	}
	s.mu.Lock()
	if got := len(s.statuses); got != reports {
		t.Errorf("reports while nothing changed: got %d more, want none", got-reports)
	}
	s.wantFull = true
	s.mu.Unlock()
	waitFor(t, "a full report asked for", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.statuses) > reports, fmt.Sprintf("%d reports, want more than %d", len(s.statuses), reports)
	})
	first := podsOf(name)
	if len(first) != 1 {
		t.Fatalf("pods of %s: got %d, want 1", name, len(first))
	}

	// A log request rides on a new version of the same set: answered once,
	// the pod left alone.
	s.publish("2", []*workloadsv1.LogRequest{{Id: "log-1", Workload: name, TailLines: 10}}, workload(1, pod(1, "Always", `main "echo:started", "write:/export/a.txt=one", "write:/export/sub/b.txt=bee", "forever"`)))
	waitFor(t, "log request answered", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.logs) == 1, fmt.Sprintf("%d answers", len(s.logs))
	})
	s.mu.Lock()
	lr := s.logs[0]
	s.mu.Unlock()
	if lr.Id != "log-1" || len(lr.Logs) != 1 || lr.Logs[0].Container != "main" || string(lr.Logs[0].Text) != "started\n" || lr.Error != "" {
		t.Errorf("log answer: got %v, want main's %q", lr, "started\n")
	}
	if got := podsOf(name); len(got) != 1 || got[0].PodID != first[0].PodID {
		t.Errorf("a new version of the same revision replaced the pod: got %+v, want pod %s", got, first[0].PodID)
	}

	// Revision 2 replaces the pod; its changed file is uploaded again.
	s.publish("3", nil, workload(2, pod(2, "Always", `main "write:/export/a.txt=two", "forever"`)))
	began = time.Now()
	waitFor(t, "revision 2 Running", phase(2, workloadsv1.WorkloadStatus_PHASE_RUNNING))
	t.Logf("revision 2 reported Running %v after it was published", time.Since(began).Round(time.Millisecond))
	if got := podsOf(name); len(got) != 1 || got[0].PodID == first[0].PodID || got[0].Revision != 2 {
		t.Errorf("pods after revision 2: got %+v, want one new pod at revision 2", got)
	}
	waitFor(t, "a.txt uploaded again", objectIs(key+"a.txt", "two"))

	// Revision 3: a container exiting 3 beside one that runs; a.txt
	// deleted.
	s.publish("4", nil, workload(3, pod(3, "OnFailure", `main "rm:/export/a.txt", "forever"`, `fail "echo:failing", "exit:3"`)))
	waitFor(t, "revision 3 Degraded with fail Exited (3) and restarts", func() (bool, string) {
		ok := s.anyStatus(func(w *workloadsv1.WorkloadStatus) bool {
			if w.Name != name || w.Revision != 3 || w.Phase != workloadsv1.WorkloadStatus_PHASE_DEGRADED {
				return false
			}
			for _, c := range w.Containers {
				if c.Name == "fail" && (c.State == "exited" || c.State == "stopped") && c.ExitCode == 3 && c.Restarts >= 1 {
					return true
				}
			}
			return false
		})
		st, _ := s.status(name)
		return ok, fmt.Sprintf("%v", st)
	})
	waitFor(t, "a.txt deleted from the store", func() (bool, string) {
		_, ok := s.object(key + "a.txt")
		return !ok, "present"
	})

	// The polling of podman does not follow the heartbeat's pace.
	hbMu.Lock()
	hb := heartbeats
	hbMu.Unlock()
	runner.mu.Lock()
	lists := runner.lists
	runner.mu.Unlock()
	t.Logf("%d heartbeats, %d podman listings", hb, lists)
	if lists*2 > hb {
		t.Errorf("podman listed %d times in %d heartbeats, want far fewer (a bounded rate)", lists, hb)
	}

	// The agent is stopped while revision 4 deploys, and started again:
	// one pod, at revision 4.
	var once sync.Once
	stopped := make(chan struct{})
	runner.mu.Lock()
	runner.onApply = func(p pods.Pod) {
		if p.Revision != 4 {
			return
		}
		once.Do(func() {
			go func() {
				// Stop once podman shows the new pod, or when the play
				// is over (fast machines).
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if got := podsOf(name); len(got) == 1 && got[0].Revision == 4 {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				stop()
				close(stopped)
			}()
		})
	}
	runner.mu.Unlock()
	s.publish("5", nil, workload(4, pod(4, "Always", `main "echo:four", "forever"`)))
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("revision 4 was never applied")
	}
	runner.mu.Lock()
	runner.onApply = nil
	runner.mu.Unlock()
	stop = start("boot-1")
	waitFor(t, "revision 4 Running after the restart", phase(4, workloadsv1.WorkloadStatus_PHASE_RUNNING))
	if got := podsOf(name); len(got) != 1 || got[0].Revision != 4 {
		t.Errorf("pods after the restart mid-deploy: got %+v, want one at revision 4", got)
	}

	// A reboot: the pod stopped, the agent started in another boot starts
	// it.
	stop()
	if out, err := env.Command("pod", "stop", "-t", "0", name).CombinedOutput(); err != nil {
		t.Fatalf("pod stop: %v: %s", err, out)
	}
	stop = start("boot-2")
	waitFor(t, "the stopped pod started after the reboot", func() (bool, string) {
		got := podsOf(name)
		return len(got) == 1 && got[0].Status == pods.Running && got[0].Revision == 4, fmt.Sprintf("%+v", got)
	})

	// An image that cannot be pulled: Error with the reason, tried again.
	badPod := []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: x
spec:
  containers:
  - name: main
    image: localhost/eim-agent-test-nosuch:%s
`, runID))
	s.publish("6", nil, workload(4, pod(4, "Always", `main "echo:four", "forever"`)), &workloadsv1.Workload{Name: bad, Revision: 1, PodYaml: badPod})
	waitFor(t, "the bad workload in Error, tried again", func() (bool, string) {
		st, _ := s.status(bad)
		return st != nil && st.Phase == workloadsv1.WorkloadStatus_PHASE_ERROR && st.LastError != "" && runner.count(bad+"@1") >= 2,
			fmt.Sprintf("%v after %d attempts", st, runner.count(bad+"@1"))
	})

	// An older version offered is refused: the set applied stays.
	s.mu.Lock()
	s.version = "9"
	s.answer = &workloadsv1.GetWorkloadsResponse{Version: "3", Workloads: []*workloadsv1.Workload{workload(2, pod(2, "Always", `main "forever"`))}}
	s.asked = nil
	s.mu.Unlock()
	waitFor(t, "the older version asked for", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.asked) >= 2, fmt.Sprintf("%q", s.asked)
	})
	if got := podsOf(name); len(got) != 1 || got[0].Revision != 4 {
		t.Errorf("after an older version was offered: got %+v, want revision 4 kept", got)
	}
	s.mu.Lock()
	if slices.ContainsFunc(s.asked, func(v string) bool { return v != "6" }) {
		t.Errorf("GetWorkloads asked with versions %q, want 6 (the one applied) each time", s.asked)
	}
	s.mu.Unlock()

	// Removed from the set: the pods go, and their status.
	s.publish("10", nil)
	waitFor(t, "pods removed", func() (bool, string) {
		a, b := podsOf(name), podsOf(bad)
		st, v := s.status(name)
		return len(a)+len(b) == 0 && st == nil && v == "10", fmt.Sprintf("%d pods, status %v at %q", len(a)+len(b), st, v)
	})
	stop()

	// The state file holds the workloads' secrets: it is root's alone.
	info, err := os.Stat(filepath.Join(state, "workloads.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("workloads.json: %v, mode %v; want 0600", err, info)
	}
}

// A server without the workloads service: the agent asks once, then
// leaves workloads alone (and never touches podman).
func TestWorkloadsServerWithout(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 1}, nil
	}
	s.heartbeat = func(int, *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		return &hostv1.HeartbeatResponse{IntervalSeconds: 1, WorkloadsVersion: "7"}, nil
	}
	var mu sync.Mutex
	asked := 0
	mux := http.NewServeMux()
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.HandleFunc("/oauth2/token", s.serveToken)
	mux.HandleFunc(workloadsv1connect.WorkloadServiceGetWorkloadsProcedure, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		mu.Unlock()
		http.NotFound(w, r)
	})
	url := ca.startTLS(t, mux).URL
	client, err := agent.Dial(url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	n := &agent.Node{
		Client: client, StateDir: t.TempDir(),
		Pods:   pods.New(pods.Config{Podman: "/nonexistent/podman"}),
		Config: agent.NodeConfig{URL: url, CACertPEM: ca.pem, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p1"},
		Wait:   func(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, 5*time.Millisecond) },
		OnHeartbeat: func(*hostv1.HeartbeatResponse) {
			mu.Lock()
			k := asked
			mu.Unlock()
			if k > 0 && s.calls("heartbeat") >= 50 {
				cancel()
			}
		},
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("GetWorkloads asked %d times in %d heartbeats of a server without it, want 1", asked, s.calls("heartbeat"))
	}
}
