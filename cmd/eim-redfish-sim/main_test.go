package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: the command serves a BMC of two systems with a fault, over
// HTTPS with the certificate it wrote, until its context ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cert := filepath.Join(t.TempDir(), "bmc.pem")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-https", "127.0.0.1:0", "-http", "", "-systems", "2", "-conflict-in-state", "-cert-out", cert}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	root := strings.TrimSpace(line)
	if !strings.HasPrefix(root, "https://127.0.0.1:") {
		t.Fatalf("first line: got %q", line)
	}
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(path string) map[string]any {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(root, "/redfish/v1/")+path, nil)
		req.SetBasicAuth("admin", "redfish")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v
	}
	if n := get("/redfish/v1/Systems")["Members@odata.count"]; n != float64(2) {
		t.Errorf("systems: got %v, want 2", n)
	}
	req, _ := http.NewRequest("POST", strings.TrimSuffix(root, "/redfish/v1/")+"/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"ForceOff"}`))
	req.SetBasicAuth("admin", "redfish")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("ForceOff of an off system with -conflict-in-state: got %d, want 409", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-systems", "0"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: got no error", args)
		}
	}
}

// The simulator's command is the only binary that links it.
func TestOnlyThisLinksTheSimulator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../eim", "../eim-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "eim/internal/redfishsim") {
		t.Error("cmd/eim or cmd/eim-agent links internal/redfishsim")
	}
}
