package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/eimhq/eim"
)

// Defaults is a versioned definition of what every project gets. A change
// of its content takes a new Version: projects are brought to it once.
type Defaults struct {
	Version int
	Groups  []Group
	// Provider: the project's default provider (inventory's
	// DefaultProviderName), which mirrors its zero-touch settings.
	Provider bool
	// ClusterTemplates are made in every project, the one named
	// DefaultTemplate its default (the clusters module's).
	ClusterTemplates []eim.ClusterTemplate
	DefaultTemplate  string
}

// templateKey names a cluster template in the record; defaultTemplateKey
// the default set once.
func templateKey(t eim.ClusterTemplate) string { return "clustertemplate/" + t.Name + "/" + t.Version }

const defaultTemplateKey = "clustertemplate/default"

// Group is a default telemetry group.
type Group struct {
	Type      eim.TelemetryResourceKind // logs or metrics
	Name      string
	Collector eim.TelemetryCollectorKind
	Items     []string
}

// Key names g in a project's record of its defaults.
func (g Group) Key() string {
	v := "logs"
	if g.Type == eim.TelemetryMetrics {
		v = "metrics"
	}
	return "telemetrygroup/" + v + "/" + g.Name
}

// providerKey names the default provider in the record.
const providerKey = "provider/infra_onboarding"

// digest is what a group's content was when it was written: a change of
// any writable field changes it.
func digest(name string, collector eim.TelemetryCollectorKind, items []string) string {
	h := sha256.New()
	h.Write([]byte(name + "\x00" + string(collector) + "\x00" + strings.Join(items, "\x00")))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func (g Group) digest() string { return digest(g.Name, g.Collector, g.Items) }

func groupDigest(r *eim.TelemetryGroup) string { return digest(r.Name, r.CollectorKind, r.Groups) }

const (
	host    eim.TelemetryCollectorKind = "TELEMETRY_COLLECTOR_KIND_HOST"
	cluster eim.TelemetryCollectorKind = "TELEMETRY_COLLECTOR_KIND_CLUSTER"
)

// Builtin is the definition of this release. Bump Version with any change.
//
// The groups are the original's defaults, by name and collector; their
// inputs are what EIM's nodes collect under them (a node runs one agent,
// eim-agent, where the original ran several).
func Builtin() Defaults {
	logs, metrics := eim.TelemetryLogs, eim.TelemetryMetrics
	return Defaults{
		// 2: the cluster templates.
		Version: 2,
		Groups: []Group{
			{logs, "SystemD", host, []string{"systemd"}},
			{logs, "Agents", host, []string{"eim-agent"}},
			{logs, "Opentelemetry", host, []string{"opentelemetry"}},
			{logs, "Container_Cluster", cluster, []string{"container"}},
			{logs, "RKE_Cluster", cluster, []string{"rke2-server", "rke2-agent"}},
			{logs, "Opentelemetry_Cluster", cluster, []string{"opentelemetry"}},
			{metrics, "Disk_Usage_and_Health", host, []string{"disk", "diskio", "smart"}},
			{metrics, "Network_Usage", host, []string{"net"}},
			{metrics, "Ipmi_Sensor", host, []string{"ipmi_sensor"}},
			{metrics, "GPU_Usage", host, []string{"intel_gpu_top"}},
			{metrics, "Reliability_Availability_Serviceability", host, []string{"ras"}},
			{metrics, "Power_Usage_And_Temperature", host, []string{"temp", "intel_powerstat"}},
			{metrics, "K8s_Stat_Cluster", cluster, []string{"kubernetes", "kube_inventory"}},
			{metrics, "Opentelemetry_Cluster", cluster, []string{"opentelemetry"}},
		},
		Provider:         true,
		ClusterTemplates: ClusterTemplates(),
		DefaultTemplate:  DefaultClusterTemplate,
	}
}
