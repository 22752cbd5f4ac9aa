package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// The telemetry tree end to end: the real server (Main) and the real node
// agent. Profiles on a region, its subregion, a site and an instance merge
// into the file the agent writes (per metrics group the shortest interval,
// per logs group the most verbose level; what another region's profiles
// say does not reach the node), and a change reaches the file within a
// heartbeat or two.
func TestTelemetrySQLite(t *testing.T) {
	testTelemetry(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "5s"))
}

func TestTelemetryPostgres(t *testing.T) {
	testTelemetry(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "5s", "--database", freshPostgres(t)))
}

func testTelemetry(t *testing.T, s *day0Server) {
	ctx := t.Context()
	p := eim.DefaultProject
	osID := s.createOS(t, p)
	id := sim.Generate(1, 21)[0]
	hostID := register(t, s, p, osID, []sim.Identity{id})[0]
	hc := s.agentClient(t)
	cfg := s.provision(t, hc, id)

	create := func(col client.Collection, body map[string]any) string {
		t.Helper()
		var out map[string]any
		if err := s.admin.CreateAt(ctx, p, col, body, &out); err != nil {
			t.Fatalf("create in %s %v: %v", col.Path, body, err)
		}
		return out["resourceId"].(string)
	}
	kind := func(k eim.Kind, body map[string]any) string {
		t.Helper()
		col, _ := client.KindCollection(k)
		return create(col, body)
	}
	root := kind(eim.KindRegion, map[string]any{"name": "europe"})
	sub := kind(eim.KindRegion, map[string]any{"name": "germany", "parentId": root})
	other := kind(eim.KindRegion, map[string]any{"name": "asia"})
	site := kind(eim.KindSite, map[string]any{"name": "berlin", "regionId": sub})
	if err := s.admin.Patch(ctx, p, eim.KindHost, hostID, map[string]any{"siteId": site}, nil); err != nil {
		t.Fatal(err)
	}
	var host eim.Host
	if err := s.admin.Get(ctx, p, eim.KindHost, hostID, &host); err != nil || host.Instance == nil {
		t.Fatalf("host %s: %v, instance %v", hostID, err, host.Instance)
	}
	inst := host.Instance.ResourceID

	// Groups through the CLI's nouns, profiles through the API.
	tok := filepath.Join(s.dataDir, adminTokenFile)
	cli := cliRunner{t: t, url: s.api, tokenFile: tok}
	group := func(noun, name string, items ...string) string {
		t.Helper()
		return strings.TrimSpace(cli.must(noun, "create", "--name", name, "--collector", "TELEMETRY_COLLECTOR_KIND_HOST",
			"--group", strings.Join(items, ","), "-o", "id"))
	}
	cpu := group("telemetry-metricgroup", "CPU", "cpu", "mem")
	disk := group("telemetry-metricgroup", "Disk", "disk")
	sys := group("telemetry-loggroup", "System", "systemd", "kern")
	metrics := func(target, targetID, group string, interval int) string {
		return create(client.TelemetryMetricsProfiles, map[string]any{target: targetID, "metricsGroupId": group, "metricsInterval": interval})
	}
	logs := func(target, targetID, group, level string) string {
		return create(client.TelemetryLogsProfiles, map[string]any{target: targetID, "logsGroupId": group, "logLevel": level})
	}
	metrics("targetRegion", root, cpu, 60)
	cpuSub := metrics("targetRegion", sub, cpu, 30)
	metrics("targetInstance", inst, cpu, 45)
	diskSite := metrics("targetSite", site, disk, 120)
	metrics("targetRegion", other, cpu, 5) // another branch: does not reach the node
	logs("targetRegion", root, sys, "SEVERITY_LEVEL_INFO")
	logs("targetSite", site, sys, "SEVERITY_LEVEL_WARN")
	sysInst := logs("targetInstance", inst, sys, "SEVERITY_LEVEL_DEBUG")
	logs("targetRegion", other, sys, "SEVERITY_LEVEL_CRITICAL")

	// The API shows what reaches the instance.
	page, err := s.admin.ListAt(ctx, p, client.TelemetryMetricsProfiles, client.ListOptions{Params: url.Values{"instanceId": {inst}, "showInherited": {"true"}}})
	if err != nil || page.Total != 4 {
		t.Fatalf("metrics profiles reaching %s: %v, %+v; want 4", inst, err, page)
	}
	out := cli.must("telemetry-logprofile", "list", "--instance", inst, "--show-inherited", "-o", "id")
	if n := len(strings.Fields(out)); n != 3 {
		t.Fatalf("eim telemetry-logprofile list --instance --show-inherited: %d profiles, want 3:\n%s", n, out)
	}

	file := filepath.Join(t.TempDir(), "etc", "eim", "telemetry.json")
	var beats atomic.Int64
	n := &agent.Node{Client: hc, Config: cfg, TelemetryFile: file,
		OnHeartbeat: func(*hostv1.HeartbeatResponse) { beats.Add(1) },
		Backoff:     agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second}}
	nctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(nctx) }()
	defer func() { cancel(); <-done }()

	// summary renders the file as "CPU=30 Disk=120 System=debug".
	summary := func() string {
		c, err := agent.ReadTelemetryConfig(file)
		if err != nil {
			return ""
		}
		var parts []string
		for _, m := range c.MetricsGroups {
			parts = append(parts, fmt.Sprintf("%s=%d", m.Name, m.IntervalSeconds))
		}
		for _, l := range c.LogsGroups {
			parts = append(parts, l.Name+"="+l.Level)
		}
		slices.Sort(parts)
		return strings.Join(parts, " ")
	}
	want := "CPU=30 Disk=120 System=debug"
	waitFor(t, "the merged configuration in "+file, func() bool { return summary() == want })
	c, err := agent.ReadTelemetryConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	wantInputs := []agent.TelemetryMetricInput{{Name: "cpu", Collector: "host", IntervalSeconds: 30}, {Name: "disk", Collector: "host", IntervalSeconds: 120},
		{Name: "mem", Collector: "host", IntervalSeconds: 30}}
	if c.HostID != hostID || c.Version == "" || !slices.Equal(c.MetricInputs, wantInputs) ||
		!slices.Equal(c.LogInputs, []agent.TelemetryLogInput{{Name: "kern", Collector: "host", Level: "debug"}, {Name: "systemd", Collector: "host", Level: "debug"}}) {
		t.Fatalf("file: %+v", c)
	}

	// Changes reach the file within a heartbeat or two (1 s each).
	steps := []struct {
		name   string
		change func() error
		want   string
	}{
		{"the subregion's interval shortened", func() error {
			return s.admin.PatchAt(ctx, p, client.TelemetryMetricsProfiles, cpuSub, map[string]any{"metricsInterval": 15}, nil)
		}, "CPU=15 Disk=120 System=debug"},
		{"the instance's logs profile deleted", func() error {
			return s.admin.DeleteAt(ctx, p, client.TelemetryLogsProfiles, sysInst)
		}, "CPU=15 Disk=120 System=info"}, // INFO in europe is more verbose than WARN at the site
		{"the site's disk profile deleted", func() error {
			return s.admin.DeleteAt(ctx, p, client.TelemetryMetricsProfiles, diskSite)
		}, "CPU=15 System=info"},
		{"the subregion moved under asia", func() error {
			return s.admin.Patch(ctx, p, eim.KindRegion, sub, map[string]any{"parentId": other}, nil)
		}, "CPU=5 System=warn"}, // WARN at the site is more verbose than CRITICAL in asia
		{"the host moved out of the site", func() error {
			return s.admin.Patch(ctx, p, eim.KindHost, hostID, map[string]any{"siteId": ""}, nil)
		}, "CPU=45"},
	}
	for _, st := range steps {
		before := beats.Load()
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		waitFor(t, st.name+": "+st.want, func() bool { return summary() == st.want })
		// The heartbeat in flight may have been answered before the
		// change; the next one carries the new version.
		if took := beats.Load() - before; took > 3 {
			t.Errorf("%s: the file changed after %d heartbeats, want at most 2 (3 with one in flight)", st.name, took)
		}
	}
}
