package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/hardware"
	"github.com/eimhq/eim/agent/pods"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// runNode is node mode on the installed OS.
func runNode(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("node", stderr)
	config := fs.String("config", "/etc/eim/agent.json", "agent configuration written during provisioning")
	stateDir := fs.String("state-dir", "/var/lib/eim-agent", "where the agent keeps what it must remember across reboots")
	telemetryFile := fs.String("telemetry-file", "/etc/eim/telemetry.json", "where to write the node's telemetry configuration for the local collectors (\"\" for none; see docs/telemetry.md)")
	abLayout := fs.String("ab-layout", "/etc/eim/ab.json", "the A/B slot layout of an image-based OS (absent: no image updates)")
	updates := fs.Bool("updates", true, "carry out OS updates in maintenance windows (apt on a package-based OS, the A/B slots on an image-based one)")
	clusters := fs.Bool("clusters", true, "apply the node's cluster install plan when the server gives one (k3s; docs/clusters-node.md)")
	readyTimeout := fs.Duration("cluster-ready-timeout", 10*time.Minute, "how long a cluster install waits for the node to be Ready")
	workloads := fs.Bool("workloads", true, "run the device's edge workloads as podman pods when the server gives them and podman is installed (docs/workloads-agent.md)")
	podman := fs.String("podman", "podman", "the podman binary that runs the edge workloads")
	containersConf := fs.String("containers-conf", "", "a containers.conf for podman (passed as CONTAINERS_CONF: runtime, ulimits); \"\" keeps podman's own")
	podNetwork := fs.String("pod-network", "", "the network of the workloads' pods (kube play --network; \"\" for podman's default bridge, \"none\" for none)")
	workloadCheck := fs.Duration("workload-check", 10*time.Second, "how often podman is asked how the workloads' pods are (a changed status is reported then)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *workloadCheck < time.Second {
		return usagef("--workload-check: %v is below 1s", *workloadCheck)
	}
	cfg, err := agent.LoadNodeConfig(*config)
	if err != nil {
		return err
	}
	client, err := agent.Dial(cfg.URL, cfg.CACertPEM)
	if err != nil {
		return err
	}
	log := newLogger(stderr, *debug).With("host", cfg.HostID)
	host, _ := os.Hostname()
	n := &agent.Node{
		Client: client, Config: cfg, Logger: log, Backoff: agent.DefaultBackoff,
		Hostname: host, OSRelease: prettyName("/etc/os-release"), BootID: firstLine("/proc/sys/kernel/random/boot_id"),
		Hardware: func(ctx context.Context) (*hostv1.Hardware, error) {
			return hardware.Collect(ctx, hardware.Options{})
		},
		Health: func(context.Context) (agentHealth, nodeHealth *hostv1.Health) {
			return &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}, rootHealth("/")
		},
		Actions:       systemActions{},
		StateDir:      *stateDir,
		TelemetryFile: *telemetryFile,
	}
	if *clusters {
		self, err := os.Executable()
		if err != nil {
			self = ""
		}
		n.Cluster = &agent.K3s{
			StateDir: *stateDir, NodeName: host, AgentPath: self, Project: cfg.Project, CACertPEM: cfg.CACertPEM,
			ReadyTimeout: *readyTimeout, Logger: log.With("part", "cluster"),
		}
	}
	if *workloads {
		path, err := exec.LookPath(*podman)
		switch {
		case err == nil:
			// kube play's files (config maps, registry logins) live in
			// the state directory, root's alone; a crash's leftovers go.
			tmp := filepath.Join(*stateDir, "tmp")
			if err := os.RemoveAll(tmp); err != nil {
				return err
			}
			if err := os.MkdirAll(tmp, 0o700); err != nil {
				return err
			}
			n.Pods = pods.New(pods.Config{Podman: path, ContainersConf: *containersConf, Network: *podNetwork, TempDir: tmp})
			n.WorkloadCheck = *workloadCheck
			log.Info("device workloads with podman", "podman", path, "containers_conf", *containersConf)
		case *podman != "podman":
			return fmt.Errorf("--podman %s: %w", *podman, err)
		default:
			log.Info("podman is not installed: device workloads off")
		}
	}
	if *updates {
		u, err := updaters(*abLayout)
		if err != nil {
			return err
		}
		n.Updaters = u
		log.Info("OS updates in maintenance windows", "packages", u.Mutable != nil, "images", u.Immutable != nil)
	}
	first := true
	n.OnReportIn = func(_ *hostv1.ReportInResponse) {
		if first {
			log.Info("reported in")
			first = false
		}
	}
	err = n.Run(ctx)
	if ctx.Err() != nil {
		return nil // stopped by a signal
	}
	return err
}

// updaters are the node's: apt when apt-get is installed, the A/B image
// updater when the OS image ships an A/B layout file.
func updaters(layout string) (*agent.Updaters, error) {
	u := &agent.Updaters{}
	if _, err := exec.LookPath("apt-get"); err == nil {
		u.Mutable = &agent.Apt{}
	}
	if _, err := os.Stat(layout); err == nil {
		l, err := agent.LoadABSlots(layout)
		if err != nil {
			return nil, err
		}
		u.Immutable = &agent.ABImage{Layout: l}
	}
	return u, nil
}

// prettyName is PRETTY_NAME of an os-release file, or "".
func prettyName(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}
