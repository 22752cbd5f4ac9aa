package objstore_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/internal/openapitest"
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
	router := openapitest.Router(t, doc, e.srv.URL)
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
		openapitest.Do(t.Context(), t, router, e.srv.URL, openapitest.Call{Token: c.tok, Method: c.method, Path: c.path, Body: c.body, Status: c.status})
	}
}
