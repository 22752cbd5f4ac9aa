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
	"strconv"
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
	p := startEIMProc(t, bin, args...)
	return p.api, p.agent
}

// eimProc is a running server binary.
type eimProc struct {
	api, agent string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// kill kills the server at once (SIGKILL) and waits for it to exit.
func (p *eimProc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// startEIMProc runs the server binary until the test ends or it is killed.
func startEIMProc(t *testing.T, bin string, args ...string) *eimProc {
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
		return &eimProc{api: u[0], agent: u[1], cmd: cmd, exited: exited}
	case <-exited:
		t.Fatalf("eim server exited before serving; stderr:\n%s", errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("eim server did not print its addresses within 60 s; stderr:\n%s", errOut.String())
	}
	return nil
}

// TestSimulateRegisterRestartE2E kills the real server (SIGKILL) while
// "eim-agent simulate --register" registers the fleet, and starts it
// again on the same addresses: the registration rides it out, every host
// is registered once with exactly one instance, and Day 0 finishes.
func TestSimulateRegisterRestartE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs eim server")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build eim with")
	}
	dir := t.TempDir()
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
	args := func(apiAddr, agentAddr string) []string {
		return []string{"server", "--data-dir", data, "--http-addr", apiAddr, "--agent-addr", agentAddr,
			"--boot-artifacts", boot, "--log-level", "warn", "--rate-limit", "0"}
	}
	srv := startEIMProc(t, bin, args("127.0.0.1:0", "127.0.0.1:0")...)
	tokFile := filepath.Join(data, "admin.token")
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := client.New(srv.api, strings.TrimSpace(string(tok)), nil)
	sum := sha256.Sum256(img)
	var osRes eim.OS
	if err := admin.Create(ctx, "default", eim.KindOS, map[string]string{
		"name": "tiny-os", "profileName": "tiny-os", "imageUrl": srv.api + "/boot/artifacts/os.img", "sha256": hex.EncodeToString(sum[:]),
	}, &osRes); err != nil {
		t.Fatal(err)
	}

	const nodes = 200
	report := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runSimulate(ctx, []string{"--server", srv.agent, "--ca", filepath.Join(data, "ca.crt"), "--nodes", strconv.Itoa(nodes), "--seed", "26",
			"--register", "--api", srv.api, "--token-file", tokFile, "--os", osRes.ResourceID, "--report", report,
			"--action-time", "5ms", "--backoff-min", "200ms", "--backoff-max", "2s", "--timeout", "180s", "--exit-after-day0"}, &stdout, &stderr)
	}()
	hosts := func() int {
		page, err := admin.List(ctx, "default", eim.KindHost, client.ListOptions{PageSize: 1})
		if err != nil {
			return -1
		}
		return page.Total
	}
	deadline := time.Now().Add(60 * time.Second)
	for n := hosts(); n < 15; n = hosts() {
		if time.Now().After(deadline) {
			t.Fatalf("no 15 hosts registered within 60 s (got %d); stderr:\n%s", n, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.kill()
	// What the server committed before it died.
	restarted := startEIMProc(t, bin, args(strings.TrimPrefix(srv.api, "http://"), strings.TrimPrefix(srv.agent, "https://"))...)
	if restarted.api != srv.api || restarted.agent != srv.agent {
		t.Fatalf("restarted on %s and %s, want %s and %s", restarted.api, restarted.agent, srv.api, srv.agent)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("simulate: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(240 * time.Second):
		t.Fatalf("simulate did not end within 240 s; stderr:\n%s", stderr.String())
	}
	t.Logf("simulate:\n%s\n%s", stderr.String(), stdout.String())
	if m := regexp.MustCompile(`\((\d+) calls retried\)`).FindStringSubmatch(stderr.String()); m == nil || m[1] == "0" {
		t.Errorf("simulate retried no registration call (the kill came too late?); stderr:\n%s", stderr.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Final[sim.OutcomeRunning] != nodes {
		t.Errorf("report: got %v, want %d running", rep.Final, nodes)
	}
	if n := hosts(); n != nodes {
		t.Errorf("hosts: got %d, want %d", n, nodes)
	}
	perHost := map[string]int{}
	for off := 0; ; off += 100 {
		page, err := admin.List(ctx, "default", eim.KindInstance, client.ListOptions{PageSize: 100, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			var in struct {
				Host struct {
					ResourceID string `json:"resourceId"`
				} `json:"host"`
			}
			if err := json.Unmarshal(raw, &in); err != nil {
				t.Fatal(err)
			}
			perHost[in.Host.ResourceID]++
		}
		if !page.HasNext {
			break
		}
	}
	for h, n := range perHost {
		if n != 1 {
			t.Errorf("host %s: %d instances, want 1", h, n)
		}
	}
	if len(perHost) != nodes {
		t.Errorf("hosts with an instance: got %d, want %d", len(perHost), nodes)
	}
}
