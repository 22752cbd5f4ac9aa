package eim

import "encoding/json"

// Kind names a resource type. Its value is the prefix of the type's IDs.
type Kind string

// The resource kinds of the foundation. Later modules (telemetry, OS updates,
// workloads, hardware children) add theirs here and in schema.go.
const (
	KindRegion           Kind = "region"
	KindSite             Kind = "site"
	KindHost             Kind = "host"
	KindInstance         Kind = "inst"
	KindOS               Kind = "os"
	KindProvider         Kind = "provider"
	KindSingleSchedule   Kind = "singlesche"
	KindRepeatedSchedule Kind = "repeatedsche"
	KindLocalAccount     Kind = "localaccount"
	KindCustomConfig     Kind = "customconfig"
	// The telemetry kinds each hold two API types (logs and metrics),
	// told apart by a variant field: see telemetry.go.
	KindTelemetryGroup   Kind = "telemetrygroup"
	KindTelemetryProfile Kind = "telemetryprofile"
	// OS updates: see maintenance.go.
	KindOSUpdatePolicy Kind = "osupdatepolicy"
	KindOSUpdateRun    Kind = "osupdaterun"
	// Workloads: see workload.go.
	KindWorkload       Kind = "workload"
	KindWorkloadMember Kind = "workloadmember"
	// KindWorkflow is internal: not served by the REST API as a resource.
	KindWorkflow Kind = "workflow"
)

// Resource is implemented by every stored resource type (as a pointer).
type Resource interface {
	// ResourceKind returns the resource's kind.
	ResourceKind() Kind
	// Base returns the fields every resource has.
	Base() *Meta
}

// Meta holds the fields every resource has. It is embedded in each resource.
type Meta struct {
	ResourceID string     `json:"resourceId" db:"id"`
	Project    string     `json:"-" db:"project"`
	Timestamps Timestamps `json:"timestamps" eim:"flatten"`
}

// Base returns m itself; it lets every resource satisfy Resource.
func (m *Meta) Base() *Meta { return m }

// ID returns the resource ID.
func (m *Meta) ID() string { return m.ResourceID }

// Timestamps are set by the store: creation, and the last change of any field.
type Timestamps struct {
	CreatedAt Time `json:"createdAt" db:"created_at"`
	UpdatedAt Time `json:"updatedAt" db:"updated_at"`
}

// MetadataItem is a user label: a key and a value.
type MetadataItem struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Metadata is a list of labels. Keys are unique within one list.
type Metadata []MetadataItem

// Get returns the value of key and whether it is present.
func (m Metadata) Get(key string) (string, bool) {
	for _, it := range m {
		if it.Key == key {
			return it.Value, true
		}
	}
	return "", false
}

// Inherit returns the labels of parent overlaid by those of m: keys of m win.
// It is how metadata flows region → site → host.
func (m Metadata) Inherit(parent Metadata) Metadata {
	out := make(Metadata, 0, len(parent)+len(m))
	for _, it := range parent {
		if _, ok := m.Get(it.Key); !ok {
			out = append(out, it)
		}
	}
	return append(out, m...)
}

// MarshalJSON renders an absent list as [] rather than null: the API declares
// metadata an array, and clients iterate it without a nil check.
func (m Metadata) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]MetadataItem(m))
}
