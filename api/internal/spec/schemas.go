package spec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// resourceDoc names a resource type's component schema and says what it
// is. A kind that holds several API types (eim.Variants) has one per
// variant.
type resourceDoc struct {
	kind    eim.Kind
	variant string // "" for a kind without variants
	name    string // component name, as the original API names it
	noun    string // for operation summaries, e.g. "host"
	desc    string
}

// resources lists the kinds this release serves, in the order their schemas
// appear in the document.
var resources = []resourceDoc{
	{eim.KindRegion, "", "RegionResource", "region", "A region: a node of the location tree. Regions nest up to 5 levels and hold sites."},
	{eim.KindSite, "", "SiteResource", "site", "A site: a place where hosts are, optionally in a region."},
	{eim.KindHost, "", "HostResource", "host", "A host: a physical edge machine. The API writes its desired state; " +
		"the managers write its current state, hardware and status fields."},
	{eim.KindInstance, "", "InstanceResource", "instance", "An instance: the operating system installed, or to be installed, on a host."},
	{eim.KindOS, "", "OperatingSystemResource", "OS profile", "An OS profile: an image and what the provisioning needs to install it."},
	{eim.KindProvider, "", "ProviderResource", "provider", "An infrastructure provider, whose config carries project-wide defaults."},
	{eim.KindSingleSchedule, "", "SingleScheduleResource", "single schedule", "A one-off maintenance window for a host, a site or a region."},
	{eim.KindRepeatedSchedule, "", "RepeatedScheduleResource", "repeated schedule", "A maintenance window that opens at every time matching its cron fields (UTC)."},
	{eim.KindLocalAccount, "", "LocalAccountResource", "local account", "A user with an SSH key, created on the OS of instances that name it."},
	{eim.KindCustomConfig, "", "CustomConfigResource", "custom config", "A cloud-init fragment applied at installation to instances that name it."},
	{eim.KindTelemetryGroup, eim.TelemetryLogsGroup.Value, "TelemetryLogsGroupResource", "telemetry logs group",
		"A named set of log sources (e.g. systemd units) a collector reads; profiles turn it on for instances, sites or regions at a log level."},
	{eim.KindTelemetryGroup, eim.TelemetryMetricsGroup.Value, "TelemetryMetricsGroupResource", "telemetry metrics group",
		"A named set of metrics (collector inputs such as cpu or mem); profiles turn it on for instances, sites or regions at an interval."},
	{eim.KindTelemetryProfile, eim.TelemetryLogsProfile.Value, "TelemetryLogsProfileResource", "telemetry logs profile",
		"Turns a logs group on, at a log level, for the nodes of an instance, a site or a region. A node's effective level for a group " +
			"is the most verbose of the profiles that reach it (its instance's, its site's and the site's regions')."},
	{eim.KindTelemetryProfile, eim.TelemetryMetricsProfile.Value, "TelemetryMetricsProfileResource", "telemetry metrics profile",
		"Turns a metrics group on, at an interval, for the nodes of an instance, a site or a region. A node's effective interval for a " +
			"group is the shortest of the profiles that reach it (its instance's, its site's and the site's regions')."},
	{eim.KindOSUpdatePolicy, "", "OSUpdatePolicy", "OS update policy",
		"How the OS of the instances that name it (osUpdatePolicyID) is updated in their maintenance windows. UPDATE_POLICY_LATEST: " +
			"to the newest version of the instance's OS profile (immutable OSes); it takes no other update field. UPDATE_POLICY_TARGET: " +
			"for a mutable OS, the updateSources, updatePackages and updateKernelCommand given; for an immutable OS, the targetOsId " +
			"given — one or the other, never both. A policy cannot be changed once created: create another and point the instances at it."},
	{eim.KindOSUpdateRun, "", "OSUpdateRun", "OS update run",
		"One OS update of one instance, recorded by the maintenance module: the policy it applied, when it started and ended " +
			"(endTime 0 while it runs) and how it went. Every field is read-only; a run goes with its instance."},
	{eim.KindWorkload, "", "WorkloadResource", "workload",
		"A named group of instances, such as a cluster (WORKLOAD_KIND_CLUSTER). Its members link it to its instances; " +
			"a workload with members cannot be deleted."},
	{eim.KindWorkloadMember, "", "WorkloadMember", "workload member",
		"Puts one instance in one workload. An instance is a member of at most one workload. A member is created and " +
			"deleted, never changed, and goes with its instance."},
}

// docOf returns the resourceDoc of a kind without variants.
func docOf(k eim.Kind) resourceDoc { return docFor(k, "") }

// docFor returns the resourceDoc of a kind's variant ("" for a kind
// without).
func docFor(k eim.Kind, variant string) resourceDoc {
	for _, r := range resources {
		if r.kind == k && r.variant == variant {
			return r
		}
	}
	panic(fmt.Sprintf("spec: kind %q variant %q has no resourceDoc", k, variant))
}

func ref(name string) *obj { return o("$ref", "#/components/schemas/"+name) }

// idPattern is the pattern of a well-formed ID of kind k.
func idPattern(k eim.Kind) string { return "^" + string(k) + "-[0-9a-f]{8}$" }

// idMaxLength is the length of an ID of kind k: prefix, dash, 8 hex digits.
func idMaxLength(k eim.Kind) int { return len(k) + 9 }

// schemaBuilder collects the enum and value types the resource schemas
// use, so that each gets one component.
type schemaBuilder struct {
	enums  map[string]reflect.Type
	values map[reflect.Type]bool
}

func newSchemaBuilder() *schemaBuilder {
	return &schemaBuilder{enums: map[string]reflect.Type{}, values: map[reflect.Type]bool{}}
}

// resourceSchema derives a kind's component schema from its eim.Schema:
// property names and types from the Go struct, readOnly from Field.Writable,
// ID patterns from the kind, enums from the Enum types; rules add limits
// and descriptions.
func (b *schemaBuilder) resourceSchema(rd resourceDoc) *obj {
	s := eim.SchemaOf(rd.kind)
	kr := rules[rd.kind]
	props := o()
	var required []string
	for _, f := range s.Fields {
		if f.Name == "" || !f.In(rd.variant) {
			continue // not on the wire (the project column), or another variant's
		}
		if f.Name == "createdAt" || f.Name == "updatedAt" {
			// The Meta.Timestamps struct is flattened into columns but is
			// one nested object on the wire.
			if _, ok := props.get("timestamps"); !ok {
				props.set("timestamps", o("$ref", "#/components/schemas/Timestamps", "readOnly", true,
					"description", "When the resource was created and last changed."))
			}
			continue
		}
		r := kr[f.Name]
		p := b.property(rd, s.Type, f, r)
		props.set(f.Name, p)
		if r.required {
			required = append(required, f.Name)
		}
	}
	out := o("type", "object", "description", rd.desc, "properties", props)
	if len(required) > 0 {
		out.set("required", required)
	}
	return out
}

func (b *schemaBuilder) property(rd resourceDoc, st reflect.Type, f *eim.Field, r rule) *obj {
	k := rd.kind
	sf := st.FieldByIndex(f.Index)
	jsonOpts := strings.Split(sf.Tag.Get("json"), ",")[1:]
	p := o()
	switch {
	case f.Name == "resourceId" || f.Alias:
		p.set("type", "string")
		desc := "Unique ID of the " + rd.noun + ", assigned by the system."
		if f.Alias {
			desc = "The same as resourceId."
		}
		r.desc = desc
		p.set("maxLength", idMaxLength(k))
		p.set("pattern", idPattern(k))
	case f.Edge != nil:
		p.set("type", "string")
		p.set("maxLength", idMaxLength(f.Edge.Kind))
		pat := idPattern(f.Edge.Kind)
		if !strictEdges[k][f.Name] {
			pat = "^$|" + pat
		}
		p.set("pattern", pat)
	case isResource(f.Type):
		// A nested resource of a kind with variants is of the field's
		// variant (a logs profile's group is a logs group).
		nested := reflect.New(f.Type.Elem()).Interface().(eim.Resource)
		p.set("$ref", "#/components/schemas/"+docFor(nested.ResourceKind(), f.Variant).name)
	default:
		b.typeOf(p, f.Type, slices.Contains(jsonOpts, "string"))
	}
	if !f.Writable {
		p.set("readOnly", true)
	}
	if r.desc == "" {
		r.desc = genericDesc(f)
	}
	if f.Writable && f.Type == reflect.TypeFor[eim.Metadata]() && r.maxItems == 0 {
		r.maxItems = 100
	}
	if !f.IsEnum() && f.Type.Kind() == reflect.String && strings.HasSuffix(f.Name, "Status") && r.maxLength == 0 {
		r.maxLength = statusLimit
	}
	applyRule(p, r)
	return p
}

// isResource reports whether t is a pointer to a resource type.
func isResource(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Implements(reflect.TypeFor[eim.Resource]())
}

// typeOf fills p with the JSON Schema type of a Go type.
func (b *schemaBuilder) typeOf(p *obj, t reflect.Type, asString bool) {
	if t.Implements(reflect.TypeFor[eim.Enum]()) {
		b.enums[t.Name()] = t
		p.set("$ref", "#/components/schemas/"+t.Name())
		return
	}
	if t == reflect.TypeFor[eim.Metadata]() {
		p.set("type", "array")
		p.set("items", ref("MetadataItem"))
		return
	}
	if t == reflect.TypeFor[eim.Timestamps]() {
		// Written by hand (sharedSchemas): eim.Time marshals itself.
		p.set("$ref", "#/components/schemas/Timestamps")
		return
	}
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		if r, ok := reflect.New(t.Elem()).Interface().(eim.Resource); ok {
			p.set("$ref", "#/components/schemas/"+docOf(r.ResourceKind()).name)
			return
		}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		p.set("type", "string")
	case reflect.Bool:
		p.set("type", "boolean")
	case reflect.Int32:
		p.set("type", "integer")
		p.set("format", "int32")
	case reflect.Int, reflect.Int64:
		p.set("type", "integer")
		p.set("format", "int64")
	case reflect.Uint32:
		p.set("type", "integer")
		p.set("minimum", 0)
		p.set("maximum", int64(1<<32-1))
	case reflect.Uint64:
		if asString {
			p.set("type", "string")
			p.set("pattern", "^[0-9]+$")
			return
		}
		p.set("type", "integer")
		p.set("minimum", 0)
	case reflect.Slice:
		items := o()
		b.typeOf(items, t.Elem(), false)
		p.set("type", "array")
		p.set("items", items)
	case reflect.Struct:
		b.valueRef(p, t)
	default:
		panic(fmt.Sprintf("spec: no JSON Schema type for %v", t))
	}
}

// applyRule adds a rule's limits and description to a property.
func applyRule(p *obj, r rule) {
	if r.desc != "" {
		p.set("description", r.desc)
	}
	if r.minLength > 0 {
		p.set("minLength", r.minLength)
	}
	if r.maxLength > 0 {
		p.set("maxLength", r.maxLength)
	}
	if r.pattern != "" {
		p.set("pattern", r.pattern)
	}
	if r.format != "" {
		p.set("format", r.format)
	}
	if r.min != nil {
		p.set("minimum", *r.min)
	}
	if r.max != nil {
		p.set("maximum", *r.max)
	}
	if r.maxItems > 0 {
		p.set("maxItems", r.maxItems)
	}
	if r.items != nil {
		items, _ := p.get("items")
		applyRule(items.(*obj), *r.items)
	}
}

// genericDesc describes a field from its name when no rule does.
func genericDesc(f *eim.Field) string {
	n := f.Name
	switch {
	case f.IsEnum() && strings.HasSuffix(n, "Status"):
		return "Availability, as reported by the node."
	case f.Edge != nil:
		return "ID of the " + f.Edge.Name + "."
	case n == "inheritedMetadata":
		return "Labels inherited from the resource's ancestors (region, site), closest first overriding."
	case n == "metadata":
		return "User labels: key/value pairs with unique keys."
	case strings.HasSuffix(n, "StatusIndicator"):
		return "Severity of " + strings.TrimSuffix(n, "Indicator") + "."
	case strings.HasSuffix(n, "StatusTimestamp"):
		return "Unix time (seconds) " + strings.TrimSuffix(n, "Timestamp") + " last changed."
	case strings.HasSuffix(n, "Status"):
		return "Status text for people, set by the managers."
	case strings.HasPrefix(n, "desired"):
		return "The state the user wants; the managers drive the machine toward it."
	case strings.HasPrefix(n, "current"):
		return "The state the managers last observed."
	case strings.HasPrefix(n, "cpu"), strings.HasPrefix(n, "bios"), strings.HasPrefix(n, "bmc"),
		n == "hostname", n == "productName":
		return "Hardware fact reported by the node."
	case f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Pointer:
		return "The referenced resource, expanded on read."
	}
	return ""
}

// enumDescs says what each enum is for.
var enumDescs = map[string]string{
	"HostState":               "Lifecycle state of a host.",
	"InstanceState":           "Lifecycle state of an instance.",
	"InstanceKind":            "What an instance runs on.",
	"PowerState":              "Power state of a host.",
	"PowerCommandPolicy":      "How power commands are applied: at once, or in order after the previous one completes.",
	"StatusIndication":        "Severity that goes with a status text.",
	"BaremetalControllerKind": "Kind of baseboard management controller.",
	"AmtSku":                  "Intel AMT edition of the host.",
	"AmtState":                "Intel AMT provisioning state.",
	"AmtControlMode":          "Intel AMT control mode: admin or client.",
	"KvmState":                "State of a remote KVM session; the *_RECEIVED values are only desired states.",
	"KvmStatus":               "Whether remote KVM is available.",
	"SolState":                "State of a serial-over-LAN session; the *_RECEIVED values are only desired states.",
	"SolStatus":               "Whether serial-over-LAN is available.",
	"SecurityFeature":         "Security features of an OS or required of an installation.",
	"OsType":                  "Whether an OS is updated by packages (mutable) or by image (immutable).",
	"OsProviderKind":          "Who supplies an OS profile.",
	"ProviderKind":            "Kind of infrastructure provider.",
	"ProviderVendor":          "Vendor of a provider's management system.",
	"ScheduleStatus":          "What a maintenance window is for.",
	"TelemetryCollectorKind":  "Which collector gathers a telemetry group: the node's own (host) or its Kubernetes cluster's.",
	"SeverityLevel":           "A log level; DEBUG is the most verbose, CRITICAL the least.",
	"UpdatePolicy":            "What an OS update policy installs: the newest version of the instance's OS (LATEST) or what the policy names (TARGET).",
	"LinkState":               "Whether a network interface's link is up.",
	"IPAddressStatus":         "State of an address on a host's network interface.",
	"IPAddressConfigMethod":   "How an address was set on an interface: statically or dynamically (DHCP).",
	"WorkloadKind":            "What a workload is.",
	"WorkloadMemberKind":      "What role an instance plays in its workload.",
	"SecureBootState": "Our extension: a host's firmware Secure Boot state as its node read it: legacy BIOS (NOT_UEFI), " +
		"UEFI with Secure Boot off (DISABLED), in setup mode without a platform key (SETUP_MODE: nothing enforced), or enforced (ENABLED).",
}

func (b *schemaBuilder) enumSchemas(into *obj) {
	names := make([]string, 0, len(b.enums))
	for n := range b.enums {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e := reflect.New(b.enums[n]).Elem().Interface().(eim.Enum)
		desc := enumDescs[n]
		if desc == "" {
			panic("spec: enum " + n + " has no description")
		}
		into.set(n, o("type", "string", "description", desc+" On input, an omitted or empty value means the *_UNSPECIFIED value.", "enum", e.Values()))
	}
}
