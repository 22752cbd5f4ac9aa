package objstore_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/objstore"
)

// TestOpenAPI: the document's object storage operations are exactly the
// part's API routes, and the requests and answers (errors included) of a
// sequence over them are valid against it (kin-openapi), with the
// answers' objects closed: a member the document does not know fails.
func TestOpenAPI(t *testing.T) {
	e := newEnv(t, objstore.Options{})
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec())
	if err != nil {
		t.Fatal(err)
	}
	var documented, served []string
	for path, item := range doc.Paths.Map() {
		if strings.HasSuffix(path, "/objectstorage") || strings.Contains(path, "/edgedata/") {
			for method := range item.Operations() {
				documented = append(documented, method+" "+path)
			}
		}
	}
	for p := range e.svc.Routes() {
		served = append(served, strings.Replace(p, "{path...}", "{path}", 1))
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented %v, served %v", documented, served)
	}
	for _, s := range doc.Components.Schemas {
		if s.Value != nil && s.Value.Type.Is("object") && s.Value.AdditionalProperties.Has == nil && s.Value.AdditionalProperties.Schema == nil {
			no := false
			s.Value.AdditionalProperties.Has = &no
		}
	}
	doc.Servers = openapi3.Servers{{URL: e.srv.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	g := grant(t, e.svc, "a", e.hostA+"/", change("log.txt", []byte("log")))[0]
	if code, b := send(t, g, []byte("log")); code != http.StatusOK {
		t.Fatalf("upload: got %d %s", code, b)
	}
	p := "/v1/projects/a/objectstorage"
	setting := map[string]any{"endpoint": "http://127.0.0.1:1", "bucket": "edge", "pathStyle": true, "accessKeyId": "AK", "secretAccessKey": "sk"}
	files := "/v1/projects/a/edgedata/" + e.hostA
	for _, c := range []struct {
		tok, method, path string
		body              any
		status            int
	}{
		{"writer", "GET", p, nil, 404},
		{"writer", "PUT", p, setting, 200},
		{"reader", "GET", p, nil, 200},
		{"writer", "PUT", p, map[string]any{"endpoint": "x", "bucket": "edge", "accessKeyId": "AK"}, 400},
		{"reader", "PUT", p, setting, 403},
		{"writer", "DELETE", p, nil, 200},
		{"writer", "DELETE", p, nil, 404},
		{"reader", "GET", files + "?pageSize=10", nil, 200},
		{"reader", "GET", files + "?pageSize=0", nil, 400},
		{"reader", "GET", files + "/log.txt", nil, 200},
		{"reader", "GET", files + "/none.txt", nil, 404},
		{"bwrite", "GET", files, nil, 403},
	} {
		var raw []byte
		if c.body != nil {
			raw, _ = json.Marshal(c.body)
		}
		req := func() *http.Request {
			r, err := http.NewRequestWithContext(t.Context(), c.method, e.srv.URL+c.path, bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Authorization", "Bearer "+c.tok)
			if raw != nil {
				r.Header.Set("Content-Type", "application/json")
			}
			return r
		}
		check := req()
		route, params, err := router.FindRoute(check)
		if err != nil {
			t.Fatalf("%s %s: not in the document: %v", c.method, c.path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		if c.status < 400 {
			if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
				t.Fatalf("%s %s: the request is not valid: %v", c.method, c.path, err)
			}
		}
		res, err := http.DefaultClient.Do(req())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Fatalf("%s %s: got %d %s, want %d", c.method, c.path, res.StatusCode, body, c.status)
		}
		in.Request = req()
		if err := openapi3filter.ValidateResponse(t.Context(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(body)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}); err != nil {
			t.Errorf("%s %s: the answer %d %s is not valid: %v", c.method, c.path, res.StatusCode, body, err)
		}
	}
}
