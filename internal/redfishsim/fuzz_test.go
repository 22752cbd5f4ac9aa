package redfishsim_test

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/eimhq/eim/internal/redfishsim"
)

// FuzzRequestBodies: whatever a client sends as the body of a PATCH, an
// action or a login, the BMC answers it without failing (never 5xx on an
// in-memory machine) and every error is a Redfish error body.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`,
		`{"Boot":{"BootSourceOverrideMode":"UEFI","HttpBootUri":"http://x/y"}}`,
		`{"ResetType":"On"}`, `{"ResetType":"GracefulRestart"}`, `{"ResetType":null}`,
		`{"Image":"http://x/a.iso","Inserted":true}`, `{"UserName":"admin","Password":"s3cret"}`,
		``, `{}`, `[]`, `null`, `{"Boot":null}`, `{"a":1} {"b":2}`, `{"Boot":{"BootSourceOverrideTarget":["Pxe"]}}`,
	} {
		f.Add(seed)
	}
	paths := []struct{ method, path string }{
		{"PATCH", "/redfish/v1/Systems/1"},
		{"POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"},
		{"POST", "/redfish/v1/Managers/BMC/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"},
		{"POST", "/redfish/v1/Managers/BMC/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia"},
		{"POST", "/redfish/v1/SessionService/Sessions"},
	}
	f.Fuzz(func(t *testing.T, body string) {
		b, err := redfishsim.New(redfishsim.Config{Username: "admin", Password: "s3cret", MaxSessions: 1,
			Systems: []redfishsim.SystemConfig{{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			req := httptest.NewRequest(p.method, p.path, bytes.NewBufferString(body))
			req.SetBasicAuth("admin", "s3cret")
			w := httptest.NewRecorder()
			b.ServeHTTP(w, req)
			if w.Code >= 500 {
				t.Fatalf("%s %s %q: got %d %s", p.method, p.path, body, w.Code, w.Body)
			}
			if w.Code >= 400 && !bytes.HasPrefix(w.Body.Bytes(), []byte(`{"error":{`)) {
				t.Fatalf("%s %s %q: %d without an error body: %s", p.method, p.path, body, w.Code, w.Body)
			}
		}
	})
}
