package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deploy/agent/install.sh installs the agent, its configuration (root's
// alone), podman's settings and the unit under a root directory.
func TestInstallScript(t *testing.T) {
	script, err := filepath.Abs("../../deploy/agent/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "eim-agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"url":"https://eim:8443","clientId":"edgenode-host-1","clientSecret":"s3cret"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	run := func(args ...string) (string, error) {
		out, err := exec.Command("sh", append([]string{script}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("--root", root, "--binary", bin, "--config", cfg, "--containers-conf", conf, "--flags", "--pod-network none"); err != nil {
		t.Fatalf("install.sh: %v: %s", err, out)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
		has  string
	}{
		{"usr/local/bin/eim-agent", 0o755, "#!/bin/sh"},
		{"etc/eim/agent.json", 0o600, "s3cret"},
		{"etc/eim/containers.conf", 0o644, "runc"},
		{"etc/eim/agent.env", 0o644, `EIM_AGENT_FLAGS="--containers-conf /etc/eim/containers.conf --pod-network none"`},
		{"etc/systemd/system/eim-agent.service", 0o644, "ExecStart=/usr/local/bin/eim-agent node --config /etc/eim/agent.json --state-dir /var/lib/eim-agent $EIM_AGENT_FLAGS"},
		{"var/lib/eim-agent", 0o700 | os.ModeDir, ""},
	} {
		info, err := os.Stat(filepath.Join(root, f.path))
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if info.Mode() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, info.Mode(), f.mode)
		}
		if f.has != "" {
			b, _ := os.ReadFile(filepath.Join(root, f.path))
			if !strings.Contains(string(b), f.has) {
				t.Errorf("%s: got %q, want it to contain %q", f.path, b, f.has)
			}
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/eim-agent.service"))
	if !strings.Contains(string(unit), "KillMode=process") {
		t.Errorf("the unit would stop the pods with the agent: no KillMode=process")
	}

	// Mistakes are named.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", root, "--config", cfg}, "--binary is required"},
		{[]string{"--root", root, "--binary", bin}, "--config is required"},
		{[]string{"--root", root, "--binary", bin, "--config", conf}, `has no "url"`},
		{[]string{"--root", root, "--binary", bin, "--config", cfg, "--flags", `--x "y"`}, "--flags must not contain quotes"},
		{[]string{"--bogus"}, "unknown argument --bogus"},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("install.sh %q: got %v: %s; want a failure saying %q", tc.args, err, out, tc.want)
		}
	}
}
