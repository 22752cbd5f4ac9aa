package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim/internal/redfishsim"
)

// TestRunFleet: "fleet" writes its BMCs as CSV and their certificate,
// serves the records and refuses bad flags naming them.
func TestRunFleet(t *testing.T) {
	for _, bad := range [][]string{{"-n", "0"}, {"-drop-share", "1.5"}, {"-delay", "-1s"}, {"extra"}} {
		if err := run(context.Background(), append([]string{"fleet"}, bad...), io.Discard, io.Discard); err == nil {
			t.Errorf("fleet %v: no error", bad)
		} else if !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "-")) && bad[0] != "extra" {
			t.Errorf("fleet %v: %v does not name the flag", bad, err)
		}
	}
	dir := t.TempDir()
	csvFile, certFile := filepath.Join(dir, "bmcs.csv"), filepath.Join(dir, "ca.pem")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"fleet", "-n", "4", "-drop-share", "0.5", "-csv-out", csvFile, "-cert-out", certFile}, io.Discard, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`records at (http://\S+)/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("line %q names no records address", line)
	}
	data, err := os.ReadFile(csvFile)
	if err != nil || strings.Count(string(data), "\n") != 5 || strings.Count(string(data), ",true\n") != 2 {
		t.Fatalf("the CSV (%v):\n%s", err, data)
	}
	if pem, err := os.ReadFile(certFile); err != nil || !strings.Contains(string(pem), "BEGIN CERTIFICATE") {
		t.Fatalf("the certificate: %v %q", err, pem)
	}
	resp, err := http.Get(m[1] + "/report?window=2s")
	if err != nil {
		t.Fatal(err)
	}
	var rep redfishsim.FleetReport
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.BMCs != 4 || rep.PowerOns != 0 {
		t.Fatalf("report %+v (%v)", rep, err)
	}
	resp, err = http.Get(m[1] + "/report?window=soon")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("a bad window: %d, want 400", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
