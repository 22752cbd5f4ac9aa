package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
			"--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s"}, extra...)
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
			"--identities", file, "--json", "--action-time", "5ms", "--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "60s")
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
