package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim/api"
)

// The original API's document sits beside the repository in CI
// (../shared/reference from the repository root).
var referencePath = filepath.Join("..", "..", "shared", "reference", "eim-openapi.yaml")

// notServed are reference properties this release does not model (a
// site's provider). httpapi accepts them in bodies and ignores them.
var notServed = map[string][]string{
	"SiteResource": {"provider"},
}

// extra are properties we serve that the reference does not declare.
var extra = map[string][]string{
	"HostResource": {"providerId", "secureBootState", "secureBootStateTimestamp"}, // the node's Secure Boot state (docs/security.md)
	"SiteResource": {"powerPolicy"},                                               // the oob module's power policy (docs/compatibility.md)
}

// ourPaths are the paths of ours outside the reference.
var ourPaths = []string{"/healthz", "/openapi.yaml", "/readyz", "/v1/orchestrator", "/v1/projects", "/v1/projects/{projectName}"}

// ourOperations are operations of ours under /v1/projects/{projectName}/
// (or the legacy prefix) that the reference does not have.
var ourOperations = []string{
	"GET /v1/projects/{projectName}/edgeworkloads",
	"POST /v1/projects/{projectName}/edgeworkloads",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}",
	"PUT /v1/projects/{projectName}/edgeworkloads/{name}",
	"DELETE /v1/projects/{projectName}/edgeworkloads/{name}",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/revisions",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/status",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/devices",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/rollout",
	"POST /v1/projects/{projectName}/edgeworkloads/{name}/rollout/pause",
	"POST /v1/projects/{projectName}/edgeworkloads/{name}/rollout/resume",
	"POST /v1/projects/{projectName}/edgeworkloads/{name}/rollout/abort",
	"POST /v1/projects/{projectName}/edgeworkloads/{name}/rollout/rollback",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/logs",
	"GET /v1/projects/{projectName}/edgeworkloads/{name}/logs/{id}",
	"GET /v1/projects/{projectName}/compute/hosts/{hostId}/bmc/jobs",
	"POST /v1/projects/{projectName}/compute/hosts/{hostId}/bmc/jobs",
	"GET /v1/projects/{projectName}/compute/hosts/{hostId}/bmc/jobs/{jobId}",
	"DELETE /v1/projects/{projectName}/compute/hosts/{hostId}/bmc/jobs/{jobId}",
	"POST /v1/projects/{projectName}/compute/hosts/{hostId}/bmc/jobs/{jobId}/cancel",
	"GET /v1/projects/{projectName}/compute/instances/updates_summary",
	"GET /v1/projects/{projectName}/compute/instances/{resourceId}/provisioning_log",
	"POST /v1/projects/{projectName}/compute/instances/{resourceId}/reprovision",
	"GET /v1/projects/{projectName}/compute/instances/{resourceId}/recoverykey",
	"GET /v1/projects/{projectName}/compute/hosts/{resourceId}/attestationkey",
	"DELETE /v1/projects/{projectName}/compute/hosts/{resourceId}/attestationkey",
	"PATCH /v1/projects/{projectName}/settings",
	"GET /v1/projects/{projectName}/audit",
	"GET /v1/projects/{projectName}/webhooks",
	"POST /v1/projects/{projectName}/webhooks",
	"GET /v1/projects/{projectName}/webhooks/{webhookId}",
	"PATCH /v1/projects/{projectName}/webhooks/{webhookId}",
	"DELETE /v1/projects/{projectName}/webhooks/{webhookId}",
	"GET /v1/projects/{projectName}/webhooks/{webhookId}/deliveries",
	// The original's metadata broker (another component there), which
	// its web UI calls beside the API.
	"GET /v1/projects/{projectName}/metadata",
	"POST /v1/projects/{projectName}/metadata",
	"DELETE /v1/projects/{projectName}/metadata",
	// A host's BMC (the oob module).
	"GET /v1/projects/{projectName}/compute/hosts/{hostId}/bmc",
	"PUT /v1/projects/{projectName}/compute/hosts/{hostId}/bmc",
	"DELETE /v1/projects/{projectName}/compute/hosts/{hostId}/bmc",
	// A project's object storage and the embedded store's files (the
	// objectstorage module).
	"GET /v1/projects/{projectName}/objectstorage",
	"PUT /v1/projects/{projectName}/objectstorage",
	"DELETE /v1/projects/{projectName}/objectstorage",
	"GET /v1/projects/{projectName}/edgedata/{hostId}",
	"GET /v1/projects/{projectName}/edgedata/{hostId}/{path}",
	"PUT /v1/projects/{projectName}/edgedata/{hostId}/{path}",
	"DELETE /v1/projects/{projectName}/edgedata/{hostId}/{path}",
	// The enrollment lobby (the onboarding module).
	"GET /v1/projects/{projectName}/enrollmentrequests",
	"GET /v1/projects/{projectName}/enrollmentrequests/{id}",
	"DELETE /v1/projects/{projectName}/enrollmentrequests/{id}",
	"POST /v1/projects/{projectName}/enrollmentrequests/{id}/approve",
	"POST /v1/projects/{projectName}/enrollmentrequests/{id}/deny",
	"GET /v1/projects/{projectName}/enrollmentrules",
	"POST /v1/projects/{projectName}/enrollmentrules",
	"GET /v1/projects/{projectName}/enrollmentrules/{id}",
	"DELETE /v1/projects/{projectName}/enrollmentrules/{id}",
}

// ourV2Operations are the v2 API's operations (the clusters and connect
// modules, the original cluster manager's API, which the reference does
// not describe) and the connect gateway's pass-through. The clusters
// module's test checks them against the routes the modules serve.
var ourV2Operations = []string{
	"DELETE /kubernetes/{target}/{kubernetesPath}",
	"DELETE /v2/clusters/{name}",
	"DELETE /v2/clusters/{name}/nodes/{nodeId}",
	"DELETE /v2/projects/{projectName}/clusters/{name}",
	"DELETE /v2/projects/{projectName}/clusters/{name}/nodes/{nodeId}",
	"DELETE /v2/projects/{projectName}/connect/clusters/{cluster}/token",
	"DELETE /v2/projects/{projectName}/templates/{name}/{version}",
	"DELETE /v2/templates/{name}/{version}",
	"GET /kubernetes/{target}/{kubernetesPath}",
	"GET /v2/clusters",
	"GET /v2/clusters/summary",
	"GET /v2/clusters/{cluster}/kubeconfigs",
	"GET /v2/clusters/{name}",
	"GET /v2/clusters/{nodeId}/clusterdetail",
	"GET /v2/healthz",
	"GET /v2/projects/{projectName}/clusters",
	"GET /v2/projects/{projectName}/clusters/summary",
	"GET /v2/projects/{projectName}/clusters/{cluster}/kubeconfigs",
	"GET /v2/projects/{projectName}/clusters/{name}",
	"GET /v2/projects/{projectName}/clusters/{nodeId}/clusterdetail",
	"GET /v2/projects/{projectName}/connect/clusters",
	"GET /v2/projects/{projectName}/connect/clusters/{cluster}",
	"GET /v2/projects/{projectName}/templates",
	"GET /v2/projects/{projectName}/templates/{name}/versions",
	"GET /v2/projects/{projectName}/templates/{name}/{version}",
	"GET /v2/templates",
	"GET /v2/templates/{name}/versions",
	"GET /v2/templates/{name}/{version}",
	"PATCH /kubernetes/{target}/{kubernetesPath}",
	"POST /kubernetes/{target}/{kubernetesPath}",
	"POST /v2/clusters",
	"POST /v2/projects/{projectName}/clusters",
	"POST /v2/projects/{projectName}/connect/clusters/{cluster}/token",
	"POST /v2/projects/{projectName}/templates",
	"POST /v2/templates",
	"PUT /kubernetes/{target}/{kubernetesPath}",
	"PUT /v2/clusters/{name}/labels",
	"PUT /v2/clusters/{name}/nodes",
	"PUT /v2/clusters/{name}/template",
	"PUT /v2/projects/{projectName}/clusters/{name}/labels",
	"PUT /v2/projects/{projectName}/clusters/{name}/nodes",
	"PUT /v2/projects/{projectName}/clusters/{name}/template",
	"PUT /v2/projects/{projectName}/templates/{name}/default",
	"PUT /v2/templates/{name}/default",
}

type document struct {
	Paths      map[string]map[string]operation `yaml:"paths"`
	Components struct {
		Schemas    map[string]*schema    `yaml:"schemas"`
		Parameters map[string]*parameter `yaml:"parameters"`
	} `yaml:"components"`
}

type operation struct {
	Parameters []*parameter `yaml:"parameters"`
}

type parameter struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type schema struct {
	Ref        string             `yaml:"$ref"`
	Type       schemaType         `yaml:"type"`
	Enum       []string           `yaml:"enum"`
	Pattern    string             `yaml:"pattern"`
	MaxLength  *int               `yaml:"maxLength"`
	Items      *schema            `yaml:"items"`
	Properties map[string]*schema `yaml:"properties"`
}

// schemaType is a schema's type: one name, or (OpenAPI 3.1) a list of them
// such as [integer, "null"], kept joined by "|".
type schemaType string

func (st *schemaType) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*st = schemaType(strings.Join(names, "|"))
		return nil
	}
	var name string
	if err := n.Decode(&name); err != nil {
		return err
	}
	*st = schemaType(name)
	return nil
}

func parse(t *testing.T, b []byte) *document {
	t.Helper()
	var d document
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return &d
}

func reference(t *testing.T) *document {
	t.Helper()
	b, err := os.ReadFile(referencePath)
	if os.IsNotExist(err) {
		t.Skipf("the original API's document is not at %s (it sits beside the repository in CI); skipping the comparison", referencePath)
	}
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, b)
}

var methods = []string{"get", "put", "post", "delete", "patch"}

// inProjects reports whether a path is a project's: under
// /v1/projects/{projectName}/ or the legacy prefix.
func inProjects(p string) bool {
	return strings.HasPrefix(p, api.ProjectPrefix+"/") || strings.HasPrefix(p, api.LegacyPrefix+"/")
}

// operations lists "METHOD path" of the document's project operations.
func operations(d *document) []string {
	var out []string
	for p, item := range d.Paths {
		if !inProjects(p) {
			continue
		}
		for _, m := range methods {
			if _, ok := item[m]; ok {
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// enumExtensions are the values EIM adds to the original's enums
// (docs/compatibility.md).
var enumExtensions = map[string][]string{
	"BaremetalControllerKind": {"BAREMETAL_CONTROLLER_KIND_REDFISH"},
}

func TestOperationsMatchReference(t *testing.T) {
	ref, ours := reference(t), parse(t, api.Spec())
	want, got := operations(ref), operations(ours)
	if len(want) != 245 {
		t.Errorf("the reference has %d project operations, want 245", len(want))
	}
	for _, op := range want {
		if !slices.Contains(got, op) {
			t.Errorf("missing operation %s (the original serves it)", op)
		}
	}
	for _, op := range got {
		if !slices.Contains(want, op) && !slices.Contains(ourOperations, op) {
			t.Errorf("operation %s is not in the original API", op)
		}
	}
	for _, op := range ourOperations {
		if slices.Contains(want, op) {
			t.Errorf("operation %s is listed as ours but the original API has it", op)
		}
		if !slices.Contains(got, op) {
			t.Errorf("operation %s is listed as ours but not documented", op)
		}
	}
	var others []string
	for p := range ours.Paths {
		if !inProjects(p) && !isV2(p) {
			others = append(others, p)
		}
	}
	for p := range ref.Paths {
		if isV2(p) {
			t.Errorf("the reference has %s: compare it with ours (ourV2Operations)", p)
		}
	}
	sort.Strings(others)
	if !slices.Equal(others, ourPaths) {
		t.Errorf("paths outside the projects: got %v, want %v", others, ourPaths)
	}
	t.Logf("all %d of the reference's project operations served, and %d of ours", len(want), len(ourOperations))
}

// paramNames lists "in:name" of an operation's parameters, resolving refs.
func paramNames(d *document, op operation) []string {
	var out []string
	for _, p := range op.Parameters {
		if p.Ref != "" {
			p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		out = append(out, p.In+":"+p.Name)
	}
	sort.Strings(out)
	return out
}

func TestParametersMatchReference(t *testing.T) {
	ref, ours := reference(t), parse(t, api.Spec())
	for _, op := range operations(ref) {
		method, path, _ := strings.Cut(op, " ")
		m := strings.ToLower(method)
		o, ok := ours.Paths[path][m]
		if !ok {
			continue // reported by TestOperationsMatchReference
		}
		want, got := paramNames(ref, ref.Paths[path][m]), paramNames(ours, o)
		if strings.HasPrefix(path, api.LegacyPrefix+"/") {
			// The reference leaves out the header its gateway read.
			got = slices.DeleteFunc(got, func(p string) bool { return p == "header:"+api.LegacyProjectHeader })
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: parameters: got %v, want %v", op, got, want)
		}
	}
}

// compared are the reference's schemas we must match: the resources, the
// value types and envelopes of the in-scope operations.
var compared = []string{
	"RegionResource", "SiteResource", "HostResource", "InstanceResource", "OperatingSystemResource",
	"ProviderResource", "SingleScheduleResource", "RepeatedScheduleResource", "LocalAccountResource",
	"CustomConfigResource", "MetadataItem", "Timestamps", "HostRegister", "GetHostSummaryResponse",
	"ListRegionsResponse", "ListSitesResponse", "ListHostsResponse", "ListInstancesResponse",
	"ListOperatingSystemsResponse", "ListProvidersResponse", "ListSingleSchedulesResponse",
	"ListRepeatedSchedulesResponse", "ListLocalAccountsResponse", "ListCustomConfigsResponse",
	"ListSchedulesResponse", "ListLocationsResponse", "ListLocationsResponse.LocationNode",
	"HoststorageResource", "HostnicResource", "HostusbResource", "HostgpuResource",
	"NetworkInterfaceLinkState", "IPAddressResource",
	"TelemetryLogsGroupResource", "TelemetryMetricsGroupResource", "TelemetryLogsProfileResource",
	"TelemetryMetricsProfileResource", "ListTelemetryLogsGroupsResponse", "ListTelemetryMetricsGroupsResponse",
	"ListTelemetryLogsProfilesResponse", "ListTelemetryMetricsProfilesResponse",
	"OSUpdatePolicy", "OSUpdateRun", "ListOSUpdatePolicyResponse", "ListOSUpdateRunResponse",
	"WorkloadResource", "WorkloadMember", "ListWorkloadsResponse", "ListWorkloadMembersResponse",
}

func TestSchemasMatchReference(t *testing.T) {
	ref, ours := reference(t), parse(t, api.Spec())
	enums := map[string]bool{}
	for _, name := range compared {
		rs, os := ref.Components.Schemas[name], ours.Components.Schemas[name]
		if rs == nil {
			t.Errorf("%s: not in the reference", name)
			continue
		}
		if os == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		var want []string
		for p := range rs.Properties {
			if !slices.Contains(notServed[name], p) {
				want = append(want, p)
			}
		}
		want = append(want, extra[name]...)
		sort.Strings(want)
		if got := keys(os.Properties); !slices.Equal(got, want) {
			t.Errorf("%s: properties: got %v, want %v", name, got, want)
		}
		for p, rp := range rs.Properties {
			op := os.Properties[p]
			if op == nil {
				continue
			}
			where := name + "." + p
			compareProperty(t, where, ref, ours, rp, op)
			if target := enumRef(ref, rp); target != "" {
				enums[target] = true
			}
		}
	}
	for name := range enums {
		rs, os := ref.Components.Schemas[name], ours.Components.Schemas[name]
		if os == nil {
			t.Errorf("enum %s: missing", name)
			continue
		}
		got := slices.DeleteFunc(slices.Clone(os.Enum), func(v string) bool { return slices.Contains(enumExtensions[name], v) })
		if !slices.Equal(got, rs.Enum) {
			t.Errorf("enum %s: got %v (without our extensions), want %v", name, got, rs.Enum)
		}
	}
	if len(enums) < 15 {
		t.Errorf("compared %d enums, want every enum of the resources (at least 15)", len(enums))
	}
}

// compareProperty checks what a client depends on: the JSON type, the
// referenced schema, the item type and, for IDs, the pattern and length.
// A reference to a scalar schema (the original's google.protobuf.Timestamp)
// counts as that scalar.
func compareProperty(t *testing.T, where string, ref, ours *document, rp, op *schema) {
	t.Helper()
	rp, op = scalar(ref, rp), scalar(ours, op)
	if rp.Type != op.Type || rp.Ref != op.Ref {
		t.Errorf("%s: got type %q ref %q, want type %q ref %q", where, op.Type, op.Ref, rp.Type, rp.Ref)
		return
	}
	if !slices.Equal(rp.Enum, op.Enum) {
		t.Errorf("%s: enum: got %v, want %v", where, op.Enum, rp.Enum)
	}
	if rp.Type == "array" {
		if rp.Items == nil || op.Items == nil {
			t.Errorf("%s: items: got %v, want %v", where, op.Items, rp.Items)
			return
		}
		compareProperty(t, where+"[]", ref, ours, rp.Items, op.Items)
		return
	}
	if isID(where) && optional(rp.Pattern) != optional(op.Pattern) {
		t.Errorf("%s: pattern: got %q, want %q", where, op.Pattern, rp.Pattern)
	}
	if rp.MaxLength != nil && (op.MaxLength == nil || *op.MaxLength != *rp.MaxLength) {
		t.Errorf("%s: maxLength: got %v, want %d", where, op.MaxLength, *rp.MaxLength)
	}
}

func scalar(d *document, s *schema) *schema {
	name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
	if t := d.Components.Schemas[name]; s.Ref != "" && t != nil && t.Type != "object" && len(t.Enum) == 0 {
		return t
	}
	return s
}

var idField = regexp.MustCompile(`\.(resourceId|[a-zA-Z]+I[Dd])(\[\])?$`)

func isID(where string) bool { return idField.MatchString(where) }

// optional strips the "^$|" that admits an empty string: we admit it on
// optional references, which we echo as "" when unset (the original left
// them out of responses).
func optional(pattern string) string { return strings.TrimPrefix(pattern, "^$|") }

// enumRef returns the name of the enum schema a property refers to, if any.
func enumRef(d *document, p *schema) string {
	name := strings.TrimPrefix(p.Ref, "#/components/schemas/")
	if s := d.Components.Schemas[name]; p.Ref != "" && s != nil && len(s.Enum) > 0 {
		return name
	}
	return ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(s []string, v string) bool { return slices.Contains(s, v) }

func TestV2Operations(t *testing.T) {
	d := parse(t, api.Spec())
	var got []string
	for p, item := range d.Paths {
		if !isV2(p) {
			continue
		}
		for _, m := range methods {
			if _, ok := item[m]; ok {
				got = append(got, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(got)
	want := slices.Sorted(slices.Values(ourV2Operations))
	for _, op := range got {
		if !slices.Contains(want, op) {
			t.Errorf("operation %s is documented but not in ourV2Operations", op)
		}
	}
	for _, op := range want {
		if !slices.Contains(got, op) {
			t.Errorf("operation %s is in ourV2Operations but not documented", op)
		}
	}
}
