package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerOOB: the oob profile's server serves a host's BMC, audited by
// the API's user without the password; a process without the oob module
// does not serve it.
func TestServerOOB(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "oob")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"
	code, host := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"h1","uuid":"4c4c4544-0000-4000-8000-0000000000b1"}`)
	if code != 200 {
		t.Fatalf("POST a host: %d %v", code, host)
	}
	bmc := api + "/compute/hosts/" + host["resourceId"].(string) + "/bmc"
	const pw = "e2e-bmc-Passw0rd"
	code, body := getJSON(t, "PUT", bmc, tok, `{"protocol":"IPMI","address":"10.0.0.7:623","username":"root","password":"`+pw+`"}`)
	if code != 200 || body["passwordSet"] != true || body["password"] != nil {
		t.Fatalf("PUT the BMC: %d %v", code, body)
	}
	if code, body := getJSON(t, "GET", bmc, tok, ""); code != 200 || body["address"] != "10.0.0.7:623" || body["password"] != nil {
		t.Fatalf("GET the BMC: %d %v", code, body)
	}
	code, body = getJSON(t, "GET", api+`/audit?filter=kind%3D%22bmc%22`, tok, "")
	recs, _ := body["auditRecords"].([]any)
	if code != 200 || len(recs) != 1 {
		t.Fatalf("GET the BMC's audit records: %d %v", code, body)
	}
	if raw, _ := json.Marshal(recs); strings.Contains(string(raw), pw) || !strings.Contains(string(raw), "[redacted]") {
		t.Fatalf("the BMC's audit record: got %s, want the password redacted", raw)
	}
	if rec := recs[0].(map[string]any); !strings.HasPrefix(rec["principal"].(string), "user:") {
		t.Fatalf("the BMC's audit record: got %v, want made by the API's user", rec)
	}
	for _, out := range []string{s.out.String(), s.errOut.String()} {
		if strings.Contains(out, pw) {
			t.Fatalf("the server's output holds the BMC password:\n%s", out)
		}
	}

	apiDir := t.TempDir()
	a := startModules(t, apiDir, false, "--modules", "api")
	atok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(apiDir, adminTokenFile)))))
	if code, body := getJSON(t, "PUT", a.http+"/v1/projects/default/compute/hosts/host-0000000a/bmc", atok, `{}`); code != 404 {
		t.Fatalf("PUT a BMC on a process without the oob module: %d %v, want 404", code, body)
	}
}
