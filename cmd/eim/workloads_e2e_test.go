package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerDevices: the devices profile's server serves edge workloads;
// its targets loop, woken by the change feed, gives a workload to the host
// its selector matches, and to a host that gets the label later; a
// process without the workloads module does not serve them.
func TestServerDevices(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "devices")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"
	code, h1 := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"h1","uuid":"4c4c4544-0000-4000-8000-0000000000c1","metadata":[{"key":"line","value":"1"}]}`)
	if code != 200 {
		t.Fatalf("POST a host: %d %v", code, h1)
	}
	if code, body := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"h0","uuid":"4c4c4544-0000-4000-8000-0000000000c0","metadata":[{"key":"eim.io/arch","value":"x"}]}`); code != 400 ||
		!strings.Contains(body["message"].(string), "metadata[0].key") {
		t.Fatalf("POST a host with a reserved label: %d %v, want 400", code, body)
	}
	code, body := getJSON(t, "POST", api+"/edgeworkloads", tok, `{"name":"camera","spec":{"deviceSelector":{"matchLabels":{"line":"1"}},"pod":{"spec":{"containers":[{"name":"c","image":"reg.example/cam:1"}]}}}}`)
	if code != 201 {
		t.Fatalf("POST an edge workload: %d %v", code, body)
	}
	devices := func() []any {
		_, body := getJSON(t, "GET", api+"/edgeworkloads/camera/devices", tok, "")
		ds, _ := body["devices"].([]any)
		return ds
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(devices()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the workload's devices stayed %v, want h1", devices())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := devices()[0].(map[string]any); d["hostId"] != h1["resourceId"] || d["summary"] != "unknown" || d["targetRevision"] != 1.0 {
		t.Fatalf("the workload's device: %v", d)
	}
	code, h2 := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"h2","uuid":"4c4c4544-0000-4000-8000-0000000000c2"}`)
	if code != 200 {
		t.Fatalf("POST a host: %d %v", code, h2)
	}
	if code, body := getJSON(t, "PATCH", api+"/compute/hosts/"+h2["resourceId"].(string), tok, `{"metadata":[{"key":"line","value":"1"}]}`); code != 200 {
		t.Fatalf("PATCH h2's metadata: %d %v", code, body)
	}
	for len(devices()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the workload's devices stayed %v, want h1 and h2", devices())
		}
		time.Sleep(50 * time.Millisecond)
	}

	apiDir := t.TempDir()
	a := startModules(t, apiDir, false, "--modules", "api")
	atok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(apiDir, adminTokenFile)))))
	if code, body := getJSON(t, "GET", a.http+"/v1/projects/default/edgeworkloads", atok, ""); code != 404 {
		t.Fatalf("GET edge workloads of a process without the workloads module: %d %v, want 404", code, body)
	}
}
