package eim

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// Schema describes a resource kind: its table, its JSON list name and its
// fields. It is derived once from the struct tags of the resource type:
//
//	json:"name"            the wire name (camelCase, as the original API)
//	db:"col"               the column; default snake_case of the wire name; "-" = not stored
//	eim:"w"                writable through the API (a desired field); else read-only
//	eim:"edge=NAME:KIND"   the column holds the ID of a KIND resource, reached in
//	                       filters as NAME.field
//	eim:"alias"            a read-only echo of resourceId (e.g. regionID)
//	eim:"flatten"          a struct whose fields are stored as columns of this table
//	eim:"variant"          the hidden field that tells apart the API types a kind holds
//	                       (the telemetry kinds: logs and metrics)
//	eim:"only=VALUE"       the field exists only in resources of that variant
//	eim:"fold"             a string compared without regard to case (uniqueness and the
//	                       store's exact-match conditions); kept as written
//
// The store, the filter compiler and the API decoder all read the same Schema,
// so a field is declared once.
type Schema struct {
	Kind   Kind
	Table  string // SQL table
	Plural string // JSON name of the list in list responses
	Type   reflect.Type
	Fields []*Field // stored and virtual fields, in declaration order
	Edges  []*Edge  // forward and back edges, for filters and has()
	// Variant is the field that says which of several API types a
	// resource is, for kinds that hold more than one; nil for the others.
	Variant *Field

	byName map[string]*Field
}

// Field is one field of a resource.
type Field struct {
	Name     string       // JSON name, e.g. "desiredState"
	Column   string       // SQL column, "" when not stored
	Index    []int        // reflect field index path from the struct
	Type     reflect.Type // Go type
	Writable bool         // the API may set it
	Alias    bool         // echo of resourceId
	Edge     *Edge        // non-nil for a reference to another resource
	Variant  string       // non-empty: only resources of this variant have the field
	Fold     bool         // compared case-insensitively (a host's uuid)
}

// In reports whether resources of variant v have the field: a field of no
// particular variant belongs to every one, and v "" stands for any.
func (f *Field) In(v string) bool { return f.Variant == "" || v == "" || f.Variant == v }

// VariantOf returns r's variant: the value of the schema's variant field,
// or "" for a kind without variants.
func (s *Schema) VariantOf(r Resource) string {
	if s.Variant == nil {
		return ""
	}
	return s.Variant.Value(r).String()
}

// Stored reports whether the field has a column.
func (f *Field) Stored() bool { return f.Column != "" }

// IsEnum reports whether the field holds an enumerated value.
func (f *Field) IsEnum() bool { return f.Type.Implements(reflect.TypeFor[Enum]()) }

// Edge links a resource to another kind. A forward edge is a column of this
// table that holds the other resource's ID (host.site_id → site). A back edge
// is a column of the other table that holds this resource's ID (host ←
// instance.host_id).
type Edge struct {
	Name   string // name in filters, e.g. "site"
	Kind   Kind   // the other kind
	Column string // forward: our column; back: the other table's column
	Back   bool
}

// Field returns the field with the JSON name (camelCase) or its snake_case
// form, as protojson clients may send either.
func (s *Schema) Field(name string) (*Field, bool) {
	f, ok := s.byName[name]
	return f, ok
}

// StoredField returns the field with the JSON name, or else the hidden
// reference with the column name: the store's exact-match conditions
// (Cond) reach references hidden from the API (json:"-", e.g. an OS update
// run's instance_id) by their column, which user filters cannot. Other
// hidden fields (node credentials) stay out of reach.
func (s *Schema) StoredField(name string) (*Field, bool) {
	if f, ok := s.byName[name]; ok {
		return f, true
	}
	for _, f := range s.Fields {
		if f.Name == "" && f.Edge != nil && f.Column == name {
			return f, true
		}
	}
	return nil, false
}

// Edge returns the edge with the name.
func (s *Schema) Edge(name string) (*Edge, bool) {
	for _, e := range s.Edges {
		if e.Name == name {
			return e, true
		}
	}
	return nil, false
}

// New returns a new zero resource of the schema's kind.
func (s *Schema) New() Resource { return reflect.New(s.Type).Interface().(Resource) }

// Value returns the field's value in r (a pointer to the schema's type).
func (f *Field) Value(r Resource) reflect.Value {
	return reflect.ValueOf(r).Elem().FieldByIndex(f.Index)
}

type kindInfo struct {
	kind   Kind
	table  string
	plural string
	zero   Resource
	back   []*Edge
}

// The registry of kinds. Later modules add a line here.
var kindInfos = []kindInfo{
	{KindRegion, "regions", "regions", (*Region)(nil), []*Edge{{Name: "sites", Kind: KindSite, Column: "region_id", Back: true}}},
	{KindSite, "sites", "sites", (*Site)(nil), []*Edge{{Name: "hosts", Kind: KindHost, Column: "site_id", Back: true}}},
	{KindHost, "hosts", "hosts", (*Host)(nil), []*Edge{{Name: "instance", Kind: KindInstance, Column: "host_id", Back: true}}},
	{KindInstance, "instances", "instances", (*Instance)(nil), []*Edge{{Name: "workloadMembers", Kind: KindWorkloadMember, Column: "instance_id", Back: true}}},
	{KindOS, "operating_systems", "OperatingSystemResources", (*OS)(nil), nil},
	{KindProvider, "providers", "providers", (*Provider)(nil), nil},
	{KindSingleSchedule, "single_schedules", "singleSchedules", (*SingleSchedule)(nil), nil},
	{KindRepeatedSchedule, "repeated_schedules", "repeatedSchedules", (*RepeatedSchedule)(nil), nil},
	{KindLocalAccount, "local_accounts", "localAccounts", (*LocalAccount)(nil), nil},
	{KindCustomConfig, "custom_configs", "customConfigs", (*CustomConfig)(nil), nil},
	// The telemetry kinds hold two API types each, whose lists have names
	// of their own (see Variants).
	{KindTelemetryGroup, "telemetry_groups", "telemetryGroups", (*TelemetryGroup)(nil), nil},
	{KindTelemetryProfile, "telemetry_profiles", "telemetryProfiles", (*TelemetryProfile)(nil), nil},
	{KindOSUpdatePolicy, "os_update_policies", "osUpdatePolicies", (*OSUpdatePolicy)(nil), nil},
	{KindOSUpdateRun, "os_update_runs", "osUpdateRuns", (*OSUpdateRun)(nil), nil},
	{KindWorkload, "workloads", "workloads", (*Workload)(nil), []*Edge{{Name: "members", Kind: KindWorkloadMember, Column: "workload_id", Back: true}}},
	{KindWorkloadMember, "workload_members", "workloadMembers", (*WorkloadMember)(nil), nil},
	{KindWorkflow, "workflows", "workflows", (*Workflow)(nil), nil},
}

// Variant is one of the API types a kind with variants holds: the
// resources whose variant field has Value.
type Variant struct {
	Kind   Kind
	Value  string
	Plural string // JSON name of its list in list responses
	Noun   string // what messages call one, e.g. "telemetry logs group"
}

// The API types of the kinds with variants.
var (
	TelemetryLogsGroup      = Variant{KindTelemetryGroup, string(TelemetryLogs), "telemetryLogsGroups", "telemetry logs group"}
	TelemetryMetricsGroup   = Variant{KindTelemetryGroup, string(TelemetryMetrics), "telemetryMetricsGroups", "telemetry metrics group"}
	TelemetryLogsProfile    = Variant{KindTelemetryProfile, string(TelemetryLogs), "telemetryLogsProfiles", "telemetry logs profile"}
	TelemetryMetricsProfile = Variant{KindTelemetryProfile, string(TelemetryMetrics), "telemetryMetricsProfiles", "telemetry metrics profile"}
)

// Variants returns the API types of kind k, or nil when it holds one.
func Variants(k Kind) []Variant {
	var out []Variant
	for _, v := range []Variant{TelemetryLogsGroup, TelemetryMetricsGroup, TelemetryLogsProfile, TelemetryMetricsProfile} {
		if v.Kind == k {
			out = append(out, v)
		}
	}
	return out
}

// VariantNamed returns the API type of kind k with the variant value, and
// whether there is one.
func VariantNamed(k Kind, value string) (Variant, bool) {
	for _, v := range Variants(k) {
		if v.Value == value {
			return v, true
		}
	}
	return Variant{}, false
}

// schemas is derived from kindInfos once; it is immutable afterwards.
var schemas = sync.OnceValue(func() map[Kind]*Schema {
	m := make(map[Kind]*Schema, len(kindInfos))
	for _, ki := range kindInfos {
		s := &Schema{
			Kind:   ki.kind,
			Table:  ki.table,
			Plural: ki.plural,
			Type:   reflect.TypeOf(ki.zero).Elem(),
			byName: map[string]*Field{},
		}
		addFields(s, s.Type, nil)
		s.Edges = append(s.Edges, ki.back...)
		m[ki.kind] = s
	}
	return m
})

// SchemaOf returns the schema of a kind, or nil for an unknown kind.
func SchemaOf(k Kind) *Schema { return schemas()[k] }

// Kinds returns every registered kind, parents before children (the order
// in which tables are created and the reverse of the order of deletion).
func Kinds() []Kind {
	out := make([]Kind, len(kindInfos))
	for i, ki := range kindInfos {
		out[i] = ki.kind
	}
	return out
}

// KindOfID returns the kind named by an ID's prefix, if it is registered.
func KindOfID(id string) (Kind, bool) {
	prefix, _, ok := strings.Cut(id, "-")
	if !ok {
		return "", false
	}
	_, known := schemas()[Kind(prefix)]
	return Kind(prefix), known
}

// NewResource returns a new zero resource of kind k.
func NewResource(k Kind) Resource {
	s := SchemaOf(k)
	if s == nil {
		panic(fmt.Sprintf("eim: unknown kind %q", k))
	}
	return s.New()
}

func addFields(s *Schema, t reflect.Type, index []int) {
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		opts := strings.Split(sf.Tag.Get("eim"), ",")
		if sf.Anonymous || hasOpt(opts, "flatten") {
			addFields(s, sf.Type, idx)
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			name = ""
		}
		col := sf.Tag.Get("db")
		switch {
		case col == "-":
			col = ""
		case col == "" && name != "":
			col = snake(name)
		}
		if name == "" && col == "" {
			continue
		}
		f := &Field{Name: name, Column: col, Index: idx, Type: sf.Type, Writable: hasOpt(opts, "w"), Alias: hasOpt(opts, "alias"), Fold: hasOpt(opts, "fold")}
		for _, o := range opts {
			if v, ok := strings.CutPrefix(o, "edge="); ok {
				en, ek, _ := strings.Cut(v, ":")
				f.Edge = &Edge{Name: en, Kind: Kind(ek), Column: col}
				s.Edges = append(s.Edges, f.Edge)
			}
			if v, ok := strings.CutPrefix(o, "only="); ok {
				f.Variant = v
			}
		}
		if hasOpt(opts, "variant") {
			s.Variant = f
		}
		s.Fields = append(s.Fields, f)
		if name != "" {
			s.byName[name] = f
			if sn := snake(name); sn != name {
				s.byName[sn] = f
			}
		}
	}
}

func hasOpt(opts []string, o string) bool {
	for _, x := range opts {
		if x == o {
			return true
		}
	}
	return false
}

// snake converts a camelCase name to snake_case; runs of capitals are one
// word ("hostID" → "host_id", "tlsCaCert" → "tls_ca_cert").
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && !unicode.IsUpper(r[i-1])
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
