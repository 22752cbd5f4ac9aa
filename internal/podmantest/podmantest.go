// Package podmantest prepares tests that run real podman (Debian's 4.3
// with runc, as on these machines): a containers.conf with the runtime and
// ulimits podman needs here, and an image built offline FROM scratch with
// a static Go program (prog/main.go) whose arguments are steps:
// echo:TEXT, write:PATH=TEXT, rm:PATH, copy:SRC=DST (once SRC exists),
// sleep:DURATION, exit:N, forever.
package podmantest

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

//go:embed prog/main.go
var progSource []byte

// Env is a prepared podman.
type Env struct {
	// Skip says why podman cannot run here ("" when it can).
	Skip string
	// Conf is the containers.conf to pass as CONTAINERS_CONF.
	Conf string
	// Image is the test image (localhost/NAME:TAG); Prog is its program.
	Image string
	Prog  string
}

// Setup prepares podman in dir (which the caller removes) and builds the
// image named image (localhost/NAME:TAG). With podman missing, Env.Skip
// says so and err is nil; err is a failure to set up where podman is.
func Setup(dir, image string) (Env, error) {
	var env Env
	if _, err := exec.LookPath("podman"); err != nil {
		env.Skip = "podman is not installed"
		return env, nil
	}
	// crun cannot raise rlimits nor use the hybrid cgroup layout of these
	// machines: runc, and ulimits at or below the current ones.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return env, err
	}
	env.Conf = filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(env.Conf, []byte(`[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
`), 0o644); err != nil {
		return env, err
	}
	ctx := filepath.Join(dir, "image")
	src := filepath.Join(dir, "prog")
	for _, d := range []string{ctx, src} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return env, err
		}
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), progSource, 0o644); err != nil {
		return env, err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module prog\n\ngo 1.22\n"), 0o644); err != nil {
		return env, err
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(ctx, "prog"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return env, fmt.Errorf("build the test program: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte("FROM scratch\nCOPY prog /prog\nENTRYPOINT [\"/prog\"]\n"), 0o644); err != nil {
		return env, err
	}
	env.Image, env.Prog = image, "/prog"
	if out, err := env.Command("build", "--network=none", "-q", "-t", image, "-f", filepath.Join(ctx, "Containerfile"), ctx).CombinedOutput(); err != nil {
		return env, fmt.Errorf("podman build: %v: %s", err, out)
	}
	return env, nil
}

// Command is a podman command with the Env's containers.conf.
func (e Env) Command(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+e.Conf)
	return cmd
}

// RemoveImage removes the test image.
func (e Env) RemoveImage() {
	if e.Image != "" {
		_ = e.Command("rmi", "-f", e.Image).Run()
	}
}

// Isolate gives this test process a podman storage of its own under dir
// (images, containers, pods and their locks), by setting
// CONTAINERS_STORAGE_CONF in the process's environment, which the podman
// commands it starts inherit. Tests of other packages that run podman at
// the same time then never see its pods, nor it theirs: an agent removes
// every edge workload's pod it was not given, on its device — here, the
// machine. Call it from TestMain, before any podman command; the function
// it returns removes what the storage holds and the storage. With
// podman missing it does nothing.
func Isolate(dir string) (func(), error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "storage.conf")
	graph := filepath.Join(dir, "graph")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`[storage]
driver = "overlay"
graphroot = %q
runroot = %q
`, graph, filepath.Join(dir, "run"))), 0o644); err != nil {
		return nil, err
	}
	if err := os.Setenv("CONTAINERS_STORAGE_CONF", conf); err != nil {
		return nil, err
	}
	return func() {
		// Not `podman system reset`: it also empties libpod's temporary
		// directory (/run/libpod), which every storage shares, and would
		// take the exit files of other processes' containers with it.
		for _, args := range [][]string{{"pod", "rm", "--all", "--force", "--time", "0"}, {"rm", "--all", "--force", "--time", "0"}, {"rmi", "--all", "--force"}} {
			_ = exec.Command("podman", args...).Run()
		}
		// The storage keeps its overlay directory mounted on itself.
		_ = syscall.Unmount(filepath.Join(graph, "overlay"), syscall.MNT_DETACH)
		_ = os.RemoveAll(dir)
	}, nil
}
