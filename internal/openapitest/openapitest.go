// Package openapitest checks a running server's answers against EIM's API
// document, as a client generated from it would see them: each call's
// request is validated against the document (when it is meant to
// succeed), sent, its status compared with the one wanted, and its answer
// validated against the document's response of that status. Test code
// only: the modules' OpenAPI tests (api, oob, objstore) share it.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Router is a router of doc's operations on serverURL. Objects of doc
// that do not say whether they allow other members are closed first, so
// that an answer with a member the document lacks fails its check.
func Router(t testing.TB, doc *openapi3.T, serverURL string) routers.Router {
	t.Helper()
	for _, s := range doc.Components.Schemas {
		if s.Value != nil && s.Value.Type.Is("object") && s.Value.AdditionalProperties.Has == nil && s.Value.AdditionalProperties.Schema == nil {
			no := false
			s.Value.AdditionalProperties.Has = &no
		}
	}
	doc.Servers = openapi3.Servers{{URL: serverURL}}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Call is one request of a test: a bearer token, the method, the path
// (with its query) under the router's server, a body sent as JSON (nil:
// none), and the status wanted.
type Call struct {
	Token, Method, Path string
	Body                any
	Status              int
}

// Do sends c to the server of router and checks it (see the package doc).
// A request that is not in the document, or a status other than c.Status,
// ends the test; an answer the document does not describe is an error of
// the test. It returns the answer's body.
func Do(ctx context.Context, t testing.TB, router routers.Router, serverURL string, c Call) []byte {
	t.Helper()
	var raw []byte
	if c.Body != nil {
		var err error
		if raw, err = json.Marshal(c.Body); err != nil {
			t.Fatal(err)
		}
	}
	req := func() *http.Request {
		r, err := http.NewRequestWithContext(ctx, c.Method, serverURL+c.Path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+c.Token)
		if raw != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r
	}
	check := req()
	route, params, err := router.FindRoute(check)
	if err != nil {
		t.Fatalf("%s %s: not in the document: %v", c.Method, c.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if c.Status < 400 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Fatalf("%s %s: the request is not valid: %v", c.Method, c.Path, err)
		}
	}
	res, err := http.DefaultClient.Do(req())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != c.Status {
		t.Fatalf("%s %s: got %d %s, want %d", c.Method, c.Path, res.StatusCode, body, c.Status)
	}
	in.Request = req()
	if err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}); err != nil {
		t.Errorf("%s %s: the answer %d %s is not valid: %v", c.Method, c.Path, res.StatusCode, body, err)
	}
	return body
}
