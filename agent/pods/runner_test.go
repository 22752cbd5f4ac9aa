package pods_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/pods"
	"github.com/eimhq/eim/internal/podmantest"
)

// The tests run real podman (Debian's 4.3.1 with runc): an image of
// busybox-static built offline once per run, pods named t<run>-<test> so
// runs never meet.
var (
	runID    string
	image    string
	conf     string // containers.conf of the run
	skipWhy  string // set when podman or busybox is missing
	setupErr error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	runID = hex.EncodeToString(b)
	dir, err := os.MkdirTemp("", "eim-pods-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if _, err := exec.LookPath("podman"); err != nil {
		skipWhy = "podman is not installed"
		return m.Run()
	}
	// Pods in a storage of this process's own: an agent under test in
	// another package removes every workload pod it was not given.
	cleanup, err := podmantest.Isolate(filepath.Join(dir, "storage"))
	if err != nil {
		panic(err)
	}
	defer cleanup()
	busybox, err := exec.LookPath("busybox")
	if err != nil || !static(busybox) {
		skipWhy = "a static busybox (busybox-static) is not installed"
		return m.Run()
	}
	// crun cannot raise rlimits nor use the hybrid cgroup layout of these
	// machines: runc, and ulimits at or below the current ones.
	conf = filepath.Join(dir, "containers.conf")
	setupErr = os.WriteFile(conf, []byte(`[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
`), 0o644)
	if setupErr == nil {
		image = "localhost/eim-pods-test:" + runID
		setupErr = buildImage(dir, busybox)
		if setupErr == nil {
			defer podmanCmd("rmi", "-f", image).Run()
		}
	}
	return m.Run()
}

// static reports whether the ELF file at path needs no dynamic loader.
func static(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// buildImage packs busybox FROM scratch, without network.
func buildImage(dir, busybox string) error {
	root := filepath.Join(dir, "ctx", "rootfs", "bin")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "busybox"), bin, 0o755); err != nil {
		return err
	}
	for _, applet := range []string{"sh", "echo", "sleep", "env"} {
		if err := os.Symlink("busybox", filepath.Join(root, applet)); err != nil {
			return err
		}
	}
	ctx := filepath.Join(dir, "ctx")
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte("FROM scratch\nCOPY rootfs/ /\n"), 0o644); err != nil {
		return err
	}
	out, err := podmanCmd("build", "--network=none", "-q", "-t", image, "-f", filepath.Join(ctx, "Containerfile"), ctx).CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman build: %v: %s", err, out)
	}
	return nil
}

func podmanCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(cmd.Environ(), "CONTAINERS_CONF="+conf)
	return cmd
}

// setup returns a Runner and a name unique to this run and test, removing
// the workload's pod when the test ends.
func setup(t *testing.T, name string) (*pods.Runner, string) {
	t.Helper()
	if skipWhy != "" {
		if os.Getenv("EIM_REQUIRE_PODMAN") != "" {
			t.Fatalf("EIM_REQUIRE_PODMAN is set but %s", skipWhy)
		}
		t.Skip(skipWhy)
	}
	if setupErr != nil {
		t.Fatalf("setup: %v", setupErr)
	}
	workload := "t" + runID + "-" + name
	r := newRunner(t)
	t.Cleanup(func() {
		if err := r.Remove(context.Background(), workload); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return r, workload
}

func newRunner(t *testing.T) *pods.Runner {
	return pods.New(pods.Config{ContainersConf: conf, Network: "none", TempDir: t.TempDir()})
}

func podYAML(workload, containers string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: whatever
spec:
  restartPolicy: Never
  containers:
%s`, strings.ReplaceAll(containers, "IMAGE", image)))
}

const sleeper = `  - name: main
    image: IMAGE
    command: ["/bin/sh", "-c", "echo started; sleep 600"]
`

func find(t *testing.T, r *pods.Runner, workload string) (pods.Info, bool) {
	t.Helper()
	infos, err := r.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, info := range infos {
		if info.Workload == workload {
			return info, true
		}
	}
	return pods.Info{}, false
}

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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

func waitStatus(t *testing.T, r *pods.Runner, workload string, want pods.Status) pods.Info {
	t.Helper()
	var info pods.Info
	eventually(t, workload+" "+string(want), func() (bool, string) {
		var ok bool
		info, ok = find(t, r, workload)
		return ok && info.Status == want, fmt.Sprintf("%+v (found %v)", info, ok)
	})
	return info
}

func TestApplyRevisions(t *testing.T) {
	r, w := setup(t, "rev")
	ctx := context.Background()
	p := pods.Pod{Workload: w, Revision: 1, YAML: podYAML(w, sleeper)}
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("Apply revision 1: %v", err)
	}
	first := waitStatus(t, r, w, pods.Running)
	if first.Revision != 1 || len(first.Containers) != 1 || first.Containers[0].Name != "main" || first.Containers[0].State != "running" {
		t.Fatalf("revision 1: got %+v, want revision 1 with container main running", first)
	}
	if first.Containers[0].Started.IsZero() {
		t.Errorf("container main: no start time")
	}
	out, err := podmanCmd("pod", "inspect", "--format", "{{.Name}}", first.PodID).Output()
	if err != nil || strings.TrimSpace(string(out)) != w {
		t.Errorf("pod name: got %q (%v), want %q", out, err, w)
	}

	// The same revision again: the pod is left alone.
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("Apply revision 1 again: %v", err)
	}
	again, _ := find(t, r, w)
	if again.PodID != first.PodID {
		t.Fatalf("Apply of the same revision recreated the pod: got ID %s, want %s", again.PodID, first.PodID)
	}

	// A new revision replaces it.
	p.Revision = 2
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("Apply revision 2: %v", err)
	}
	second := waitStatus(t, r, w, pods.Running)
	if second.PodID == first.PodID || second.Revision != 2 {
		t.Fatalf("revision 2: got pod %s revision %d, want a new pod (not %s) at revision 2", second.PodID, second.Revision, first.PodID)
	}
	infos, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, info := range infos {
		if info.Workload == w {
			n++
		}
	}
	if n != 1 {
		t.Errorf("pods of %s after revision 2: got %d, want 1", w, n)
	}

	// The agent restarts: a fresh Runner finds the pod by its labels.
	fresh := newRunner(t)
	got, ok := find(t, fresh, w)
	if !ok || got.PodID != second.PodID || got.Revision != 2 || got.Status != pods.Running {
		t.Fatalf("fresh Runner's List: got %+v (found %v), want pod %s revision 2 Running", got, ok, second.PodID)
	}
	if err := fresh.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, _ := find(t, fresh, w); got.PodID != second.PodID {
		t.Errorf("fresh Runner's Apply of the running revision: got pod %s, want %s", got.PodID, second.PodID)
	}

	// Logs.
	eventually(t, "logs of main", func() (bool, string) {
		b, err := r.Logs(ctx, w, "main", 10)
		return err == nil && string(b) == "started\n", fmt.Sprintf("%q, %v", b, err)
	})
	if _, err := r.Logs(ctx, w, "nosuch", 10); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("Logs of an unknown container: got %v, want %s", err, eim.ENOTFOUND)
	}

	// Stopped as a whole (an operator, a reboot).
	if out, err := podmanCmd("pod", "stop", "-t", "0", w).CombinedOutput(); err != nil {
		t.Fatalf("pod stop: %v: %s", err, out)
	}
	waitStatus(t, r, w, pods.Stopped)

	// Remove, twice.
	if err := r.Remove(ctx, w); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, ok := find(t, r, w); ok {
		t.Fatalf("Remove: pod %s still listed", w)
	}
	if err := r.Remove(ctx, w); err != nil {
		t.Fatalf("Remove of an absent workload: got %v, want nil", err)
	}
}

func TestExitCode(t *testing.T) {
	r, w := setup(t, "exit")
	ctx := context.Background()
	err := r.Apply(ctx, pods.Pod{Workload: w, Revision: 1, YAML: podYAML(w, sleeper+`  - name: fail
    image: IMAGE
    command: ["/bin/sh", "-c", "echo failing >&2; exit 3"]
`)})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	info := waitStatus(t, r, w, pods.Degraded)
	if len(info.Containers) != 2 {
		t.Fatalf("containers: got %+v, want fail and main", info.Containers)
	}
	fail, main := info.Containers[0], info.Containers[1]
	if fail.Name != "fail" || fail.State != "exited" || fail.ExitCode != 3 || fail.Finished.IsZero() {
		t.Errorf("container fail: got %+v, want exited with code 3 and a finish time", fail)
	}
	if main.Name != "main" || main.State != "running" {
		t.Errorf("container main: got %+v, want running", main)
	}
	b, err := r.Logs(ctx, w, "fail", 0)
	if err != nil || string(b) != "failing\n" {
		t.Errorf("Logs of fail (stderr): got %q, %v, want %q", b, err, "failing\n")
	}

	// Alone, the failing container leaves the pod Exited.
	w2 := w + "-alone"
	t.Cleanup(func() { r.Remove(context.Background(), w2) })
	err = r.Apply(ctx, pods.Pod{Workload: w2, Revision: 1, YAML: podYAML(w2, `  - name: fail
    image: IMAGE
    command: ["/bin/sh", "-c", "exit 3"]
`)})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	info = waitStatus(t, r, w2, pods.Exited)
	if c := info.Containers; len(c) != 1 || c[0].ExitCode != 3 {
		t.Errorf("containers: got %+v, want fail with exit code 3", c)
	}
}

func TestConfigMapAndSecret(t *testing.T) {
	r, w := setup(t, "env")
	ctx := context.Background()
	cm := []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
`)
	p := pods.Pod{
		Workload:   w,
		Revision:   1,
		ConfigMaps: [][]byte{cm},
		Secrets:    map[string]map[string][]byte{"creds": {"password": []byte("s3cr3t")}},
		YAML: podYAML(w, `  - name: main
    image: IMAGE
    command: ["/bin/sh", "-c", "echo mode=$MODE password=$PASSWORD; sleep 600"]
    env:
    - name: MODE
      valueFrom:
        configMapKeyRef:
          name: settings
          key: mode
    - name: PASSWORD
      valueFrom:
        secretKeyRef:
          name: creds
          key: password
`),
	}
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	waitStatus(t, r, w, pods.Running)
	eventually(t, "env in the logs", func() (bool, string) {
		b, err := r.Logs(ctx, w, "main", 1)
		return err == nil && string(b) == "mode=fast password=s3cr3t\n", fmt.Sprintf("%q, %v", b, err)
	})

	// The secret is the workload's: it goes with it.
	if err := r.Remove(ctx, w); err != nil {
		t.Fatal(err)
	}
	out, err := podmanCmd("secret", "ls", "--format", "{{.Name}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(w)) {
		t.Errorf("secrets after Remove: got %q, want none of %s", out, w)
	}
}

func TestApplyFailureLeavesNothing(t *testing.T) {
	r, w := setup(t, "fail")
	ctx := context.Background()
	p := pods.Pod{
		Workload: w,
		Revision: 1,
		Secrets:  map[string]map[string][]byte{"creds": {"k": []byte("v")}},
		YAML: []byte(`apiVersion: v1
kind: Pod
spec:
  containers:
  - name: main
    image: localhost/eim-pods-test-nosuch:` + runID + `
    env:
    - name: K
      valueFrom:
        secretKeyRef: {name: creds, key: k}
`),
	}
	if err := r.Apply(ctx, p); err == nil {
		t.Fatal("Apply of a missing image: got nil, want an error")
	}
	if info, ok := find(t, r, w); ok {
		t.Fatalf("after a failed Apply: got pod %+v, want none (so that the next Apply tries again)", info)
	}
	out, err := podmanCmd("secret", "ls", "--format", "{{.Name}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(w)) {
		t.Errorf("secrets after a failed Apply: got %q, want none of %s", out, w)
	}
	if err := r.Apply(ctx, p); err == nil {
		t.Fatal("second Apply of a missing image: got nil, want an error (tried again)")
	}
}

func TestApplyInvalid(t *testing.T) {
	r := pods.New(pods.Config{Podman: "/nonexistent/podman"})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pod  pods.Pod
		want string
	}{
		{"workload name", pods.Pod{Workload: "Bad_Name", YAML: podYAML("x", sleeper)}, "workload"},
		{"not a pod", pods.Pod{Workload: "w", YAML: []byte("kind: Deployment\n")}, "kind"},
		{"two documents", pods.Pod{Workload: "w", YAML: append(podYAML("x", sleeper), "---\nkind: Pod\n"...)}, "one document"},
		{"unknown secret", pods.Pod{Workload: "w", YAML: podYAML("x", `  - name: main
    image: IMAGE
    env:
    - name: P
      valueFrom:
        secretKeyRef: {name: nosuch, key: k}
`)}, `secret "nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Apply(ctx, tc.pod)
			var e *eim.Error
			if !errors.As(err, &e) || e.Code != eim.EINVALID || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("got %v, want %s naming %q", err, eim.EINVALID, tc.want)
			}
		})
	}
	for _, w := range []string{"", "a_b", "UPPER"} {
		if err := r.Remove(ctx, w); eim.ErrorCode(err) != eim.EINVALID {
			t.Errorf("Remove(%q): got %v, want %s", w, err, eim.EINVALID)
		}
	}
}

// TestApplyRepairsInterruptedPlay: kube play creates the pod with its
// labels, then pulls each image and creates each container; an agent
// killed meanwhile leaves the revision's pod without its last
// containers. Here a play by hand stops at the second container (its
// image is missing), leaving the pod and its first container, as such a
// kill does. The next Apply of that revision replaces it.
func TestApplyRepairsInterruptedPlay(t *testing.T) {
	r, w := setup(t, "interrupted")
	ctx := context.Background()
	half := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    %s: %s
    %s: "1"
    %s: main,side
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    command: ["/bin/sh", "-c", "sleep 600"]
  - name: side
    image: localhost/eim-pods-test-nosuch:%s
`, w, pods.LabelWorkload, w, pods.LabelRevision, pods.LabelContainers, image, runID)
	f := filepath.Join(t.TempDir(), "half.yaml")
	if err := os.WriteFile(f, []byte(half), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := podmanCmd("kube", "play", "--network", "none", f).CombinedOutput(); err == nil {
		t.Fatalf("play of a missing image: got success, want a failure: %s", out)
	}
	info, ok := find(t, r, w)
	if !ok {
		t.Fatal("after the interrupted play: no pod; the test needs the half-made one")
	}
	if !info.Incomplete || info.Revision != 1 || len(info.Containers) != 1 {
		t.Fatalf("half-made pod: got revision %d, incomplete %v, %d containers; want revision 1, incomplete, 1 container", info.Revision, info.Incomplete, len(info.Containers))
	}

	p := pods.Pod{Workload: w, Revision: 1, YAML: podYAML(w, sleeper+`  - name: side
    image: IMAGE
    command: ["/bin/sh", "-c", "sleep 600"]
`)}
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got, ok := find(t, r, w)
	if !ok {
		t.Fatal("after Apply: no pod")
	}
	if got.PodID == info.PodID || got.Incomplete || len(got.Containers) != 2 {
		t.Fatalf("after Apply: got pod %s (half-made %s), incomplete %v, %d containers; want a new complete pod of 2", got.PodID, info.PodID, got.Incomplete, len(got.Containers))
	}
	eventually(t, "the repaired pod runs", func() (bool, string) {
		info, _ := find(t, r, w)
		return info.Status == pods.Running, string(info.Status)
	})
	// Complete now: the same revision is left alone.
	if err := r.Apply(ctx, p); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if again, _ := find(t, r, w); again.PodID != got.PodID {
		t.Errorf("second Apply of the same revision: got pod %s, want %s kept", again.PodID, got.PodID)
	}
}

// TestApplyRepairsPlayInterruptedBeforeStart: kube play starts the pod's
// containers once it has created them all; killed in between, it leaves
// a pod with every container, none started (`kube play --start=false`
// makes the same here). The next Apply of that revision replaces it.
func TestApplyRepairsPlayInterruptedBeforeStart(t *testing.T) {
	r, w := setup(t, "unstarted")
	ctx := context.Background()
	unstarted := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    %s: %s
    %s: "1"
    %s: main
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    command: ["/bin/sh", "-c", "sleep 600"]
`, w, pods.LabelWorkload, w, pods.LabelRevision, pods.LabelContainers, image)
	f := filepath.Join(t.TempDir(), "unstarted.yaml")
	if err := os.WriteFile(f, []byte(unstarted), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := podmanCmd("kube", "play", "--network", "none", "--start=false", f).CombinedOutput(); err != nil {
		t.Fatalf("play --start=false: %v: %s", err, out)
	}
	info, ok := find(t, r, w)
	if !ok || !info.Incomplete || len(info.Containers) != 1 || info.Status != pods.Deploying {
		t.Fatalf("pod never started: got %+v (found %v), want it incomplete, Deploying, with its container", info, ok)
	}
	if err := r.Apply(ctx, pods.Pod{Workload: w, Revision: 1, YAML: podYAML(w, sleeper)}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	eventually(t, "the replaced pod runs", func() (bool, string) {
		got, _ := find(t, r, w)
		return got.PodID != info.PodID && !got.Incomplete && got.Status == pods.Running, fmt.Sprintf("pod %s (was %s), incomplete %v, %s", got.PodID, info.PodID, got.Incomplete, got.Status)
	})
}

// TestApplyRemovesLeftoverStorageContainer: a play killed while it
// created a container can leave the container in podman's storage and
// not in its database; no pod lists it, and its name failed every later
// play ("the container name … is already in use"). A failed build leaves
// such a container too, named after the image it started from
// (<image>-working-container): the test makes one with the name the
// workload's container would have.
func TestApplyRemovesLeftoverStorageContainer(t *testing.T) {
	r, w := setup(t, "leftover")
	base := "localhost/" + w + ":" + runID
	if out, err := podmanCmd("tag", image, base).CombinedOutput(); err != nil {
		t.Fatalf("tag: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = podmanCmd("rmi", "-f", base).Run() })
	leftover := w + "-working-container"
	t.Cleanup(func() { _ = podmanCmd("rm", "-f", "--ignore", leftover).Run() })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte("FROM "+base+"\nRUN /nonexistent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := podmanCmd("build", "--network=none", "--rm=false", "--force-rm=false", "-f", filepath.Join(dir, "Containerfile"), dir).CombinedOutput(); err == nil {
		t.Fatalf("build of a failing RUN: got success, want a failure: %s", out)
	}
	out, err := podmanCmd("ps", "-a", "--external", "--format", "{{.Names}}").Output()
	if err != nil || !strings.Contains(string(out), leftover) {
		t.Fatalf("storage containers: got %q (%v), want %s among them: the test needs it", out, err, leftover)
	}

	p := pods.Pod{Workload: w, Revision: 1, YAML: podYAML(w, `  - name: working-container
    image: IMAGE
    command: ["/bin/sh", "-c", "sleep 600"]
`)}
	if err := r.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply with a leftover storage container of its name: %v", err)
	}
	eventually(t, "the pod runs", func() (bool, string) {
		info, _ := find(t, r, w)
		return info.Status == pods.Running, string(info.Status)
	})
}
