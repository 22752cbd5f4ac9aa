package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/racecheck"
)

// "eim-agent simulate --hold" end to end against the real server binary
// (built here: the agent must not link the server), with a 1 s heartbeat
// interval and a 3 s timeout: every node heartbeats after Day 0, a quarter
// stops, and exactly those hosts become "No Connection".
func TestSimulateHoldE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs eim server")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build eim with")
	}
	dir := t.TempDir()
	// With the race detector when this test binary has it (startEIM fails
	// the test on the server's race reports).
	bin, err := racecheck.Build(goTool, "github.com/eimhq/eim/cmd/eim", dir, "eim")
	if err != nil {
		t.Fatal(err)
	}
	boot := filepath.Join(dir, "boot")
	if err := os.MkdirAll(boot, 0o755); err != nil {
		t.Fatal(err)
	}
	img := make([]byte, 4096)
	rand.Read(img)
	if err := os.WriteFile(filepath.Join(boot, "os.img"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	api, agentURL := startEIM(t, bin, "server", "--data-dir", data, "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0",
		"--boot-artifacts", boot, "--log-level", "warn", "--rate-limit", "0", "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s")
	tokFile := filepath.Join(data, "admin.token")
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := client.New(api, strings.TrimSpace(string(tok)), nil)
	sum := sha256.Sum256(img)
	var osRes eim.OS
	if err := admin.Create(ctx, "default", eim.KindOS, map[string]string{
		"name": "tiny-os", "profileName": "tiny-os", "imageUrl": api + "/boot/artifacts/os.img", "sha256": hex.EncodeToString(sum[:]),
	}, &osRes); err != nil {
		t.Fatal(err)
	}

	report := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	err = runSimulate(ctx, []string{"--server", agentURL, "--ca", filepath.Join(data, "ca.crt"), "--nodes", "12", "--seed", "31",
		"--register", "--api", api, "--token-file", tokFile, "--os", osRes.ResourceID, "--json", "--report", report,
		"--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s",
		"--hold", "12s", "--stop-share", "0.25", "--stop-after", "3s", "--check-every", "1s", "--flag-timeout", "3s"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("simulate: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	h := rep.Hold
	if rep.Final[sim.OutcomeRunning] != 12 || h == nil {
		t.Fatalf("report: got %s, want 12 running nodes and a hold", b)
	}
	if h.Nodes != 12 || h.IntervalSeconds != 1 || !h.Monitored || h.FalseNoConnection != 0 || h.Revoked != 0 {
		t.Errorf("hold: got %d nodes, interval %vs, monitored %v, %d false No Connection, %d revoked; want 12, 1 s, true, 0, 0",
			h.Nodes, h.IntervalSeconds, h.Monitored, h.FalseNoConnection, h.Revoked)
	}
	byName := map[string]sim.BeatPhase{}
	for _, p := range h.Phases {
		byName[p.Name] = p
	}
	if p := byName[sim.PhaseSteady]; p.Latency.Count < 12 || p.Latency.Errors != 0 || p.Nodes != 12 || p.Checks == 0 || p.MaxNoConnection != 0 {
		t.Errorf("steady phase: got %+v, want heartbeats of the 12 nodes without errors, checked, none flagged", p)
	}
	d := h.Detection
	if d == nil || d.Stopped != 3 || !d.Met || d.Flagged != 3 || d.FalsePositives != 0 || d.Missed != 0 || d.AllFlaggedSeconds > d.BarSeconds {
		t.Errorf("detection: got %+v, want the 3 stopped hosts flagged within the bar and no other", d)
	}
	// The server says the same: 3 hosts "No Connection", 9 "Running".
	for status, want := range map[string]int{"No Connection": 3, "Running": 9} {
		page, err := admin.List(ctx, "default", eim.KindHost, client.ListOptions{Filter: `hostStatus="` + status + `"`, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != want {
			t.Errorf("hosts %q: got %d, want %d", status, page.Total, want)
		}
	}
}

var (
	apiRE   = regexp.MustCompile(`eim: serving API on (http://\S+)`)
	agentRE = regexp.MustCompile(`eim: serving agents on (https://\S+)`)
)

// startEIM runs the server binary until the test ends and returns its API
// and agent URLs.
func startEIM(t *testing.T, bin string, args ...string) (api, agentURL string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if racecheck.Reported(errOut.Bytes()) {
			t.Errorf("eim server reported a data race:\n%s", errOut.String())
		}
	})
	found := make(chan [2]string, 1)
	go func() {
		defer close(exited)
		var a, g string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := apiRE.FindStringSubmatch(sc.Text()); m != nil {
				a = m[1]
			}
			if m := agentRE.FindStringSubmatch(sc.Text()); m != nil {
				g = m[1]
			}
			if a != "" && g != "" {
				found <- [2]string{a, g}
				a = ""
			}
		}
		cmd.Wait()
	}()
	select {
	case u := <-found:
		return u[0], u[1]
	case <-exited:
		t.Fatalf("eim server exited before serving; stderr:\n%s", errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("eim server did not print its addresses within 60 s; stderr:\n%s", errOut.String())
	}
	return "", ""
}
