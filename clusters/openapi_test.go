package clusters_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/eimhq/eim/api"
)

// The v2 API as served, against EIM's OpenAPI document (api/openapi.yaml):
// every request of a realistic sequence, in both path forms, and every
// answer, error answers included, is validated with kin-openapi; the
// document's v2 operations are exactly the routes the clusters and
// connect modules mount.

// spec is the OpenAPI document, its router and what a test exercised.
type spec struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	seen   map[string]bool // "METHOD /path template"
}

// loadSpec loads the document for validating against the server at url.
// The answers' object schemas are closed (additionalProperties false),
// so that a member the server writes under a name the document does not
// know fails, as one the document requires and the server leaves out does.
func loadSpec(t *testing.T, url string) *spec {
	t.Helper()
	return loadSpecWith(t, url, nil)
}

// loadSpecWith is loadSpec with the document changed by mutate.
func loadSpecWith(t *testing.T, url string, mutate func(*openapi3.T)) *spec {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec())
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("validate the document: %v", err)
	}
	if mutate != nil {
		mutate(doc)
	}
	doc.Servers = openapi3.Servers{{URL: url}}
	closed := map[*openapi3.Schema]bool{}
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v2/") {
			continue
		}
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					closeObjects(mt.Schema, closed)
				}
			}
		}
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &spec{t: t, doc: doc, router: router, seen: map[string]bool{}}
}

func closeObjects(s *openapi3.SchemaRef, done map[*openapi3.Schema]bool) {
	if s == nil || s.Value == nil || done[s.Value] {
		return
	}
	v := s.Value
	done[v] = true
	if len(v.Properties) > 0 && v.AdditionalProperties.Has == nil && v.AdditionalProperties.Schema == nil {
		no := false
		v.AdditionalProperties.Has = &no
	}
	for _, p := range v.Properties {
		closeObjects(p, done)
	}
	closeObjects(v.Items, done)
	closeObjects(v.AdditionalProperties.Schema, done)
	for _, l := range [][]*openapi3.SchemaRef{v.AllOf, v.AnyOf, v.OneOf} {
		for _, x := range l {
			closeObjects(x, done)
		}
	}
}

// form is how a request names the project.
type form int

const (
	inPath   form = iota // /v2/projects/{projectName}/…
	inHeader             // /v2/… with Activeprojectid
)

func (f form) String() string { return map[form]string{inPath: "path", inHeader: "header"}[f] }

// v2 makes a request to the v2 API of e's project in form f, checks that
// the document admits the request (unless invalid says it is one the
// document refuses on purpose) and the answer, and that the answer's
// status is want. It decodes the answer into out.
func (s *spec) v2(e *env, f form, token, method, path string, body any, want int, out any) {
	s.t.Helper()
	url := e.api.URL + "/v2/projects/" + e.proj.Name + path
	if f == inHeader {
		url = e.api.URL + "/v2" + path
	}
	s.do(e, f, token, method, url, body, want, out, false)
}

// invalid is v2 with a request the document does not admit: only the
// answer is checked.
func (s *spec) invalid(e *env, f form, token, method, path string, body any, want int) {
	s.t.Helper()
	url := e.api.URL + "/v2/projects/" + e.proj.Name + path
	if f == inHeader {
		url = e.api.URL + "/v2" + path
	}
	s.do(e, f, token, method, url, body, want, nil, true)
}

func (s *spec) do(e *env, f form, token, method, url string, body any, want int, out any, invalid bool) {
	s.t.Helper()
	x := s.exchange(e, f, token, method, url, body)
	where := method + " " + strings.TrimPrefix(url, e.api.URL) + " (" + f.String() + ")"
	switch {
	case x.reqErr != nil && !invalid:
		s.t.Errorf("%s: the document refuses the request: %v", where, x.reqErr)
	case x.reqErr == nil && invalid:
		s.t.Errorf("%s: the document admits a request the test sends as invalid", where)
	}
	if x.status != want {
		s.t.Fatalf("%s: got status %d, want %d: %s", where, x.status, want, x.body)
	}
	if x.resErr != nil {
		s.t.Errorf("%s: the answer (%d) does not match the document: %v\nbody: %s", where, x.status, x.resErr, x.body)
	}
	if out != nil {
		if err := json.Unmarshal(x.body, out); err != nil {
			s.t.Fatalf("%s: %v: %s", where, err, x.body)
		}
	}
}

// exchange is one request and its answer, and what the document says of
// them.
type exchange struct {
	status         int
	body           []byte
	reqErr, resErr error // the request's and the answer's mismatches
}

func (s *spec) exchange(e *env, f form, token, method, url string, body any) exchange {
	s.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			s.t.Fatal(err)
		}
	}
	req := func() *http.Request {
		r, err := http.NewRequestWithContext(e.ctx, method, url, bytes.NewReader(raw))
		if err != nil {
			s.t.Fatal(err)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		if f == inHeader {
			r.Header.Set("Activeprojectid", e.proj.ID)
		}
		return r
	}
	check := req()
	route, params, err := s.router.FindRoute(check)
	if err != nil {
		s.t.Fatalf("%s %s: not in the document: %v", method, url, err)
	}
	s.seen[method+" "+route.Path] = true
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	var x exchange
	x.reqErr = openapi3filter.ValidateRequest(e.ctx, in)
	res, err := http.DefaultClient.Do(req())
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	if x.body, err = io.ReadAll(res.Body); err != nil {
		s.t.Fatal(err)
	}
	x.status = res.StatusCode
	in.Request = req() // the answer is checked against the request as sent
	x.resErr = openapi3filter.ValidateResponse(e.ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(x.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	return x
}

// v2Operations are the document's v2 operations, "METHOD /path".
func (s *spec) v2Operations() []string {
	var out []string
	for path, item := range s.doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v2/") && !strings.HasPrefix(path, "/kubernetes/") {
			continue
		}
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPI(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"))
	s := loadSpec(t, e.api.URL)
	for _, f := range []form{inPath, inHeader} {
		t.Run(f.String(), func(t *testing.T) {
			s.t = t
			sequence(t, s, e, f)
		})
	}
	s.t = t
	// The sequence went through every operation of the document (but
	// the pass-through's, which needs a tunnel: one GET below).
	var missed []string
	for _, op := range s.v2Operations() {
		if !s.seen[op] && !strings.Contains(op, "/kubernetes/") {
			missed = append(missed, op)
		}
	}
	if len(missed) > 0 {
		t.Errorf("operations the sequence did not exercise: %v", missed)
	}
}

// TestOpenAPIRoutes checks that the document's v2 operations are the
// routes the modules mount, neither more nor fewer.
func TestOpenAPIRoutes(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"))
	s := loadSpec(t, e.api.URL)
	documented := s.v2Operations()
	var served []string
	for _, p := range e.routes {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			// A pattern without a method serves every method below it:
			// the pass-through.
			var under []string
			for _, op := range documented {
				if _, dp, _ := strings.Cut(op, " "); strings.HasPrefix(dp, p) {
					under = append(under, op)
				}
			}
			if len(under) == 0 {
				t.Errorf("route %s: no operation of the document below it", p)
			}
			served = append(served, under...)
			continue
		}
		served = append(served, method+" "+path)
	}
	sort.Strings(served)
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("route %s is served but not documented", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("operation %s is documented but not served", op)
		}
	}
	if len(documented) < 40 {
		t.Errorf("%d v2 operations documented, want the clusters' and connect's (43)", len(documented))
	}
}

func sequence(t *testing.T, s *spec, e *env, f form) {
	admin := e.admin
	// Names differ by form: both run on one project.
	sfx := map[form]string{inPath: "p", inHeader: "h"}[f]
	name := "lab-" + sfx
	cl := "line-" + sfx

	var tl struct {
		TemplateInfoList []json.RawMessage `json:"templateInfoList"`
		TotalElements    int               `json:"totalElements"`
	}
	s.v2(e, f, admin, "GET", "/templates", nil, 200, &tl)
	if tl.TotalElements < 3 {
		t.Fatalf("templates: %d, want the project's defaults", tl.TotalElements)
	}
	full := map[string]any{
		"name": name, "version": "v1.0.0", "kubernetesVersion": "v1.33.5+k3s1", "description": "the lab's",
		"controlplaneprovidertype": "k3s", "infraprovidertype": "intel",
		"clusterconfiguration": map[string]any{"kind": "KThreesControlPlaneTemplate", "spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"kthreesConfigSpec": map[string]any{
				"serverConfig": map[string]any{"disableComponents": []string{"traefik"}},
				"files":        []map[string]any{{"path": "/etc/eim/x", "content": "x", "permissions": "0600"}}}}}}},
		"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []string{"10.45.0.0/16"}},
			"services": map[string]any{"cidrBlocks": []string{"10.46.0.0/16"}}},
		"cluster-labels": map[string]string{"line": sfx},
		"artifacts":      []map[string]string{{"kind": "binary", "url": "https://example.com/k3s", "sha256": sha("k3s")}},
	}
	var created string
	s.v2(e, f, admin, "POST", "/templates", full, 201, &created)
	// A template with only what is required: the handler's defaults, and
	// its empty networks and labels, as the document says they come out.
	s.v2(e, f, admin, "POST", "/templates", map[string]any{"name": name, "version": "v1.1.0", "kubernetesVersion": "v1.34.1+k3s1"}, 201, nil)
	s.v2(e, f, admin, "POST", "/templates", full, 409, nil)
	s.v2(e, f, admin, "GET", "/templates?filter=name%3D"+name+"*&orderBy=version%20desc&pageSize=1&offset=0", nil, 200, &tl)
	if tl.TotalElements != 2 || len(tl.TemplateInfoList) != 1 {
		t.Fatalf("filtered templates: %d, %d on the page", tl.TotalElements, len(tl.TemplateInfoList))
	}
	s.v2(e, f, admin, "GET", "/templates?default=true", nil, 200, nil)
	s.v2(e, f, admin, "GET", "/templates/"+name+"/v1.0.0", nil, 200, nil)
	s.v2(e, f, admin, "GET", "/templates/"+name+"/v1.1.0", nil, 200, nil)
	s.v2(e, f, admin, "GET", "/templates/"+name+"/v9.9.9", nil, 404, nil)
	var vl struct {
		VersionList []string `json:"versionList"`
	}
	s.v2(e, f, admin, "GET", "/templates/"+name+"/versions", nil, 200, &vl)
	if !slices.Equal(vl.VersionList, []string{"v1.0.0", "v1.1.0"}) {
		t.Fatalf("versions: %v", vl.VersionList)
	}
	s.v2(e, f, admin, "PUT", "/templates/"+name+"/default", map[string]string{"version": ""}, 200, nil)
	s.v2(e, f, admin, "PUT", "/templates/baseline/default", map[string]string{"name": "baseline", "version": "v0.1.0"}, 200, nil)

	n1, n2, n3 := e.host(e.proj.Name, "192.0.2.21"), e.host(e.proj.Name, "192.0.2.22"), e.host(e.proj.Name, "192.0.2.23")
	spec := map[string]any{"name": cl, "template": name + "-v1.0.0", "labels": map[string]string{"site": "berlin"},
		"nodes": []map[string]string{{"id": n1.id, "role": "all"}, {"id": n2.uuid, "role": "worker"}}}
	s.v2(e, f, admin, "POST", "/clusters", spec, 201, &created)
	if created != "successfully created cluster "+cl {
		t.Fatalf("create: %q, want the original's message on %q", created, cl)
	}
	s.v2(e, f, admin, "POST", "/clusters", map[string]any{"nodes": []map[string]string{{"id": n1.id}}}, 409, nil)
	// Before the reconciler has been by, and after.
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 200, nil)
	e.reconcile()
	e.report(n1, active, "")
	e.reconcile()
	e.report(n2, active, "")
	e.reconcile()
	var d struct {
		LifecyclePhase struct{ Message string } `json:"lifecyclePhase"`
		Nodes          []struct {
			Status struct{ Condition, Timestamp string }
		} `json:"nodes"`
	}
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 200, &d)
	if d.LifecyclePhase.Message != "active" || len(d.Nodes) != 2 || d.Nodes[0].Status.Timestamp == "" {
		t.Fatalf("active cluster: %+v", d)
	}
	s.v2(e, f, admin, "GET", "/clusters/summary", nil, 200, nil)
	var list struct {
		Clusters      []json.RawMessage `json:"clusters"`
		TotalElements int               `json:"totalElements"`
	}
	s.v2(e, f, admin, "GET", "/clusters?filter=name%3D"+cl+"%20OR%20lifecyclePhase%3Dfail*&orderBy=name%20desc&pageSize=10", nil, 200, &list)
	if list.TotalElements != 1 {
		t.Fatalf("filtered clusters: %d, want 1", list.TotalElements)
	}
	s.v2(e, f, admin, "GET", "/clusters/"+n1.id+"/clusterdetail", nil, 200, nil)
	s.v2(e, f, admin, "GET", "/clusters/"+n2.uuid+"/clusterdetail", nil, 200, nil)
	s.v2(e, f, admin, "GET", "/clusters/"+n3.id+"/clusterdetail", nil, 404, nil)
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/labels", map[string]any{"labels": map[string]string{"site": "paris", "eim.io/line": "2"}}, 200, nil)
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/nodes", []map[string]string{{"id": n1.id, "role": "all"}, {"id": n2.id, "role": "worker"}, {"id": n3.id, "role": "worker"}}, 200, nil)
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/nodes", []map[string]string{{"id": n1.id, "role": "worker"}}, 400, nil)
	e.reconcile()
	s.v2(e, f, admin, "DELETE", "/clusters/"+cl+"/nodes/"+n3.id+"?force=true", nil, 200, nil)
	s.v2(e, f, admin, "DELETE", "/clusters/"+cl+"/nodes/"+n1.id, nil, 409, nil)
	e.reconcile()
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 200, nil) // a node leaving
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/template", map[string]string{"name": name, "version": "v1.1.0"}, 202, nil)
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/template", map[string]string{"name": name, "version": "v7.0.0"}, 400, nil)
	e.reconcile()
	e.report(n1, errState, "k3s did not start")
	e.reconcile()
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 200, nil)     // failed
	s.v2(e, f, admin, "GET", "/clusters/summary", nil, 200, nil) // an error
	s.v2(e, f, admin, "DELETE", "/templates/"+name+"/v1.1.0", nil, 409, nil)

	var kc struct {
		Kubeconfig string `json:"kubeconfig"`
	}
	s.v2(e, f, admin, "GET", "/clusters/"+cl+"/kubeconfigs", nil, 200, &kc)
	if !strings.Contains(kc.Kubeconfig, "/kubernetes/"+e.proj.ID+"-"+cl) {
		t.Errorf("kubeconfig:\n%s", kc.Kubeconfig)
	}
	s.v2(e, f, admin, "GET", "/clusters/nope/kubeconfigs", nil, 404, nil)
	if f == inHeader { // the health check has no project form
		s.do(e, f, "", "GET", e.api.URL+"/v2/healthz", nil, 200, nil, false)
	}
	if f == inPath { // the connect API has the project in the path only
		var tok struct{ Token string }
		s.v2(e, f, admin, "POST", "/connect/clusters/"+cl+"/token?ttl=24h&grace=1h", nil, 201, &tok)
		s.v2(e, f, admin, "GET", "/connect/clusters", nil, 200, nil)
		s.v2(e, f, admin, "GET", "/connect/clusters/"+cl, nil, 200, nil)
		s.v2(e, f, admin, "GET", "/connect/clusters/nope", nil, 404, nil)
		s.v2(e, f, admin, "DELETE", "/connect/clusters/"+cl+"/token", nil, 204, nil)
		s.v2(e, f, admin, "POST", "/connect/clusters/"+cl+"/token?ttl=1s", nil, 400, nil) // out of range
		// The pass-through: no agent holds the cluster's tunnel.
		s.do(e, f, admin, "GET", e.api.URL+"/kubernetes/"+e.proj.ID+"-"+cl+"/version", nil, 503, nil, false)
	}

	// Errors: no token, a project that does not exist, a role too weak.
	s.v2(e, f, "", "GET", "/clusters", nil, 401, nil)
	reader := e.token(e.proj.Name + "_cl-r")
	s.v2(e, f, reader, "GET", "/clusters/"+cl, nil, 200, nil)
	s.v2(e, f, reader, "DELETE", "/clusters/"+cl, nil, 403, nil)
	s.v2(e, f, admin, "GET", "/clusters/nope", nil, 404, nil)
	s.invalid(e, f, admin, "POST", "/clusters", map[string]any{"nodes": []map[string]string{{"id": n3.id, "role": "boss"}}}, 400)

	s.v2(e, f, admin, "DELETE", "/clusters/"+cl+"?force=true", nil, 204, nil)
	s.v2(e, f, admin, "PUT", "/clusters/"+cl+"/labels", map[string]any{"labels": nil}, 409, nil) // being deleted
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 200, nil)                                     // deleting
	e.reconcile()
	s.v2(e, f, admin, "GET", "/clusters/"+cl, nil, 404, nil)
	s.v2(e, f, admin, "DELETE", "/templates/"+name+"/v1.0.0", nil, 204, nil)
	s.v2(e, f, admin, "DELETE", "/templates/"+name+"/v1.0.0", nil, 404, nil)
}

// TestOpenAPICatchesMistakes makes sure the validation above can fail: a
// document with a member misnamed in an answer or in a body, or a wrong
// status, must not match the server.
func TestOpenAPICatchesMistakes(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"))
	n := e.host(e.proj.Name, "192.0.2.31")
	if st := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "c1", "nodes": []map[string]string{{"id": n.id}}}, nil); st != 201 {
		t.Fatalf("create: %d", st)
	}
	rename := func(schema, from, to string) func(*openapi3.T) {
		return func(d *openapi3.T) {
			s := d.Components.Schemas[schema].Value
			s.Properties[to] = s.Properties[from]
			delete(s.Properties, from)
			for i, r := range s.Required {
				if r == from {
					s.Required[i] = to
				}
			}
		}
	}
	cases := []struct {
		name         string
		mutate       func(*openapi3.T)
		method, path string
		body         any
		answer       bool // the answer must fail, else the request
	}{
		{"answer member misnamed", rename("ClusterDetail", "nodeQuantity", "nodeCount"), "GET", "/clusters/c1", nil, true},
		{"optional answer member misnamed", rename("ClusterTemplate", "description", "desc"), "GET", "/templates/baseline/v0.1.0", nil, true},
		{"body member misnamed", rename("ClusterTemplateRef", "version", "templateVersion"), "PUT", "/clusters/c1/template",
			map[string]string{"name": "baseline", "version": "v0.1.0"}, false},
		{"wrong status", func(d *openapi3.T) {
			rs := d.Paths.Value("/v2/projects/{projectName}/clusters/{name}/template").Put.Responses
			rs.Set("200", rs.Value("202"))
			rs.Delete("202")
		}, "PUT", "/clusters/c1/template", map[string]string{"name": "baseline", "version": "v0.1.0"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := loadSpecWith(t, e.api.URL, c.mutate)
			x := s.exchange(e, inPath, e.admin, c.method, e.api.URL+"/v2/projects/"+e.proj.Name+c.path, c.body)
			err := x.reqErr
			if c.answer {
				err = x.resErr
			}
			if err == nil {
				t.Fatalf("%s %s with the document changed: no mismatch found (status %d: %s)", c.method, c.path, x.status, x.body)
			}
			t.Logf("found: %.200s", err)
		})
	}
}
