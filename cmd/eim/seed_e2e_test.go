package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/racecheck"
)

// The seeded Day-1 benchmark end to end (SEED=1 bench/heartbeat.sh in
// small): the server started once and stopped, bench/seed writing 250
// running nodes into its store, the server started again, and
// "eim-agent simulate --nodes-file" holding them heartbeating with no Day 0;
// half stops (more than a page of the monitor's list), and exactly those hosts become "No Connection".
func TestSeededHoldSQLite(t *testing.T) {
	testSeededHold(t, "")
}

func TestSeededHoldPostgres(t *testing.T) {
	testSeededHold(t, freshPostgres(t))
}

func testSeededHold(t *testing.T, database string) {
	if testing.Short() {
		t.Skip("builds bench/seed and eim-agent")
	}
	seedBin := buildTool(t, "github.com/eimhq/eim/bench/seed", "seed")
	agentBin := buildAgent(t)
	// The timeout also bounds the time from the server's start to each
	// seeded node's first heartbeat (a restarted server dates every host's
	// silence from its start): 3 s was too short for a loaded CI machine,
	// which flagged a few nodes before the simulator reached them.
	extra := []string{"--heartbeat-interval", "1s", "--heartbeat-timeout", "6s"}
	if database != "" {
		extra = append(extra, "--database", database)
	}
	s := startDay0(t, extra...)
	s.stop()
	s.hc.CloseIdleConnections()

	nodesFile := filepath.Join(t.TempDir(), "nodes.jsonl")
	if database == "" {
		database = s.dataDir
	}
	out, err := exec.Command(seedBin, "--database", database, "--nodes", "250", "--batch", "100", "--out", nodesFile, "--seed", "5").CombinedOutput()
	noChildRace(t, "seed", out)
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "seeded 250 running nodes") {
		t.Errorf("seed: got %q, want 250 nodes seeded", out)
	}
	s.start(hostPort(t, s.api), hostPort(t, s.agentURL))

	// The seeded fleet as the API shows it before any heartbeat: running.
	ctx := context.Background()
	count := func(k eim.Kind, filter string) int {
		t.Helper()
		page, err := s.admin.List(ctx, eim.DefaultProject, k, client.ListOptions{Filter: filter, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		return page.Total
	}
	for _, c := range []struct {
		k      eim.Kind
		filter string
	}{
		{eim.KindHost, `hostStatus="Running" AND currentState=HOST_STATE_ONBOARDED`},
		{eim.KindInstance, `currentState=INSTANCE_STATE_RUNNING AND provisioningStatus="Provisioned"`},
	} {
		if n := count(c.k, c.filter); n != 250 {
			t.Errorf("%ss with %s: got %d, want 250", c.k, c.filter, n)
		}
	}

	report := filepath.Join(t.TempDir(), "report.json")
	cmdCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, agentBin, "simulate", "--server", s.agentURL, "--ca", filepath.Join(s.dataDir, "ca.crt"),
		"--nodes-file", nodesFile, "--api", s.api, "--token-file", filepath.Join(s.dataDir, adminTokenFile), "--report", report,
		"--backoff-min", "100ms", "--backoff-max", "1s", "--timeout", "30s",
		"--hold", "16s", "--stop-share", "0.5", "--stop-after", "3s", "--check-every", "1s", "--flag-timeout", "6s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	noChildRace(t, "eim-agent simulate", stderr.Bytes())
	if err != nil {
		t.Fatalf("eim-agent simulate: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "250 nodes provisioned before the run (--nodes-file): no Day 0") {
		t.Errorf("report: got\n%s\nwant the seeded nodes' line first", stdout.String())
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
	if !rep.Seeded || rep.Nodes != 250 || h == nil {
		t.Fatalf("report: got %s, want 250 seeded nodes and a hold", b)
	}
	if h.Nodes != 250 || h.IntervalSeconds != 1 || !h.Monitored || h.FalseNoConnection != 0 || h.Revoked != 0 || h.Tokens.Count < 250 {
		t.Errorf("hold: got %d nodes, interval %vs, monitored %v, %d false No Connection, %d revoked, %d tokens; want 250, 1 s, true, 0, 0, ≥ 250",
			h.Nodes, h.IntervalSeconds, h.Monitored, h.FalseNoConnection, h.Revoked, h.Tokens.Count)
	}
	if len(h.Phases) != 3 || h.Phases[0].Name != sim.PhaseSettle {
		t.Fatalf("phases: got %+v, want settle, steady, stopped", h.Phases)
	}
	if p := h.Phases[1]; p.Name != sim.PhaseSteady || p.Latency.Count < 250 || p.Latency.Errors != 0 || p.Nodes != 250 || p.MaxNoConnection != 0 {
		t.Errorf("steady phase: got %+v, want heartbeats of the 250 nodes without errors, none flagged", p)
	}
	if d := h.Detection; d == nil || d.Stopped != 125 || !d.Met || d.Flagged != 125 || d.FalsePositives != 0 || d.Missed != 0 {
		t.Errorf("detection: got %+v, want the 125 stopped hosts flagged (more than a page of the monitor's list) within the bar and no other", d)
	}
	if n := count(eim.KindHost, `hostStatus="No Connection"`); n != 125 {
		t.Errorf(`hosts "No Connection": got %d, want 125`, n)
	}
	if n := count(eim.KindHost, `hostStatus="Running"`); n != 125 {
		t.Errorf(`hosts "Running": got %d, want 125`, n)
	}
}

// buildTool builds a command of the module into a temporary directory
// (with the race detector when this test binary has it).
func buildTool(t *testing.T, pkg, name string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build " + pkg + " with")
	}
	bin, err := racecheck.Build(goTool, pkg, t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
