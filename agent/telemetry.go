package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// TelemetryConfig is the file the node agent writes for the local
// collectors (Node.TelemetryFile): the node's effective telemetry
// configuration. docs/telemetry.md describes it.
type TelemetryConfig struct {
	// Version names the configuration (the server's digest of it).
	Version string `json:"version"`
	HostID  string `json:"hostId"`
	// UpdatedAt is when the agent wrote the file (RFC 3339, UTC).
	UpdatedAt string `json:"updatedAt"`
	// The groups turned on for the node, by group ID.
	MetricsGroups []TelemetryMetricsGroup `json:"metricsGroups"`
	LogsGroups    []TelemetryLogsGroup    `json:"logsGroups"`
	// The same, per collector input: an input in several groups appears
	// once, at the shortest interval or the most verbose level.
	MetricInputs []TelemetryMetricInput `json:"metricInputs"`
	LogInputs    []TelemetryLogInput    `json:"logInputs"`
}

// TelemetryMetricsGroup is a metrics group at its effective interval.
type TelemetryMetricsGroup struct {
	GroupID         string   `json:"groupId"`
	Name            string   `json:"name"`
	Collector       string   `json:"collector"` // "host" or "cluster"
	Inputs          []string `json:"inputs"`
	IntervalSeconds uint32   `json:"intervalSeconds"`
}

// TelemetryLogsGroup is a logs group at its effective level.
type TelemetryLogsGroup struct {
	GroupID   string   `json:"groupId"`
	Name      string   `json:"name"`
	Collector string   `json:"collector"`
	Inputs    []string `json:"inputs"`
	Level     string   `json:"level"` // "critical", "error", "warn", "info" or "debug"
}

// TelemetryMetricInput is one metrics input of a collector.
type TelemetryMetricInput struct {
	Name            string `json:"name"`
	Collector       string `json:"collector"`
	IntervalSeconds uint32 `json:"intervalSeconds"`
}

// TelemetryLogInput is one log source of a collector.
type TelemetryLogInput struct {
	Name      string `json:"name"`
	Collector string `json:"collector"`
	Level     string `json:"level"`
}

// telemetryState is what the heartbeat loop knows of the node's telemetry
// configuration.
type telemetryState struct {
	loaded   bool   // the file's version was read
	version  string // the version in the file
	retry    retrier
	notUntil time.Time
}

// telemetry fetches and writes the node's telemetry configuration when a
// heartbeat's answer names a version the file does not have. A failure is
// logged and retried with back-off; the heartbeat goes on.
func (n *Node) telemetry(ctx context.Context, st *telemetryState, version string) {
	if n.TelemetryFile == "" || version == "" {
		return
	}
	if !st.loaded {
		st.version, st.loaded = readTelemetryVersion(n.TelemetryFile), true
	}
	now := n.now()
	if version == st.version || now.Before(st.notUntil) {
		return
	}
	resp, err := n.hc.GetTelemetryConfig(ctx, connect.NewRequest(&hostv1.GetTelemetryConfigRequest{Version: st.version}))
	if err == nil && !resp.Msg.Unchanged {
		err = writeTelemetryFile(n.TelemetryFile, TelemetryConfigOf(resp.Msg, n.Config.HostID, now))
	}
	if err != nil {
		d := st.retry.next(err)
		st.notUntil = now.Add(d)
		n.log().Warn("telemetry configuration not updated", "err", err, "retry_in", d)
		return
	}
	st.retry.reset()
	st.notUntil = time.Time{}
	st.version = resp.Msg.Version
	if !resp.Msg.Unchanged {
		n.log().Info("wrote the telemetry configuration", "file", n.TelemetryFile, "version", st.version,
			"metrics_groups", len(resp.Msg.MetricsGroups), "logs_groups", len(resp.Msg.LogsGroups))
	}
}

// TelemetryConfigOf turns the server's answer into the file's content.
func TelemetryConfigOf(m *hostv1.GetTelemetryConfigResponse, hostID string, now time.Time) *TelemetryConfig {
	c := &TelemetryConfig{Version: m.Version, HostID: hostID, UpdatedAt: now.UTC().Format(time.RFC3339),
		MetricsGroups: []TelemetryMetricsGroup{}, LogsGroups: []TelemetryLogsGroup{},
		MetricInputs: []TelemetryMetricInput{}, LogInputs: []TelemetryLogInput{}}
	metricIn := map[[2]string]*TelemetryMetricInput{}
	logIn := map[[2]string]*TelemetryLogInput{}
	logLevel := map[[2]string]hostv1.TelemetryLogsGroup_Level{}
	for _, g := range m.MetricsGroups {
		col := collectorName(g.CollectorKind)
		c.MetricsGroups = append(c.MetricsGroups, TelemetryMetricsGroup{GroupID: g.GroupId, Name: g.Name, Collector: col,
			Inputs: nonNil(g.Inputs), IntervalSeconds: g.IntervalSeconds})
		for _, in := range g.Inputs {
			k := [2]string{col, in}
			if x := metricIn[k]; x != nil {
				x.IntervalSeconds = min(x.IntervalSeconds, g.IntervalSeconds)
			} else {
				metricIn[k] = &TelemetryMetricInput{Name: in, Collector: col, IntervalSeconds: g.IntervalSeconds}
			}
		}
	}
	for _, g := range m.LogsGroups {
		col := collectorName(g.CollectorKind)
		c.LogsGroups = append(c.LogsGroups, TelemetryLogsGroup{GroupID: g.GroupId, Name: g.Name, Collector: col,
			Inputs: nonNil(g.Inputs), Level: levelName(g.Level)})
		for _, in := range g.Inputs {
			k := [2]string{col, in}
			if x := logIn[k]; x != nil {
				if g.Level > logLevel[k] {
					x.Level, logLevel[k] = levelName(g.Level), g.Level
				}
			} else {
				logIn[k], logLevel[k] = &TelemetryLogInput{Name: in, Collector: col, Level: levelName(g.Level)}, g.Level
			}
		}
	}
	for _, x := range metricIn {
		c.MetricInputs = append(c.MetricInputs, *x)
	}
	for _, x := range logIn {
		c.LogInputs = append(c.LogInputs, *x)
	}
	slices.SortFunc(c.MetricInputs, func(a, b TelemetryMetricInput) int {
		return cmp.Or(cmp.Compare(a.Collector, b.Collector), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(c.LogInputs, func(a, b TelemetryLogInput) int {
		return cmp.Or(cmp.Compare(a.Collector, b.Collector), cmp.Compare(a.Name, b.Name))
	})
	return c
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// collectorName is "host", "cluster" or "" for a collector kind.
func collectorName(k hostv1.TelemetryCollectorKind) string {
	if k == hostv1.TelemetryCollectorKind_TELEMETRY_COLLECTOR_KIND_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(k.String(), "TELEMETRY_COLLECTOR_KIND_"))
}

// levelName is the lowercase name of a log level ("debug"), "" when
// unspecified.
func levelName(l hostv1.TelemetryLogsGroup_Level) string {
	switch l {
	case hostv1.TelemetryLogsGroup_LEVEL_CRITICAL:
		return "critical"
	case hostv1.TelemetryLogsGroup_LEVEL_ERROR:
		return "error"
	case hostv1.TelemetryLogsGroup_LEVEL_WARN:
		return "warn"
	case hostv1.TelemetryLogsGroup_LEVEL_INFO:
		return "info"
	case hostv1.TelemetryLogsGroup_LEVEL_DEBUG:
		return "debug"
	}
	return ""
}

// readTelemetryVersion returns the version of the file written before (so
// that a restarted agent does not fetch what it has), "" when there is
// none or it cannot be read.
func readTelemetryVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var c TelemetryConfig
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Version
}

// ReadTelemetryConfig reads a file written by the agent.
func ReadTelemetryConfig(path string) (*TelemetryConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c TelemetryConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("telemetry config %s: %w", path, err)
	}
	return &c, nil
}

// writeTelemetryFile writes c to path atomically: a temporary file in the
// same directory, synced, then renamed over path, so that a collector
// never reads half a file. The file is readable by all (collectors run as
// their own users); it holds no secret.
func writeTelemetryFile(path string, c *TelemetryConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode telemetry config: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644, 0o755)
}
