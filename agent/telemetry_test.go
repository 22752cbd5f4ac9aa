package agent_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// telemetrySouthbound is the scripted server with GetTelemetryConfig.
type telemetrySouthbound struct {
	*southbound
	get func(n int, req *hostv1.GetTelemetryConfigRequest) (*hostv1.GetTelemetryConfigResponse, error)
}

func (s *telemetrySouthbound) GetTelemetryConfig(_ context.Context, req *connect.Request[hostv1.GetTelemetryConfigRequest]) (*connect.Response[hostv1.GetTelemetryConfigResponse], error) {
	if err := s.authorize(req.Header()); err != nil {
		return nil, err
	}
	resp, err := s.get(s.count("telemetry"), req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// telemetryNode is nodeFor with s serving GetTelemetryConfig, and a
// telemetry file in a fresh directory.
func telemetryNode(t *testing.T, s *telemetrySouthbound, file string) (*agent.Node, *fakeClock) {
	t.Helper()
	ca := newTestCA(t)
	s.reportIn = func(int) (*hostv1.ReportInResponse, error) {
		return &hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}, nil
	}
	mux := http.NewServeMux()
	mux.Handle(hostv1connect.NewHostServiceHandler(s))
	mux.HandleFunc("/oauth2/token", s.serveToken)
	url := ca.startTLS(t, mux).URL
	client, err := agent.Dial(url, ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	return &agent.Node{
		Client: client, Rand: noJitter, Now: c.now, Wait: c.wait, TelemetryFile: file,
		Config: agent.NodeConfig{URL: url, ClientID: "edgenode-host-1", ClientSecret: "sec", HostID: "host-1", Project: "p"},
	}, c
}

func config(version string, interval uint32) *hostv1.GetTelemetryConfigResponse {
	return &hostv1.GetTelemetryConfigResponse{Version: version,
		MetricsGroups: []*hostv1.TelemetryMetricsGroup{{GroupId: "telemetrygroup-0000000a", Name: "cpu",
			CollectorKind: hostv1.TelemetryCollectorKind_TELEMETRY_COLLECTOR_KIND_HOST, Inputs: []string{"cpu"}, IntervalSeconds: interval}},
		LogsGroups: []*hostv1.TelemetryLogsGroup{{GroupId: "telemetrygroup-0000000b", Name: "sys",
			CollectorKind: hostv1.TelemetryCollectorKind_TELEMETRY_COLLECTOR_KIND_HOST, Inputs: []string{"systemd"}, Level: hostv1.TelemetryLogsGroup_LEVEL_WARN}},
	}
}

// The node fetches the configuration when a heartbeat names a version it
// does not have, writes it, and fetches nothing while it stays the same; a
// restarted agent goes by the file's version.
func TestNodeTelemetry(t *testing.T) {
	file := filepath.Join(t.TempDir(), "eim", "telemetry.json")
	s := &telemetrySouthbound{southbound: &southbound{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	version := func(n int) string {
		if n < 5 {
			return "v1"
		}
		return "v2"
	}
	s.heartbeat = func(n int, _ *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		if n == 12 {
			cancel()
		}
		return &hostv1.HeartbeatResponse{IntervalSeconds: 10, TelemetryVersion: version(n)}, nil
	}
	var mu sync.Mutex
	var asked []string
	s.get = func(n int, req *hostv1.GetTelemetryConfigRequest) (*hostv1.GetTelemetryConfigResponse, error) {
		mu.Lock()
		asked = append(asked, req.Version)
		mu.Unlock()
		if n == 1 {
			return config("v1", 60), nil
		}
		return config("v2", 15), nil
	}
	n, _ := telemetryNode(t, s, file)
	var seen []string
	n.OnHeartbeat = func(*hostv1.HeartbeatResponse) {
		c, err := agent.ReadTelemetryConfig(file)
		if err != nil {
			t.Errorf("after a heartbeat: %v", err)
			return
		}
		seen = append(seen, c.Version)
	}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if !slices.Equal(asked, []string{"", "v1"}) {
		t.Fatalf("fetched with versions %q, want \"\" then v1", asked)
	}
	// (The 12th heartbeat's answer comes as the run ends.)
	want := []string{"v1", "v1", "v1", "v1", "v2", "v2", "v2", "v2", "v2", "v2", "v2"}
	if !slices.Equal(seen[:min(len(seen), 11)], want) {
		t.Fatalf("file versions after each heartbeat %v, want %v", seen, want)
	}
	c, err := agent.ReadTelemetryConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostID != "host-1" || c.UpdatedAt == "" || len(c.MetricsGroups) != 1 || c.MetricsGroups[0].IntervalSeconds != 15 ||
		c.MetricsGroups[0].Collector != "host" || len(c.LogsGroups) != 1 || c.LogsGroups[0].Level != "warn" ||
		!slices.Equal(c.MetricInputs, []agent.TelemetryMetricInput{{Name: "cpu", Collector: "host", IntervalSeconds: 15}}) {
		t.Fatalf("file: %+v", c)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("file mode: %v, %v", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".telemetry.json-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	// A restarted agent with the file at v2 fetches nothing while the
	// server says v2.
	s2 := &telemetrySouthbound{southbound: &southbound{}}
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	s2.heartbeat = func(n int, _ *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		if n == 3 {
			cancel2()
		}
		return &hostv1.HeartbeatResponse{IntervalSeconds: 10, TelemetryVersion: "v2"}, nil
	}
	s2.get = func(int, *hostv1.GetTelemetryConfigRequest) (*hostv1.GetTelemetryConfigResponse, error) {
		t.Error("fetched a configuration the file has")
		return config("v2", 15), nil
	}
	n2, _ := telemetryNode(t, s2, file)
	if err := n2.Run(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

// A failed fetch is retried with back-off, not at every heartbeat; the
// heartbeats go on. Without a file, or against a server that names no
// version, nothing is fetched.
func TestNodeTelemetryRetry(t *testing.T) {
	file := filepath.Join(t.TempDir(), "telemetry.json")
	s := &telemetrySouthbound{southbound: &southbound{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.heartbeat = func(n int, _ *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
		if n == 30 {
			cancel()
		}
		return &hostv1.HeartbeatResponse{IntervalSeconds: 1, TelemetryVersion: "v1"}, nil
	}
	s.get = func(n int, _ *hostv1.GetTelemetryConfigRequest) (*hostv1.GetTelemetryConfigResponse, error) {
		if n <= 3 {
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("busy"))
		}
		return config("v1", 30), nil
	}
	n, _ := telemetryNode(t, s, file)
	n.Backoff = agent.Backoff{Min: 2 * time.Second, Max: 8 * time.Second}
	if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	// 30 heartbeats a second apart; fetches after back-offs of 2, 4 and 8 s.
	if got := s.calls("telemetry"); got != 4 {
		t.Fatalf("%d fetches, want 4 (3 failures backed off, then one)", got)
	}
	if c, err := agent.ReadTelemetryConfig(file); err != nil || c.Version != "v1" {
		t.Fatalf("file: %+v, %v", c, err)
	}

	for _, c := range []struct {
		name, file, version string
	}{{"no file", "", "v1"}, {"no version", filepath.Join(t.TempDir(), "t.json"), ""}} {
		s := &telemetrySouthbound{southbound: &southbound{}}
		ctx, cancel := context.WithCancel(t.Context())
		s.heartbeat = func(n int, _ *hostv1.HeartbeatRequest) (*hostv1.HeartbeatResponse, error) {
			if n == 3 {
				cancel()
			}
			return &hostv1.HeartbeatResponse{IntervalSeconds: 10, TelemetryVersion: c.version}, nil
		}
		s.get = func(int, *hostv1.GetTelemetryConfigRequest) (*hostv1.GetTelemetryConfigResponse, error) {
			t.Errorf("%s: fetched", c.name)
			return config("v1", 30), nil
		}
		n, _ := telemetryNode(t, s, c.file)
		if err := n.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Run = %v", c.name, err)
		}
		cancel()
	}
}

// The file lists each collector input once: at the shortest interval, or
// the most verbose level, of the groups that have it.
func TestTelemetryConfigInputs(t *testing.T) {
	host, cluster := hostv1.TelemetryCollectorKind_TELEMETRY_COLLECTOR_KIND_HOST, hostv1.TelemetryCollectorKind_TELEMETRY_COLLECTOR_KIND_CLUSTER
	m := &hostv1.GetTelemetryConfigResponse{Version: "v",
		MetricsGroups: []*hostv1.TelemetryMetricsGroup{
			{GroupId: "g1", Name: "a", CollectorKind: host, Inputs: []string{"cpu", "mem"}, IntervalSeconds: 30},
			{GroupId: "g2", Name: "b", CollectorKind: host, Inputs: []string{"cpu", "disk"}, IntervalSeconds: 10},
			{GroupId: "g3", Name: "c", CollectorKind: cluster, Inputs: []string{"cpu"}, IntervalSeconds: 60},
		},
		LogsGroups: []*hostv1.TelemetryLogsGroup{
			{GroupId: "g4", Name: "d", CollectorKind: host, Inputs: []string{"systemd", "kern"}, Level: hostv1.TelemetryLogsGroup_LEVEL_INFO},
			{GroupId: "g5", Name: "e", CollectorKind: host, Inputs: []string{"kern"}, Level: hostv1.TelemetryLogsGroup_LEVEL_DEBUG},
			{GroupId: "g6", Name: "f", CollectorKind: host, Inputs: []string{"systemd"}, Level: hostv1.TelemetryLogsGroup_LEVEL_ERROR},
		},
	}
	c := agent.TelemetryConfigOf(m, "host-1", time.Date(2026, 11, 23, 12, 0, 0, 0, time.FixedZone("x", 3600)))
	wantM := []agent.TelemetryMetricInput{{"cpu", "cluster", 60}, {"cpu", "host", 10}, {"disk", "host", 10}, {"mem", "host", 30}}
	wantL := []agent.TelemetryLogInput{{"kern", "host", "debug"}, {"systemd", "host", "info"}}
	if !slices.Equal(c.MetricInputs, wantM) || !slices.Equal(c.LogInputs, wantL) || c.UpdatedAt != "2026-11-23T11:00:00Z" {
		t.Fatalf("got %+v %+v %s, want %+v %+v", c.MetricInputs, c.LogInputs, c.UpdatedAt, wantM, wantL)
	}
	empty := agent.TelemetryConfigOf(&hostv1.GetTelemetryConfigResponse{Version: "e"}, "h", time.Now())
	if empty.MetricsGroups == nil || empty.LogsGroups == nil || empty.MetricInputs == nil || empty.LogInputs == nil {
		t.Fatalf("empty lists must be [] in the file: %+v", empty)
	}
}
