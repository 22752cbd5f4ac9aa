package oob_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/internal/openapitest"
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
	router := openapitest.Router(t, doc, e.srv.URL)
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
		openapitest.Do(t.Context(), t, router, e.srv.URL, openapitest.Call{Token: c.tok, Method: c.method, Path: c.path, Body: c.body, Status: c.status})
	}
}
