package oob_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/oob"
)

// TestOpenAPI: the document's BMC operations are exactly the module's
// routes, and the requests and answers (errors included) of a sequence
// over them are valid against it (kin-openapi), with the answers' objects
// closed: a member the document does not know fails.
func TestOpenAPI(t *testing.T) {
	e := newEnv(t, "sqlite", filepath.Join(t.TempDir(), "eim.db"))
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		if strings.Contains(path, "/bmc") {
			for method := range item.Operations() {
				documented = append(documented, method+" "+path)
			}
		}
	}
	svc, err := oob.New(oob.Options{Store: e.store, Key: e.key, Authenticator: tokens{}})
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for p := range svc.Routes() {
		served = append(served, p)
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
	p := bmcPath("a", e.hostA)
	for _, c := range []struct {
		tok, method, path string
		body              any
		status            int
	}{
		{"writer", "PUT", p, redfish(ptr(password)), 200},
		{"reader", "GET", p, nil, 200},
		{"writer", "PUT", p, map[string]any{"protocol": "IPMI", "address": "10.0.0.1", "username": "u"}, 200},
		{"writer", "PUT", p, map[string]any{"protocol": "IPMI", "address": "https://x", "username": "u"}, 400},
		{"reader", "PUT", p, redfish(nil), 403},
		{"writer", "GET", bmcPath("a", e.hostA2), nil, 404},
		{"writer", "POST", p + "/jobs", map[string]any{"boot": "NETWORK"}, 200},
		{"writer", "POST", p + "/jobs", map[string]any{"boot": "NETWORK", "desiredPowerState": "POWER_STATE_OFF"}, 400},
		{"reader", "GET", p + "/jobs", nil, 200},
		{"writer", "DELETE", p, nil, 200},
		{"writer", "DELETE", p, nil, 404},
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
