package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// noun is a resource type as the CLI shows it.
type noun struct {
	name     string
	kind     eim.Kind
	coll     client.Collection // where it is served; zero: its kind's collection
	cols     []column          // table columns of list and create
	flags    []flagSpec        // create flags
	noUpdate bool              // the API has no PUT/PATCH for it
	noCreate bool              // the API has no POST for it (a module writes it)
	extra    []string          // dotted paths get shows beyond the type's own fields
}

// collection returns where the noun is served.
func (n *noun) collection() client.Collection {
	if n.coll.Path != "" {
		return n.coll
	}
	c, _ := client.KindCollection(n.kind)
	return c
}

// flagSpec is a create flag setting one wire field.
type flagSpec struct {
	flag, field, usage string
	file               bool // "@path" reads the value from a file
	time               bool // Unix seconds or RFC 3339
	item               bool // of a list: each value is one item, commas and all
	lines              bool // of a text: repeated values are joined one per line
}

// column is a table column: a header and how to read a cell.
type column struct {
	header string
	cell   func(obj) string
}

// obj is a resource decoded generically.
type obj map[string]any

// str returns the value at a dotted path as text.
func (o obj) str(path string) string {
	var v any = map[string]any(o)
	for p := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return fmt.Sprintf("%.0f", x)
	case bool:
		return fmt.Sprint(x)
	case []any:
		var parts []string
		for _, e := range x {
			if m, ok := e.(map[string]any); ok && m["key"] != nil {
				parts = append(parts, fmt.Sprintf("%v=%v", m["key"], m["value"]))
			} else {
				parts = append(parts, fmt.Sprint(e))
			}
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func col(header, path string) column {
	return column{header, func(o obj) string { return o.str(path) }}
}

// enumCol shows an enum without its common prefix ("HOST_STATE_").
func enumCol(header, path, prefix string) column {
	return column{header, func(o obj) string {
		v := strings.TrimPrefix(o.str(path), prefix)
		if v == "UNSPECIFIED" {
			return ""
		}
		return v
	}}
}

// firstCol shows the first non-empty of several fields.
func firstCol(header string, paths ...string) column {
	return column{header, func(o obj) string {
		for _, p := range paths {
			if v := o.str(p); v != "" {
				return v
			}
		}
		return ""
	}}
}

// timeCol shows Unix seconds as an RFC 3339 time; 0 as empty.
func timeCol(header, path string) column {
	return column{header, func(o obj) string {
		n, err := strconv.ParseInt(o.str(path), 10, 64)
		if err != nil || n == 0 {
			return ""
		}
		return time.Unix(n, 0).UTC().Format(time.RFC3339)
	}}
}

var idCol = col("ID", "resourceId")

// countCol shows how many items a list field has; empty for none.
func countCol(header, path string) column {
	return column{header, func(o obj) string {
		if l, ok := o[path].([]any); ok && len(l) > 0 {
			return strconv.Itoa(len(l))
		}
		return ""
	}}
}

var (
	metaFlag = flagSpec{flag: "metadata", field: "metadata", usage: "label key=value (repeatable, or comma-separated)"}
	nameFlag = flagSpec{flag: "name", field: "name", usage: "name"}
)

func targetFlags() []flagSpec {
	return []flagSpec{
		{flag: "host", field: "targetHostId", usage: "target host ID"},
		{flag: "site", field: "targetSiteId", usage: "target site ID"},
		{flag: "region", field: "targetRegionId", usage: "target region ID"},
	}
}

var nouns = []*noun{
	{
		name: "region", kind: eim.KindRegion,
		cols: []column{idCol, col("NAME", "name"), col("PARENT", "parentId"), col("METADATA", "metadata")},
		flags: []flagSpec{nameFlag,
			{flag: "parent", field: "parentId", usage: "parent region ID"}, metaFlag},
	},
	{
		name: "site", kind: eim.KindSite,
		cols: []column{idCol, col("NAME", "name"), col("REGION", "regionId"), col("REGION-NAME", "region.name"), col("METADATA", "metadata")},
		flags: []flagSpec{nameFlag,
			{flag: "region", field: "regionId", usage: "region ID"},
			{flag: "lat", field: "siteLat", usage: "latitude in 1e-7 degrees"},
			{flag: "lng", field: "siteLng", usage: "longitude in 1e-7 degrees"},
			{flag: "power-policy", field: "powerPolicy", usage: "power policy of the site's hosts whose BMC sets none: ALWAYS_ON or REPORT (empty: the project's)"}, metaFlag},
	},
	{
		name: "host", kind: eim.KindHost,
		cols: []column{idCol, col("NAME", "name"), col("UUID", "uuid"), col("SERIAL", "serialNumber"), col("SITE", "siteId"),
			enumCol("DESIRED", "desiredState", "HOST_STATE_"), enumCol("CURRENT", "currentState", "HOST_STATE_"), col("STATUS", "hostStatus"),
			enumCol("SECURE BOOT", "secureBootState", "SECURE_BOOT_STATE_")},
		flags: []flagSpec{nameFlag,
			{flag: "uuid", field: "uuid", usage: "host UUID"},
			{flag: "site", field: "siteId", usage: "site ID"}, metaFlag},
	},
	{
		name: "instance", kind: eim.KindInstance,
		cols: []column{idCol, col("NAME", "name"), col("HOST", "hostID"), col("OS", "osID"),
			enumCol("DESIRED", "desiredState", "INSTANCE_STATE_"), enumCol("CURRENT", "currentState", "INSTANCE_STATE_"), col("PROVISIONING", "provisioningStatus")},
		flags: []flagSpec{nameFlag,
			{flag: "host", field: "hostID", usage: "host ID"},
			{flag: "os", field: "osID", usage: "OS profile ID"},
			{flag: "kind", field: "kind", usage: "INSTANCE_KIND_METAL"},
			{flag: "security-feature", field: "securityFeature", usage: "SECURITY_FEATURE_NONE or SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"},
			{flag: "local-account", field: "localAccountID", usage: "local account ID"},
			{flag: "custom-config", field: "customConfigID", usage: "custom config ID (repeatable)"}},
	},
	{
		name: "os", kind: eim.KindOS,
		cols: []column{idCol, col("NAME", "name"), col("PROFILE", "profileName"), col("ARCH", "architecture"),
			enumCol("TYPE", "osType", "OS_TYPE_"), enumCol("SECURITY", "securityFeature", "SECURITY_FEATURE_")},
		flags: []flagSpec{nameFlag,
			{flag: "architecture", field: "architecture", usage: "e.g. x86_64"},
			{flag: "image-url", field: "imageUrl", usage: "OS image URL"},
			{flag: "image-id", field: "imageId", usage: "image version ID"},
			{flag: "sha256", field: "sha256", usage: "image checksum"},
			{flag: "profile-name", field: "profileName", usage: "OS profile name"},
			{flag: "os-type", field: "osType", usage: "OS_TYPE_MUTABLE or OS_TYPE_IMMUTABLE"},
			{flag: "os-provider", field: "osProvider", usage: "OS_PROVIDER_KIND_INFRA or OS_PROVIDER_KIND_LENOVO"},
			{flag: "security-feature", field: "securityFeature", usage: "SECURITY_FEATURE_…"},
			{flag: "repo-url", field: "repoUrl", usage: "package repository URL"},
			{flag: "description", field: "description", usage: "description"}},
	},
	{
		name: "provider", kind: eim.KindProvider, noUpdate: true,
		cols: []column{idCol, col("NAME", "name"), enumCol("KIND", "providerKind", "PROVIDER_KIND_"),
			enumCol("VENDOR", "providerVendor", "PROVIDER_VENDOR_"), col("ENDPOINT", "apiEndpoint")},
		flags: []flagSpec{nameFlag,
			{flag: "kind", field: "providerKind", usage: "PROVIDER_KIND_BAREMETAL"},
			{flag: "vendor", field: "providerVendor", usage: "PROVIDER_VENDOR_…"},
			{flag: "api-endpoint", field: "apiEndpoint", usage: "API endpoint URL"},
			{flag: "api-credential", field: "apiCredentials", usage: "API credential (repeatable)"},
			{flag: "config", field: "config", usage: "JSON config (or @file)", file: true}},
	},
	{
		name: "schedule-single", kind: eim.KindSingleSchedule,
		cols: []column{idCol, col("NAME", "name"), enumCol("STATUS", "scheduleStatus", "SCHEDULE_STATUS_"),
			timeCol("START", "startSeconds"), timeCol("END", "endSeconds"), firstCol("TARGET", "targetHostId", "targetSiteId", "targetRegionId")},
		flags: append([]flagSpec{nameFlag,
			{flag: "status", field: "scheduleStatus", usage: "SCHEDULE_STATUS_MAINTENANCE or SCHEDULE_STATUS_OS_UPDATE"},
			{flag: "start", field: "startSeconds", usage: "start (Unix seconds or RFC 3339)", time: true},
			{flag: "end", field: "endSeconds", usage: "end (Unix seconds or RFC 3339; omit for open-ended)", time: true}},
			targetFlags()...),
	},
	{
		name: "schedule-repeated", kind: eim.KindRepeatedSchedule,
		cols: []column{idCol, col("NAME", "name"), enumCol("STATUS", "scheduleStatus", "SCHEDULE_STATUS_"),
			col("DURATION", "durationSeconds"),
			{"CRON", func(o obj) string {
				return strings.Join([]string{o.str("cronMinutes"), o.str("cronHours"), o.str("cronDayMonth"), o.str("cronMonth"), o.str("cronDayWeek")}, " ")
			}},
			firstCol("TARGET", "targetHostId", "targetSiteId", "targetRegionId")},
		flags: append([]flagSpec{nameFlag,
			{flag: "status", field: "scheduleStatus", usage: "SCHEDULE_STATUS_MAINTENANCE or SCHEDULE_STATUS_OS_UPDATE"},
			{flag: "duration", field: "durationSeconds", usage: "window length in seconds (1..86400)"},
			{flag: "cron-minutes", field: "cronMinutes", usage: "cron minutes"},
			{flag: "cron-hours", field: "cronHours", usage: "cron hours"},
			{flag: "cron-day-month", field: "cronDayMonth", usage: "cron day of month"},
			{flag: "cron-month", field: "cronMonth", usage: "cron month"},
			{flag: "cron-day-week", field: "cronDayWeek", usage: "cron day of week"}},
			targetFlags()...),
	},
	{
		name: "localaccount", kind: eim.KindLocalAccount, noUpdate: true,
		cols: []column{idCol, col("USERNAME", "username")},
		flags: []flagSpec{
			{flag: "username", field: "username", usage: "user name"},
			{flag: "ssh-key", field: "sshKey", usage: "SSH public key (or @file)", file: true}},
	},
	telemetryGroupNoun("telemetry-loggroup", client.TelemetryLogsGroups, "log sources, e.g. systemd units"),
	telemetryGroupNoun("telemetry-metricgroup", client.TelemetryMetricsGroups, "metrics, e.g. cpu, mem"),
	{
		name: "telemetry-logprofile", kind: eim.KindTelemetryProfile, coll: client.TelemetryLogsProfiles,
		cols: []column{idCol, firstCol("TARGET", "targetInstance", "targetSite", "targetRegion"), col("GROUP", "logsGroupId"),
			col("GROUP-NAME", "logsGroup.name"), enumCol("LEVEL", "logLevel", "SEVERITY_LEVEL_")},
		flags: append(profileTargetFlags(),
			flagSpec{flag: "group", field: "logsGroupId", usage: "logs group ID"},
			flagSpec{flag: "level", field: "logLevel", usage: "SEVERITY_LEVEL_CRITICAL, _ERROR, _WARN, _INFO or _DEBUG"}),
	},
	{
		name: "telemetry-metricprofile", kind: eim.KindTelemetryProfile, coll: client.TelemetryMetricsProfiles,
		cols: []column{idCol, firstCol("TARGET", "targetInstance", "targetSite", "targetRegion"), col("GROUP", "metricsGroupId"),
			col("GROUP-NAME", "metricsGroup.name"), col("INTERVAL", "metricsInterval")},
		flags: append(profileTargetFlags(),
			flagSpec{flag: "group", field: "metricsGroupId", usage: "metrics group ID"},
			flagSpec{flag: "interval", field: "metricsInterval", usage: "seconds between collections (1..86400)"}),
	},
	{
		name: "os-update-policy", kind: eim.KindOSUpdatePolicy, noUpdate: true,
		cols: []column{idCol, col("NAME", "name"), enumCol("POLICY", "updatePolicy", "UPDATE_POLICY_"), col("TARGET-OS", "targetOsId"),
			col("TARGET-OS-NAME", "targetOs.name"), countCol("SOURCES", "updateSources"), col("KERNEL", "updateKernelCommand")},
		flags: []flagSpec{nameFlag,
			{flag: "description", field: "description", usage: "description"},
			{flag: "policy", field: "updatePolicy", usage: "UPDATE_POLICY_LATEST (newest image of the instance's OS) or UPDATE_POLICY_TARGET"},
			{flag: "target-os", field: "targetOsId", usage: "OS profile ID an immutable OS is updated to (TARGET)"},
			{flag: "source", field: "updateSources", usage: "package source, DEB822 for Debian-like OSes (repeatable; or @file)", file: true, item: true},
			{flag: "package", field: "updatePackages", usage: "package to install or upgrade (repeatable; or @file, one per line)", file: true, lines: true},
			{flag: "kernel-command", field: "updateKernelCommand", usage: "kernel command-line options"}},
	},
	{
		name: "os-update-run", kind: eim.KindOSUpdateRun, noUpdate: true, noCreate: true,
		cols: []column{idCol, col("NAME", "name"), col("INSTANCE", "instance.resourceId"), col("POLICY", "appliedPolicy.resourceId"),
			col("STATUS", "status"), enumCol("INDICATOR", "statusIndicator", "STATUS_INDICATION_"), timeCol("START", "startTime"), timeCol("END", "endTime")},
		extra: []string{"instance.resourceId", "instance.host.resourceId", "appliedPolicy.resourceId", "appliedPolicy.name"},
	},
	{
		name: "customconfig", kind: eim.KindCustomConfig, noUpdate: true,
		cols: []column{idCol, col("NAME", "name"), col("DESCRIPTION", "description")},
		flags: []flagSpec{nameFlag,
			{flag: "description", field: "description", usage: "description"},
			{flag: "config", field: "config", usage: "cloud-init config (or @file)", file: true}},
	},
	{
		name: "workload", kind: eim.KindWorkload,
		cols: []column{idCol, col("NAME", "name"), enumCol("KIND", "kind", "WORKLOAD_KIND_"), col("EXTERNAL-ID", "externalId"),
			col("STATUS", "status"), countCol("MEMBERS", "members")},
		flags: []flagSpec{nameFlag,
			{flag: "kind", field: "kind", usage: "WORKLOAD_KIND_CLUSTER"},
			{flag: "external-id", field: "externalId", usage: "ID outside EIM, e.g. the cluster's name (unique in the project)"},
			{flag: "status", field: "status", usage: "status text"}},
	},
	{
		name: "workload-member", kind: eim.KindWorkloadMember, noUpdate: true,
		cols: []column{idCol, col("WORKLOAD", "workloadId"), col("WORKLOAD-NAME", "workload.name"), col("INSTANCE", "instanceId"),
			col("INSTANCE-NAME", "instance.name"), enumCol("KIND", "kind", "WORKLOAD_MEMBER_KIND_")},
		flags: []flagSpec{
			{flag: "workload", field: "workloadId", usage: "workload ID"},
			{flag: "instance", field: "instanceId", usage: "instance ID (in one workload at most)"},
			{flag: "kind", field: "kind", usage: "WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}},
		extra: []string{"workload.name", "workload.externalId", "instance.name", "instance.hostID"},
	},
}

func telemetryGroupNoun(name string, coll client.Collection, what string) *noun {
	return &noun{
		name: name, kind: eim.KindTelemetryGroup, coll: coll, noUpdate: true,
		cols: []column{idCol, col("NAME", "name"), enumCol("COLLECTOR", "collectorKind", "TELEMETRY_COLLECTOR_KIND_"), col("GROUPS", "groups")},
		flags: []flagSpec{nameFlag,
			{flag: "collector", field: "collectorKind", usage: "TELEMETRY_COLLECTOR_KIND_HOST or TELEMETRY_COLLECTOR_KIND_CLUSTER"},
			{flag: "group", field: "groups", usage: what + " (repeatable, or comma-separated)"}},
	}
}

func profileTargetFlags() []flagSpec {
	return []flagSpec{
		{flag: "instance", field: "targetInstance", usage: "target instance ID"},
		{flag: "site", field: "targetSite", usage: "target site ID"},
		{flag: "region", field: "targetRegion", usage: "target region ID"},
	}
}

func findNoun(name string) *noun {
	for _, n := range nouns {
		if n.name == name {
			return n
		}
	}
	return nil
}
