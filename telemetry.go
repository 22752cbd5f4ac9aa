package eim

// Telemetry groups and profiles.
//
// The API has two resource types of each, one for logs and one for
// metrics, and each pair shares an ID prefix (telemetrygroup-,
// telemetryprofile-). A kind's value is its ID prefix, so each pair is one
// kind here, as it was one resource in the original's inventory: a hidden
// variant field (Type, never on the wire) says which API type a resource
// is, and fields tagged eim:"only=…" exist only in that variant. The API
// serves each variant under its own paths; a resource of the other variant
// is not found there.

// The variants of the telemetry kinds.
const (
	TelemetryLogs    TelemetryResourceKind = "TELEMETRY_RESOURCE_KIND_LOGS"
	TelemetryMetrics TelemetryResourceKind = "TELEMETRY_RESOURCE_KIND_METRICS"
)

// TelemetryGroup is a named set of log sources or metrics that a
// collector gathers: what a profile switches on, at a level or interval,
// for an instance, a site or a region.
type TelemetryGroup struct {
	Meta
	// Type is the variant: TelemetryLogs or TelemetryMetrics. Set on
	// create, never changed.
	Type           TelemetryResourceKind `json:"-" db:"kind" eim:"variant"`
	LogsAliasID    string                `json:"telemetryLogsGroupId,omitempty" db:"-" eim:"alias,only=TELEMETRY_RESOURCE_KIND_LOGS"`
	MetricsAliasID string                `json:"telemetryMetricsGroupId,omitempty" db:"-" eim:"alias,only=TELEMETRY_RESOURCE_KIND_METRICS"`

	Name          string                 `json:"name" eim:"w"`
	CollectorKind TelemetryCollectorKind `json:"collectorKind" eim:"w"`
	// Groups are the collector's inputs: log sources (e.g. systemd units)
	// or metric plugins (e.g. cpu, mem).
	Groups []string `json:"groups" db:"group_items" eim:"w"`
}

func (*TelemetryGroup) ResourceKind() Kind { return KindTelemetryGroup }

// TelemetryProfile turns a telemetry group on for every node under its
// target — an instance, a site or a region (exactly one) — at a log level
// (logs) or an interval (metrics). A node's effective configuration merges
// the profiles of its instance, its host's site and the site's regions.
type TelemetryProfile struct {
	Meta
	// Type is the variant, as for TelemetryGroup; the group a profile
	// names has the same.
	Type    TelemetryResourceKind `json:"-" db:"kind" eim:"variant"`
	AliasID string                `json:"profileId" db:"-" eim:"alias"`

	TargetInstance string `json:"targetInstance" eim:"w,edge=instance:inst"`
	TargetSite     string `json:"targetSite" eim:"w,edge=site:site"`
	TargetRegion   string `json:"targetRegion" eim:"w,edge=region:region"`

	LogLevel        SeverityLevel `json:"logLevel,omitempty" eim:"w,only=TELEMETRY_RESOURCE_KIND_LOGS"`
	LogsGroupID     string        `json:"logsGroupId,omitempty" eim:"w,edge=logsGroup:telemetrygroup,only=TELEMETRY_RESOURCE_KIND_LOGS"`
	MetricsInterval uint32        `json:"metricsInterval,omitempty" eim:"w,only=TELEMETRY_RESOURCE_KIND_METRICS"`
	MetricsGroupID  string        `json:"metricsGroupId,omitempty" eim:"w,edge=metricsGroup:telemetrygroup,only=TELEMETRY_RESOURCE_KIND_METRICS"`

	// Filled on read by the inventory, never stored.
	LogsGroup    *TelemetryGroup `json:"logsGroup,omitempty" db:"-" eim:"only=TELEMETRY_RESOURCE_KIND_LOGS"`
	MetricsGroup *TelemetryGroup `json:"metricsGroup,omitempty" db:"-" eim:"only=TELEMETRY_RESOURCE_KIND_METRICS"`
}

func (*TelemetryProfile) ResourceKind() Kind { return KindTelemetryProfile }

// GroupID returns the ID of the group the profile turns on.
func (p *TelemetryProfile) GroupID() string {
	if p.Type == TelemetryMetrics {
		return p.MetricsGroupID
	}
	return p.LogsGroupID
}

// Target returns the ID of what the profile targets.
func (p *TelemetryProfile) Target() string {
	switch {
	case p.TargetInstance != "":
		return p.TargetInstance
	case p.TargetSite != "":
		return p.TargetSite
	}
	return p.TargetRegion
}

// Bounds of a metrics profile's interval, in seconds. The API's minimum
// is the original's; a day is far beyond what any collector schedules.
// The original's collectors ran at 30 s to 60 min; nothing here clamps.
const (
	MinMetricsInterval = 1
	MaxMetricsInterval = 86400
	// MaxTelemetryGroupItems bounds a group's list of inputs.
	MaxTelemetryGroupItems = 100
)

// Verbosity orders log levels: a higher number logs more. The most verbose
// level among the profiles that reach a node wins. UNSPECIFIED and
// unknown levels are 0.
func (l SeverityLevel) Verbosity() int {
	switch l {
	case "SEVERITY_LEVEL_CRITICAL":
		return 1
	case "SEVERITY_LEVEL_ERROR":
		return 2
	case "SEVERITY_LEVEL_WARN":
		return 3
	case "SEVERITY_LEVEL_INFO":
		return 4
	case "SEVERITY_LEVEL_DEBUG":
		return 5
	}
	return 0
}
