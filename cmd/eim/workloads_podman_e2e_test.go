package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/pods"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/podmantest"
	"github.com/eimhq/eim/internal/s3test"
	"github.com/eimhq/eim/workloads"
)

// TestWorkloadsE2E: device workloads end to end, through the API. The real
// server (Main, SQLite, every module) and a real device on this machine:
// the agent's own code in process (agent.Provisioner's Enroll, as
// `eim-agent enroll` runs it, then agent.Node with podman's pods.Runner)
// and Debian's podman. An unknown device with its OS installed enrolls
// with the project's token, waits in the lobby, is approved with the label
// role=camera and reaches RUNNING; a workload selecting role=camera with
// an egress data path runs on it (status Running, by the API); the files
// its container writes reach a real S3 server (versitygw, checking
// signatures) under the device's prefix, which the device never holds the
// keys of: a changed file is uploaded again, a deleted one deleted. Its
// ingress data path brings the objects put in the bucket for it (the
// workload's shared prefix and the device's own) into the pod's
// /export/models, where the container reads one (it copies it to its
// egress path, so it comes back to the bucket); a changed object is
// downloaded again, a deleted one's file removed.
// Revision 2 replaces the pod (podman shows its label); revision 4, without
// the ingress path, has the downloaded files removed (not the one the pod
// wrote there); deleting the workload removes the pod and its status.
func TestWorkloadsE2E(t *testing.T) {
	runID := randomHex(t)[:8]
	dir := t.TempDir()
	env, err := podmantest.Setup(filepath.Join(dir, "podman"), "localhost/eim-wle2e:"+runID)
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
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "edge")

	s := startDay0(t, "--heartbeat-interval", "1s")
	ctx := t.Context()
	const project = "wle2e"
	if _, err := s.admin.CreateProject(ctx, project); err != nil {
		t.Fatal(err)
	}
	ps, err := s.admin.UpdateProjectSettings(ctx, project, client.SettingsChange{EnrollmentToken: "new"})
	if err != nil {
		t.Fatal(err)
	}
	secret := s3.Creds.SecretKey
	osv, err := s.admin.PutObjectStorage(ctx, project, client.ObjectStorageInput{Endpoint: s3.URL, Bucket: "edge", Region: s3.Region,
		PathStyle: true, AccessKeyID: s3.Creds.AccessKeyID, SecretAccessKey: &secret})
	if err != nil || osv.Reachable.Status != eim.StorageReachableOK {
		t.Fatalf("object storage on versitygw: got %+v, %v; want REACHABLE", osv, err)
	}

	// 1. The device enrolls and waits in the lobby.
	id := sim.Generate(1, 2708)[0]
	hc, err := agent.Dial(s.agentURL, s.ca(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	prov := &agent.Provisioner{Client: hc, URL: s.agentURL, EnrollToken: ps.EnrollmentToken, Logger: logger,
		Identity: agent.Identity{UUID: id.UUID, Serial: id.Serial, Hostname: "cam-" + runID},
		Labels:   []agent.Label{{Key: "line", Value: "1"}}, Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second},
		MaxPendingWait: 200 * time.Millisecond}
	var waits atomic.Int64
	prov.OnLobby = func(denied bool, msg string) {
		if !denied && strings.Contains(msg, "waiting for approval in project "+project) {
			waits.Add(1)
		}
	}
	type enrolled struct {
		res agent.Result
		err error
	}
	enrolledc := make(chan enrolled, 1)
	go func() {
		res, err := prov.Enroll(ctx)
		enrolledc <- enrolled{res, err}
	}()
	req := s.request(t, project, sim.Identity{Serial: id.Serial})
	if req.State != eim.EnrollmentPending || !req.Installed {
		t.Fatalf("enrollment request: got %+v, want PENDING and installed", req)
	}
	waitFor(t, "the device told three times to wait", func() bool { return waits.Load() >= 3 })
	if page, err := s.admin.ListEnrollmentRequests(ctx, project, client.EnrollmentListOptions{}); err != nil || page.TotalElements != 1 {
		t.Fatalf("requests after %d calls: %+v, %v; want one", waits.Load(), page, err)
	}
	appr, err := s.admin.ApproveEnrollment(ctx, project, req.ID, client.Approval{Name: "camera-1",
		Metadata: eim.Metadata{{Key: "role", Value: "camera"}}})
	if err != nil || appr.HostID == "" {
		t.Fatalf("approve: %+v, %v", appr, err)
	}
	var res agent.Result
	select {
	case e := <-enrolledc:
		if e.err != nil {
			t.Fatalf("Enroll: %v", e.err)
		}
		res = e.res
	case <-time.After(60 * time.Second):
		t.Fatal("the approved device was not let in within 60 s")
	}
	if res.HostID != appr.HostID || res.Project != project {
		t.Fatalf("enrolled as host %s of %s, want %s of %s", res.HostID, res.Project, appr.HostID, project)
	}
	hostID := res.HostID

	// Node mode with podman, as `eim-agent enroll` goes on to run it.
	runner := pods.New(pods.Config{ContainersConf: env.Conf, Network: "none", TempDir: dir})
	name := "cam-" + runID
	t.Cleanup(func() {
		_ = runner.Remove(context.Background(), name)
		// The rendered pod's data volume is the device's fixed path.
		_ = os.RemoveAll(filepath.Join(workloads.DeviceDataRoot, name))
	})
	hooked := &applyHook{Runner: runner, applied: make(chan int64, 16)}
	// startNode runs the node until the returned stop is called.
	startNode := func() (stop func()) {
		nodeCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		n := &agent.Node{Client: hc, Logger: logger, Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second},
			Config: agent.NodeConfig{URL: s.agentURL, CACertPEM: s.ca(t), ClientID: res.ClientID, ClientSecret: res.ClientSecret,
				HostID: res.HostID, Project: res.Project, TokenURL: res.TokenURL},
			StateDir: filepath.Join(dir, "state"), BootID: "boot-1", Hostname: "cam-" + runID,
			Pods: hooked, WorkloadCheck: 500 * time.Millisecond,
			WorkloadRetry: agent.Backoff{Min: 200 * time.Millisecond, Max: time.Second},
			UploadRetry:   agent.Backoff{Min: 200 * time.Millisecond, Max: time.Second}}
		go func() { done <- n.Run(nodeCtx) }()
		var stopped bool
		return func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("the node's Run = %v, want context.Canceled", err)
			}
		}
	}
	stopNode := startNode()
	t.Cleanup(func() { stopNode() })
	var h eim.Host
	waitFor(t, "the approved device RUNNING", func() bool {
		if err := s.admin.Get(ctx, project, eim.KindHost, hostID, &h); err != nil {
			t.Fatal(err)
		}
		return h.HostStatus == "Running" && h.CurrentState == eim.HostStateOnboarded
	})

	// 2. A workload selecting role=camera, with an egress data path.
	workload := func(steps ...string) *client.EdgeWorkloadInput {
		return &client.EdgeWorkloadInput{Name: name, Spec: eim.EdgeWorkloadSpec{
			DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"role": "camera"}},
			Pod: eim.PodTemplate{Spec: eim.PodSpec{RestartPolicy: "Always", Containers: []eim.Container{
				{Name: "reader", Image: env.Image, Command: append([]string{env.Prog}, steps...)}}}},
			Data: &eim.DataConfig{Egress: []eim.DataPath{{Source: "frames", Target: "frames", IntervalSeconds: 1}},
				Ingress: []eim.DataPath{{Source: "models", Target: "models", IntervalSeconds: 1}}},
		}}
	}
	// Files for the workload's ingress data path: one for every device of
	// the workload, one for this device.
	shared, own := eim.SharedIngressPrefix(name, "models"), hostID+"/"+name+"/models/"
	s3.Put(t, "edge", shared+"net.bin", []byte("weights v1"))
	s3.Put(t, "edge", own+"own.cfg", []byte("mode=a"))
	began := time.Now()
	w, err := s.admin.CreateEdgeWorkload(ctx, project, workload("write:/export/frames/a.txt=one", "write:/export/frames/sub/b.txt=bee",
		"copy:/export/models/net.bin=/export/frames/seen.bin", "write:/export/models/mine.txt=pod's", "forever"))
	if err != nil || w.Revision != 1 {
		t.Fatalf("create the workload: %+v, %v", w, err)
	}
	running := func(rev int64) func() bool {
		return func() bool {
			st, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name)
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			return st.Revision == rev && st.Devices.Total == 1 && st.Devices.Running == 1 &&
				len(devs) == 1 && devs[0].HostID == hostID && devs[0].Revision == rev && devs[0].Phase == "Running" && devs[0].Summary == "running"
		}
	}
	waitFor(t, "revision 1 Running on the device", running(1))
	t.Logf("revision 1 Running %v after its creation", time.Since(began).Round(time.Millisecond))
	st, devs, _ := s.admin.EdgeWorkloadStatus(ctx, project, name)
	if len(st.ByRevision) != 1 || st.ByRevision[0].Revision != 1 || st.ByRevision[0].Running != 1 ||
		len(devs[0].Containers) != 1 || devs[0].Containers[0].Name != "reader" {
		t.Fatalf("status of revision 1: got %+v and %+v", st, devs)
	}
	if got := podmanRevisions(t, env, name); len(got) != 1 || got[0] != "1" {
		t.Fatalf("podman's pods of %s: got revisions %v, want one at 1", name, got)
	}

	// 3. The files reach the bucket under the device's prefix.
	prefix := hostID + "/" + name + "/frames/"
	object := func(key, want string) func() bool {
		return func() bool {
			b, ok := s3.Get(t, "edge", prefix+key)
			return ok && string(b) == want
		}
	}
	waitFor(t, "a.txt in the bucket", object("a.txt", "one"))
	waitFor(t, "sub/b.txt in the bucket", object("sub/b.txt", "bee"))
	waitFor(t, "lastDataUpload in the device's status", func() bool {
		_, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name)
		return err == nil && len(devs) == 1 && !devs[0].LastDataUpload.IsZero() && len(devs[0].UploadErrors) == 0
	})
	// The device never held the bucket's secret key: nothing it keeps
	// holds it (its grants are presigned URLs, which name only the key's
	// ID).
	checkNoKeys(t, filepath.Join(dir, "state"), s3.Creds.SecretKey)

	// 3b. The ingress files reach the device's directory, which the pod
	// mounts: the container read net.bin at /export/models (its copy came
	// back through the egress path).
	models := filepath.Join(workloads.DeviceDataRoot, name, "data", "models")
	onDevice := func(file, want string) func() bool {
		return func() bool {
			b, err := os.ReadFile(filepath.Join(models, file))
			if want == "" {
				return os.IsNotExist(err)
			}
			return err == nil && string(b) == want
		}
	}
	waitFor(t, "net.bin (shared) on the device", onDevice("net.bin", "weights v1"))
	waitFor(t, "own.cfg (the device's) on the device", onDevice("own.cfg", "mode=a"))
	waitFor(t, "net.bin read by the pod at /export/models", object("seen.bin", "weights v1"))
	waitFor(t, "lastDataDownload in the device's status", func() bool {
		_, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name)
		return err == nil && len(devs) == 1 && !devs[0].LastDataDownload.IsZero() && len(devs[0].DownloadErrors) == 0
	})
	// Changed in the bucket: downloaded again; deleted: removed.
	s3.Put(t, "edge", shared+"net.bin", []byte("weights v2, larger"))
	s3.Delete(t, "edge", own+"own.cfg")
	waitFor(t, "the changed net.bin on the device", onDevice("net.bin", "weights v2, larger"))
	waitFor(t, "own.cfg removed from the device", onDevice("own.cfg", ""))
	checkNoKeys(t, filepath.Join(dir, "state"), s3.Creds.SecretKey)

	// 4. Revision 2 replaces the pod; it changes a.txt and deletes b.txt.
	began = time.Now()
	w, err = s.admin.ReplaceEdgeWorkload(ctx, project, workload("write:/export/frames/a.txt=two", "rm:/export/frames/sub/b.txt", "forever"))
	if err != nil || w.Revision != 2 {
		t.Fatalf("replace the workload: %+v, %v; want revision 2", w, err)
	}
	waitFor(t, "revision 2 Running on the device", running(2))
	t.Logf("revision 2 Running %v after the replace", time.Since(began).Round(time.Millisecond))
	if got := podmanRevisions(t, env, name); len(got) != 1 || got[0] != "2" {
		t.Fatalf("podman's pods of %s: got revisions %v, want one at 2", name, got)
	}
	waitFor(t, "a.txt changed in the bucket", object("a.txt", "two"))
	waitFor(t, "sub/b.txt deleted from the bucket", func() bool {
		_, ok := s3.Get(t, "edge", prefix+"sub/b.txt")
		return !ok
	})
	if keys := s3.List(t, "edge", prefix); len(keys) != 2 || keys[0] != prefix+"a.txt" || keys[1] != prefix+"seen.bin" {
		t.Fatalf("the device's uploads: got %v, want %sa.txt and seen.bin", keys, prefix)
	}

	// Revision 3: a container exiting 3 beside one that runs: the device
	// is degraded, with the container's exit code and restarts.
	w3 := workload("forever")
	w3.Spec.Pod.Spec.RestartPolicy = "OnFailure"
	w3.Spec.Pod.Spec.Containers = append(w3.Spec.Pod.Spec.Containers, eim.Container{Name: "fail", Image: env.Image,
		Command: []string{env.Prog, "echo:failing", "exit:3"}})
	if w, err = s.admin.ReplaceEdgeWorkload(ctx, project, w3); err != nil || w.Revision != 3 {
		t.Fatalf("replace the workload: %+v, %v; want revision 3", w, err)
	}
	waitFor(t, "revision 3 degraded with fail exited (3) and restarts", func() bool {
		st, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if st.Devices.Degraded != 1 || len(devs) != 1 || devs[0].Revision != 3 || devs[0].Phase != "Degraded" || devs[0].Summary != "degraded" {
			return false
		}
		for _, c := range devs[0].Containers {
			if c.Name == "fail" && (c.State == "exited" || c.State == "stopped") && c.ExitCode == 3 && c.Restarts >= 1 {
				return true
			}
		}
		return false
	})

	// Revision 4 while the agent is stopped mid-deploy (once podman shows
	// the new pod) and started again: one pod, at revision 4, Running.
	for len(hooked.applied) > 0 {
		<-hooked.applied
	}
	w4 := workload("echo:four", "forever")
	w4.Spec.Data.Ingress = nil // and without its ingress data path
	if w, err = s.admin.ReplaceEdgeWorkload(ctx, project, w4); err != nil || w.Revision != 4 {
		t.Fatalf("replace the workload: %+v, %v; want revision 4", w, err)
	}
	select {
	case rev := <-hooked.applied:
		if rev != 4 {
			t.Fatalf("the agent applied revision %d, want 4", rev)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("revision 4 was not applied within 60 s")
	}
	waitFor(t, "revision 4's pod in podman", func() bool {
		revs := podmanRevisions(t, env, name)
		return len(revs) > 0 && revs[len(revs)-1] == "4"
	})
	stopNode()
	if _, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name); err == nil && len(devs) == 1 {
		t.Logf("agent stopped mid-deploy: the device last reported revision %d %s", devs[0].Revision, devs[0].Phase)
	}
	stopNode = startNode()
	waitFor(t, "revision 4 Running after the agent's restart", running(4))
	if got := podmanRevisions(t, env, name); len(got) != 1 || got[0] != "4" {
		t.Fatalf("podman's pods after the restart mid-deploy: got revisions %v, want one at 4", got)
	}
	// Revision 4 has no ingress path: the file the agent downloaded
	// there goes; the one the pod wrote there stays.
	waitFor(t, "net.bin removed with the ingress path", onDevice("net.bin", ""))
	if !onDevice("mine.txt", "pod's")() {
		t.Fatal("the pod's own file in the old ingress directory was removed")
	}

	// 5. Deleted: the pod goes, and the status.
	began = time.Now()
	if err := s.admin.DeleteEdgeWorkload(ctx, project, name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod gone from podman", func() bool { return len(podmanRevisions(t, env, name)) == 0 })
	t.Logf("pod removed %v after the delete", time.Since(began).Round(time.Millisecond))
	if _, _, err := s.admin.EdgeWorkloadStatus(ctx, project, name); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("status of the deleted workload: got %v, want ENOTFOUND", err)
	}
}

// podmanRevisions lists, from podman itself, the eim.io/revision label of
// each pod of the workload.
func podmanRevisions(t *testing.T, env podmantest.Env, workload string) []string {
	t.Helper()
	out, err := env.Command("pod", "ps", "--filter", "label="+pods.LabelWorkload+"="+workload, "--format", "json").Output()
	if err != nil {
		t.Fatalf("podman pod ps: %v", err)
	}
	var list []struct {
		Labels map[string]string
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("podman pod ps: %v: %s", err, out)
	}
	revs := make([]string, 0, len(list))
	for _, p := range list {
		revs = append(revs, p.Labels[pods.LabelRevision])
	}
	return revs
}

// applyHook tells, before each Apply, which revision the agent applies.
type applyHook struct {
	*pods.Runner
	applied chan int64
}

func (h *applyHook) Apply(ctx context.Context, p pods.Pod) error {
	select {
	case h.applied <- p.Revision:
	default:
	}
	return h.Runner.Apply(ctx, p)
}

// checkNoKeys fails when a file under dir holds one of the keys.
func checkNoKeys(t *testing.T, dir string, keys ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if strings.Contains(string(b), k) {
				return fmt.Errorf("%s holds the bucket's key %q", path, k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
