package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/agent/sim"
)

func TestParseSimulate(t *testing.T) {
	ok := []string{"--server", "https://127.0.0.1:8443", "--ca", "ca.crt", "--nodes", "10"}
	c, err := parseSimulate(ok, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.nodes != 10 || c.project != "default" || c.connections != 0 || c.seed == 0 || c.hold != sim.HoldUntilCancelled || !strings.HasPrefix(c.namePrefix, "sim-") {
		t.Errorf("defaults: got %+v", c)
	}
	if _, err := parseSimulate([]string{"-h"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
	for _, bad := range [][]string{
		{"--ca", "ca.crt", "--nodes", "1"},
		{"--server", "http://x", "--ca", "ca.crt", "--nodes", "1"},
		{"--server", "https://x", "--nodes", "1"},
		{"--server", "https://x", "--ca", "c"},
		append(ok, "--fail-share", "1.5"),
		append(ok, "--connections", "-1"),
		append(ok, "--register"),
		append(ok, "--register", "--token-file", "t"),
		append(ok, "--register", "--token-file", "t", "--os", "os-1", "--nzt"),
		append(ok, "--os", "os-1"),
		append(ok, "extra"),
		append(ok, "--exit-after-day0", "--stop-share", "0.1"),
		append(ok, "--exit-after-day0", "--hold", "1m"),
		append(ok, "--hold", "10s", "--stop-share", "0.1", "--stop-after", "10s"),
		append(ok, "--hold", "10s", "--stop-share", "1.1", "--stop-after", "5s"),
		append(ok, "--hold", "-1s"),
		append(ok, "--hold", "10s", "--workers", "0"),
		append(ok, "--hold", "10s", "--check-every", "0s"),
		append(ok, "--cluster-install-time", "20s-5s"),
		append(ok, "--cluster-upgrade-time", "soon"),
		append(ok, "--cluster-fail-share", "2"),
		append(ok, "--cluster-retry", "0s"),
		append(ok, "--workload-fail-share", "1.5"),
		append(ok, "--workload-fail-revision", "2"),
		append(ok, "--workload-fail-revision", "0=0.5"),
		append(ok, "--workload-fail-revision", "2=2"),
		append(ok, "--workload-start-time", "0s"),
		append(ok, "--workload-restart", "-1s"),
	} {
		if _, err := parseSimulate(bad, &bytes.Buffer{}); !errors.As(err, new(*usageError)) {
			t.Errorf("%q: got %v, want a usage error", bad, err)
		}
	}
	c, err = parseSimulate(append(ok, "--cluster-install-time", "1s-3s", "--cluster-removal-time", "2s", "--cluster-fail-share", "0.1"), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("cluster flags: %v", err)
	}
	if *c.clusterInstall.r != (sim.Range{Min: time.Second, Max: 3 * time.Second}) || *c.clusterRemoval.r != (sim.Range{Min: 2 * time.Second, Max: 2 * time.Second}) ||
		*c.clusterUpgrade.r != sim.DefaultClusterUpgrade || c.clusterFailShare != 0.1 || c.clusterRetry != sim.DefaultClusterRetry {
		t.Errorf("cluster flags: install %v, removal %v, upgrade %v, fail share %v, retry %v", c.clusterInstall, c.clusterRemoval, c.clusterUpgrade, c.clusterFailShare, c.clusterRetry)
	}
	c, err = parseSimulate(append(ok, "--workload-start-time", "2s", "--workload-fail-share", "0.1", "--workload-fail-revision", "2=0.5", "--workload-fail-revision", "3=1"), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("workload flags: %v", err)
	}
	if c.workloadStart != 2*time.Second || c.workloadFailShare != 0.1 || c.workloadRestart != sim.DefaultWorkloadRestart ||
		len(c.workloadFailRevision) != 2 || c.workloadFailRevision[2] != 0.5 || c.workloadFailRevision[3] != 1 {
		t.Errorf("workload flags: start %v, share %v, restart %v, by revision %v", c.workloadStart, c.workloadFailShare, c.workloadRestart, c.workloadFailRevision)
	}
	if _, err := parseSimulate(append(ok, "--register", "--token-file", "t", "--nzt"), &bytes.Buffer{}); err != nil {
		t.Errorf("--register --nzt: %v", err)
	}
	c, err = parseSimulate(append(ok, "--hold", "8m", "--stop-share", "0.1", "--stop-after", "5m30s"), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("--hold --stop-share --stop-after: %v", err)
	}
	if c.hold != 8*time.Minute || c.stopShare != 0.1 || c.stopAfter != 330*time.Second || c.workers != sim.DefaultWorkers || c.checkEvery != sim.DefaultCheckEvery {
		t.Errorf("hold flags: got %+v", c)
	}
}

func TestHoldVerdict(t *testing.T) {
	ok := &sim.HoldReport{Monitored: true, Detection: &sim.Detection{Stopped: 10, Met: true, AllFlaggedSeconds: 91, BarSeconds: 100}}
	for _, c := range []struct {
		name string
		r    *sim.HoldReport
		want string
	}{
		{"no hold", nil, ""},
		{"not monitored", &sim.HoldReport{FalseNoConnection: 3}, ""},
		{"met", ok, ""},
		{"false positives", &sim.HoldReport{Monitored: true, FalseNoConnection: 2}, "2 hosts wrongly"},
		{"late", &sim.HoldReport{Monitored: true, Detection: &sim.Detection{Stopped: 10, AllFlaggedSeconds: 120, BarSeconds: 100}}, "all flagged after 120s (bar 100s)"},
	} {
		err := holdVerdict(c.r)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestSimulateIdentitiesFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "fleet.csv")
	c, err := parseSimulate([]string{"--server", "https://x", "--ca", "c", "--nodes", "5", "--seed", "9", "--write-identities", out}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.fleet()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := parseSimulate([]string{"--server", "https://x", "--ca", "c", "--identities", out, "--nodes", "3", "--seed", "9"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c2.fleet()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 5 || len(again) != 3 || again[2] != ids[2] {
		t.Fatalf("identities file: wrote %d, read back %d (%+v vs %+v)", len(ids), len(again), again, ids[:3])
	}
	c2.nodes = 6
	if _, err := c2.fleet(); err == nil {
		t.Error("--nodes beyond the file: got no error")
	}
}

func TestSimulateUnreachableServer(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := runSimulate(context.Background(), []string{"--server", "https://127.0.0.1:1", "--ca", ca, "--nodes", "2", "--exit-after-day0"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("got no error with a CA file that holds no certificate")
	}
}

func TestPrintReport(t *testing.T) {
	r := &sim.Report{Nodes: 2, Final: map[string]int{"running": 1, "failed": 1, "stuck": 0}, Injected: map[string]int{"fail": 1, "reboot": 0},
		Phases: map[string]sim.Stats{"discover": {Count: 2, P50: 0.1, P95: 0.2, P99: 0.2, Max: 0.2}, "total": {Count: 1, P50: 1, P95: 1, P99: 1, Max: 1}}, WallSeconds: 1.5}
	r.Hold = &sim.HoldReport{Nodes: 1, IntervalSeconds: 30, HoldSeconds: 480, Workers: 1024, Monitored: true,
		Phases:    []sim.BeatPhase{{Name: "steady", Seconds: 300, Nodes: 1, Rate: 0.03, Latency: sim.Latency{Count: 10, P99: 1.5}, Checks: 60}},
		Detection: &sim.Detection{Stopped: 1, AtSeconds: 330, TimeoutSeconds: 90, BarSeconds: 100, AllFlaggedSeconds: 91, Met: true}}
	var b bytes.Buffer
	printReport(&b, r)
	got := b.String()
	for _, want := range []string{"2 nodes in 1.5s: 1 running, 1 failed, 0 stuck", "discover", "total",
		"hold: 1 nodes heartbeating every 30s for 480s", "steady", "false \"No Connection\": 0", "all after 91.0s", ": met"} {
		if !strings.Contains(got, want) {
			t.Errorf("report:\n%s\nmissing %q", got, want)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

// TestSimulateNames checks that hosts are named after the run (its seed)
// unless --name-prefix says otherwise, so that two rehearsals in one
// project do not share host names.
func TestSimulateNames(t *testing.T) {
	names := func(args ...string) []string {
		t.Helper()
		c, err := parseSimulate(append([]string{"--server", "https://127.0.0.1:8443", "--ca", "ca.crt", "--nodes", "2"}, args...), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := c.fleet()
		if err != nil {
			t.Fatal(err)
		}
		return []string{ids[0].Hostname, ids[1].Hostname}
	}
	a, b := names("--seed", "1"), names("--seed", "2")
	if a[0] == b[0] || a[1] == b[1] || a[0] == a[1] {
		t.Errorf("seeds 1 and 2: got %q and %q, want distinct names", a, b)
	}
	if again := names("--seed", "1"); again[0] != a[0] {
		t.Errorf("seed 1 twice: got %q and %q, want the same fleet", a, again)
	}
	if got := names("--seed", "1", "--name-prefix", "line-a-"); got[0] != "line-a-00001" || got[1] != "line-a-00002" {
		t.Errorf("--name-prefix line-a-: got %q", got)
	}
	for _, n := range a {
		if !regexp.MustCompile(`^sim-[0-9a-f]{6}-0000[12]$`).MatchString(n) {
			t.Errorf("name %q: want sim-XXXXXX-0000N", n)
		}
	}
}
