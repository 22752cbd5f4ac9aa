package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/racecheck"
)

// "eim-agent simulate" end to end: the agent binary (package main of
// cmd/eim-agent, so built here rather than imported) registers its fleet
// through the REST API and runs it against the real server, as
// bench/day0.sh does.

// buildAgent builds cmd/eim-agent into a temporary directory (with the
// race detector when this test binary has it).
func buildAgent(t *testing.T) string {
	t.Helper()
	return buildTool(t, "github.com/eimhq/eim/cmd/eim-agent", "eim-agent")
}

// noChildRace fails t if a child's output holds a race detector's report.
func noChildRace(t *testing.T, child string, output []byte) {
	t.Helper()
	if racecheck.Reported(output) {
		t.Errorf("%s reported a data race:\n%s", child, output)
	}
}

func TestAgentSimulate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds eim-agent")
	}
	bin := buildAgent(t)
	s := startDay0(t)

	// simulate registers n nodes (identities from seed; UUIDs are unique
	// across projects) in a new project with an instance each and runs
	// them; it returns the report (the last line of the output), the exit
	// status and stderr.
	simulate := func(t *testing.T, project string, n int, seed string, extra ...string) (*sim.Report, int, string) {
		t.Helper()
		if _, err := s.admin.CreateProject(context.Background(), project); err != nil {
			t.Fatal(err)
		}
		osID := s.createOS(t, project)
		args := append([]string{"simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
			"--nodes", strconv.Itoa(n), "--seed", seed, "--register", "--api", s.api,
			"--token-file", filepath.Join(s.dataDir, adminTokenFile), "--project", project, "--os", osID,
			"--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s", "--exit-after-day0"}, extra...)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("eim-agent simulate: %v", err)
		}
		noChildRace(t, "eim-agent simulate", stderr.Bytes())
		code := cmd.ProcessState.ExitCode()
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var rep sim.Report
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
			t.Fatalf("last line of the output is not a JSON report: %v (exit status %d)\nstdout:\n%s\nstderr:\n%s", err, code, stdout.String(), stderr.String())
		}
		return &rep, code, stderr.String()
	}

	t.Run("every node running", func(t *testing.T) {
		rep, code, stderr := simulate(t, "sim-ok", 5, "21")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", code, stderr)
		}
		wantReport(t, rep, 5, 0)
		if rep.Nodes != 5 {
			t.Errorf("nodes: got %d, want 5", rep.Nodes)
		}
		for _, phase := range []string{"discover", "workflow", "action:stream-image", "node", "total"} {
			st, ok := rep.Phases[phase]
			if !ok {
				t.Errorf("phase %q missing from the report: %v", phase, rep.Phases)
				continue
			}
			if st.Count != 5 || st.P50 > st.P95 || st.P95 > st.P99 || st.P99 > st.Max || st.Max <= 0 {
				t.Errorf("phase %q: got %+v, want 5 nodes and ordered percentiles", phase, st)
			}
		}
		hosts, _, err := client.ListOf[eim.Host](context.Background(), s.admin, "sim-ok", client.ListOptions{PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hosts {
			ids = append(ids, h.ResourceID)
		}
		if len(ids) != 5 {
			t.Fatalf("hosts registered: got %d, want 5", len(ids))
		}
		s.checkRunning(t, "sim-ok", ids)
	})

	t.Run("every node failing", func(t *testing.T) {
		rep, code, stderr := simulate(t, "sim-fail", 3, "22", "--fail-share", "1")
		if code != 1 {
			t.Errorf("exit status %d, want 1; stderr:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "3 of 3 nodes did not reach RUNNING (3 injected failures, 0 unexpected outcomes)") {
			t.Errorf("stderr:\n%s\nwant it to say that 3 of 3 nodes failed as injected", stderr)
		}
		wantReport(t, rep, 0, 3)
		if rep.Injected["fail"] != 3 {
			t.Errorf("injected failures: got %d, want 3", rep.Injected["fail"])
		}
		hosts, _, err := client.ListOf[eim.Host](context.Background(), s.admin, "sim-fail", client.ListOptions{PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(hosts) != 3 {
			t.Fatalf("hosts registered: got %d, want 3", len(hosts))
		}
		for _, h := range hosts {
			if in := h.Instance; in == nil || !strings.HasPrefix(in.ProvisioningStatus, "Provisioning Failed") || in.ProvisioningStatusIndicator != eim.StatusError {
				t.Errorf("host %s: instance %+v, want Provisioning Failed ERROR", h.ResourceID, in)
			}
		}
	})

	// The README's rehearsal: without --exit-after-day0 the fleet holds
	// until interrupted, so its hosts stay "Running" past the heartbeat
	// timeout; a node whose workflow failed runs it again once its
	// instance is reprovisioned with the CLI, as README says to retry.
	t.Run("held until interrupted, a failed node reprovisioned", func(t *testing.T) {
		const project = "sim-hold"
		ctx := context.Background()
		s := startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s")
		if _, err := s.admin.CreateProject(ctx, project); err != nil {
			t.Fatal(err)
		}
		osID := s.createOS(t, project)
		tokenFile := filepath.Join(s.dataDir, adminTokenFile)
		var stdout, stderr syncBuffer
		// Seed 23 with --fail-share 0.5: the third node's stream-image fails.
		cmd := exec.Command(bin, "simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
			"--nodes", "3", "--seed", "23", "--fail-share", "0.5", "--register", "--api", s.api, "--token-file", tokenFile,
			"--project", project, "--os", osID, "--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() {
			cmd.Process.Kill()
			<-exited
		}()
		hosts := func() []*eim.Host {
			t.Helper()
			hs, _, err := client.ListOf[eim.Host](ctx, s.admin, project, client.ListOptions{PageSize: 100, OrderBy: "name"})
			if err != nil {
				t.Fatal(err)
			}
			return hs
		}
		failed := func(h *eim.Host) bool {
			return h.Instance != nil && strings.HasPrefix(h.Instance.ProvisioningStatus, "Provisioning Failed")
		}
		until := func(what string, d time.Duration, cond func([]*eim.Host) bool) []*eim.Host {
			t.Helper()
			deadline := time.Now().Add(d)
			for {
				hs := hosts()
				if cond(hs) {
					return hs
				}
				select {
				case <-exited:
					t.Fatalf("simulate exited while waiting for %s; stdout:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s within %s: hosts %+v\nstderr:\n%s", what, d, hs, stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		hs := until("Day 0 over (2 running, 1 failed)", 60*time.Second, func(hs []*eim.Host) bool {
			running, nFailed := 0, 0
			for _, h := range hs {
				if h.HostStatus == "Running" {
					running++
				}
				if failed(h) {
					nFailed++
				}
			}
			return len(hs) == 3 && running == 2 && nFailed == 1
		})
		name := regexp.MustCompile(`^sim-[0-9a-f]{6}-0000[1-3]$`)
		for _, h := range hs {
			if !name.MatchString(h.Name) {
				t.Errorf("host name %q: want sim-XXXXXX-0000N (the run's prefix)", h.Name)
			}
		}
		// Twice the timeout and more: the running hosts stay "Running".
		heldSince := time.Now()
		for time.Since(heldSince) < 7*time.Second {
			for _, h := range hosts() {
				if !failed(h) && h.HostStatus != "Running" {
					t.Fatalf("%.1fs after Day 0, host %s is %q, want Running (the simulator holds); stderr:\n%s", time.Since(heldSince).Seconds(), h.Name, h.HostStatus, stderr.String())
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		admin := cliRunner{t: t, url: s.api, tokenFile: tokenFile}
		for _, h := range hs {
			if failed(h) {
				admin.must("--project", project, "instance", "reprovision", h.Instance.ResourceID)
			}
		}
		// The node asks again at the interval the server gives a failed
		// workflow (60 s).
		until("every host running", 150*time.Second, func(hs []*eim.Host) bool {
			for _, h := range hs {
				if h.HostStatus != "Running" || h.Instance == nil || h.Instance.CurrentState != eim.InstanceStateRunning {
					return false
				}
			}
			return len(hs) == 3
		})
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("simulate did not exit within 60 s of an interrupt; stderr:\n%s", stderr.String())
		}
		noChildRace(t, "eim-agent simulate", []byte(stderr.String()))
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d, want 0; stderr:\n%s", code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var rep sim.Report
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
			t.Fatalf("report: %v\n%s", err, stdout.String())
		}
		wantReport(t, &rep, 2, 1)
		if h := rep.Hold; h == nil || h.Recovered != 1 || h.Nodes != 3 {
			t.Errorf("hold: got %+v, want 3 nodes heartbeating, 1 recovered", h)
		}
	})

	// An OEM's rehearsal: the fleet registered with "eim host import" from
	// a bulk import file, then simulated from that same file.
	t.Run("a fleet from its bulk import file", func(t *testing.T) {
		const project = "sim-bulk"
		if _, err := s.admin.CreateProject(context.Background(), project); err != nil {
			t.Fatal(err)
		}
		osID := s.createOS(t, project)
		file := filepath.Join(t.TempDir(), "fleet.csv")
		body := "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill\n" +
			"BULK00001,4c4c4544-0000-4000-8000-00000000b001," + osID + "\n" +
			"BULK00002,," + osID + "\n" +
			",4c4c4544-0000-4000-8000-00000000b003," + osID + ",,false,,line=3\n"
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		admin := cliRunner{t: t, url: s.api, tokenFile: filepath.Join(s.dataDir, adminTokenFile)}
		var hostIDs []string
		for id := range strings.FieldsSeq(admin.must("--project", project, "host", "import", file, "-o", "id")) {
			hostIDs = append(hostIDs, id)
		}
		if len(hostIDs) != 3 {
			t.Fatalf("imported hosts: %v", hostIDs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
			"--identities", file, "--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s", "--exit-after-day0")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		noChildRace(t, "eim-agent simulate", stderr.Bytes())
		if err != nil {
			t.Fatalf("eim-agent simulate --identities %s: %v\nstderr:\n%s", file, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var rep sim.Report
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
			t.Fatalf("report: %v\n%s", err, stdout.String())
		}
		wantReport(t, &rep, 3, 0)
		s.checkRunning(t, project, hostIDs)
	})
}
