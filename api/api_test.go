package api_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/api/internal/spec"
)

func TestSpecIsUpToDate(t *testing.T) {
	want, err := spec.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if got := api.Spec(); !bytes.Equal(got, want) {
		t.Fatalf("api/openapi.yaml (%d bytes) differs from the generator's output (%d bytes): run `go generate ./api`", len(got), len(want))
	}
}

func load(t *testing.T, doc []byte) *openapi3.T {
	t.Helper()
	l := openapi3.NewLoader()
	d, err := l.LoadFromData(doc)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return d
}

func TestSpecIsValidOpenAPI31(t *testing.T) {
	d := load(t, api.Spec())
	if !d.IsOpenAPI31OrLater() || d.OpenAPI != "3.1.0" {
		t.Fatalf("openapi: got %q, want 3.1.0", d.OpenAPI)
	}
	if err := d.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
}

// TestValidatorRejectsBrokenDocuments makes sure the validation above can
// fail: the same document with one defect must be rejected.
func TestValidatorRejectsBrokenDocuments(t *testing.T) {
	cases := []struct{ name, old, new string }{
		{"unknown type", "type: boolean", "type: bool"},
		{"dangling $ref", "$ref: '#/components/schemas/HostResource'", "$ref: '#/components/schemas/NoSuchSchema'"},
		{"path parameter not declared", "/compute/hosts/{resourceId}/onboard:", "/compute/hosts/{hostId}/onboard:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := string(api.Spec())
			if !strings.Contains(doc, c.old) {
				t.Fatalf("document has no %q to break", c.old)
			}
			broken := strings.Replace(doc, c.old, c.new, 1)
			l := openapi3.NewLoader()
			d, err := l.LoadFromData([]byte(broken))
			if err == nil {
				err = d.Validate(context.Background())
			}
			if err == nil {
				t.Fatalf("got no error for a document with %q replaced by %q, want one", c.old, c.new)
			}
		})
	}
}

// TestOperations checks properties every operation must have.
func TestOperations(t *testing.T) {
	d := load(t, api.Spec())
	ids := map[string]string{}
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s: no operationId", where)
			} else if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("%s: operationId %q also used by %s", where, op.OperationID, prev)
			}
			ids[op.OperationID] = where
			if isV2(path) && path != "/v2/healthz" { // the original's health check is public, as ours
				checkV2Operation(t, where, path, method, op)
				continue
			}
			// A create answers 201 (edge workloads, as Kubernetes').
			if op.Responses.Value("200") == nil && (method != "POST" || op.Responses.Value("201") == nil) {
				t.Errorf("%s: no 200 response", where)
			}
			public := path == "/healthz" || path == "/readyz" || path == "/openapi.yaml" || path == "/v2/healthz"
			if public {
				if op.Security == nil || len(*op.Security) != 0 {
					t.Errorf("%s: got security %v, want none", where, op.Security)
				}
				continue
			}
			want := []string{"400", "401", "403", "404", "500", "503"}
			// putProject creates what is missing.
			if path == "/v1/projects" || path == "/v1/orchestrator" || where == "PUT /v1/projects/{projectName}" {
				want = slices.DeleteFunc(want, func(s string) bool { return s == "404" })
			}
			for _, st := range want {
				if op.Responses.Value(st) == nil {
					t.Errorf("%s: no %s response", where, st)
				}
			}
			if op.RequestBody != nil && op.Responses.Value("413") == nil {
				t.Errorf("%s: takes a body but has no 413 response", where)
			}
			if method == "POST" && op.Responses.Value("409") == nil {
				t.Errorf("%s: creates but has no 409 response", where)
			}
			if method == "GET" && op.Parameters.GetByInAndName("query", "pageSize") != nil {
				p := op.Parameters.GetByInAndName("query", "pageSize").Schema.Value
				if p.Min == nil || *p.Min != 1 || p.Max == nil || *p.Max != 100 || p.Default != 20.0 {
					t.Errorf("%s: pageSize: got min %v max %v default %v, want 1, 100, 20", where, p.Min, p.Max, p.Default)
				}
				o := op.Parameters.GetByInAndName("query", "offset")
				if o == nil || o.Schema.Value.Max == nil || *o.Schema.Value.Max != 10000 {
					t.Errorf("%s: pageSize without offset 0..10000", where)
				}
			}
		}
	}
	if len(d.Security) != 1 || d.Security[0]["bearerAuth"] == nil {
		t.Errorf("security: got %v, want bearerAuth", d.Security)
	}
	bearer := d.Components.SecuritySchemes["bearerAuth"]
	if bearer == nil || bearer.Value.Scheme != "bearer" || bearer.Value.BearerFormat != "JWT" {
		t.Errorf("bearerAuth: got %+v, want an http bearer JWT scheme", bearer)
	}
}

func TestErrorSchema(t *testing.T) {
	d := load(t, api.Spec())
	e := d.Components.Schemas["Error"]
	if e == nil {
		t.Fatal("no Error schema")
	}
	if got := keys(e.Value.Properties); strings.Join(got, ",") != "code,message" {
		t.Errorf("Error properties: got %v, want code, message", got)
	}
	var codes []string
	for _, v := range e.Value.Properties["code"].Value.Enum {
		codes = append(codes, v.(string))
	}
	for _, want := range []string{"InvalidArgument", "FailedPrecondition", "NotFound", "AlreadyExists",
		"Unauthenticated", "PermissionDenied", "ResourceExhausted", "Unavailable", "Internal"} {
		if !contains(codes, want) {
			t.Errorf("Error.code enum: %q missing from %v", want, codes)
		}
	}
}

// TestHardwareIsReadOnly checks that a host's hardware children, and every
// schema nested in them, are read-only throughout: nodes report them, the
// API never writes them.
func TestHardwareIsReadOnly(t *testing.T) {
	d := load(t, api.Spec())
	host := d.Components.Schemas["HostResource"].Value
	seen := map[string]bool{}
	var walk func(where string, s *openapi3.SchemaRef)
	walk = func(where string, s *openapi3.SchemaRef) {
		if s.Ref != "" {
			if seen[s.Ref] {
				return
			}
			seen[s.Ref] = true
		}
		v := s.Value
		if v.Type.Is("object") {
			if len(v.Properties) == 0 {
				t.Errorf("%s: object without properties", where)
			}
			for _, name := range keys(v.Properties) {
				p := v.Properties[name]
				if !p.Value.ReadOnly {
					t.Errorf("%s.%s: got readOnly false, want true", where, name)
				}
				walk(where+"."+name, p)
			}
		}
		if v.Items != nil {
			walk(where+"[]", v.Items)
		}
	}
	for _, name := range []string{"hostStorages", "hostNics", "hostUsbs", "hostGpus"} {
		p := host.Properties[name]
		if p == nil {
			t.Errorf("HostResource.%s: missing", name)
			continue
		}
		if !p.Value.ReadOnly {
			t.Errorf("HostResource.%s: got readOnly false, want true", name)
		}
		walk("HostResource."+name, p)
	}
	for _, want := range []string{"HoststorageResource", "HostnicResource", "HostusbResource", "HostgpuResource",
		"IPAddressResource", "NetworkInterfaceLinkState"} {
		if !seen["#/components/schemas/"+want] {
			t.Errorf("%s: not reached from the host's hardware fields", want)
		}
	}
}

// isV2 reports whether a path is of the v2 API (the clusters and connect
// modules), whose conventions are the original cluster manager's.
func isV2(path string) bool {
	return strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/kubernetes/")
}

// checkV2Operation checks what every v2 operation must have: one success
// answer, the error answers its handlers can give, and the project named
// by the path or the header.
func checkV2Operation(t *testing.T, where, path, method string, op *openapi3.Operation) {
	t.Helper()
	var ok []string
	for st := range op.Responses.Map() {
		if strings.HasPrefix(st, "2") {
			ok = append(ok, st)
		}
	}
	if len(ok) != 1 {
		t.Errorf("%s: success answers %v, want one", where, ok)
	}
	want := []string{"401", "403", "500", "503"}
	if strings.HasPrefix(path, "/v2/") {
		want = append(want, "400")
		if strings.Count(path, "{") > strings.Count(path, "{projectName}") && !strings.Contains(path, "/connect/clusters/{cluster}/token") {
			want = append(want, "404")
		}
		if method != "GET" {
			want = append(want, "409")
		}
		switch {
		case strings.HasPrefix(path, "/v2/projects/{projectName}/"):
			if op.Parameters.GetByInAndName("path", "projectName") == nil {
				t.Errorf("%s: no projectName parameter", where)
			}
		default:
			if p := op.Parameters.GetByInAndName("header", "Activeprojectid"); p == nil || !p.Required {
				t.Errorf("%s: no required Activeprojectid header", where)
			}
		}
	}
	for _, st := range want {
		if op.Responses.Value(st) == nil {
			t.Errorf("%s: no %s response", where, st)
		}
	}
	if op.RequestBody != nil && op.Responses.Value("413") == nil {
		t.Errorf("%s: takes a body but has no 413 response", where)
	}
	if p := op.Parameters.GetByInAndName("query", "pageSize"); p != nil {
		s := p.Schema.Value
		if s.Min == nil || *s.Min != 0 || s.Max == nil || *s.Max != 100 || s.Default != 20.0 {
			t.Errorf("%s: pageSize: got min %v max %v default %v, want 0 (the default), 100, 20", where, s.Min, s.Max, s.Default)
		}
	}
}
