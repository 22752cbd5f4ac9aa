package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// TestRun: the command serves an MPS over HTTP until its context ends; a
// login and a power state read work against it.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-https", "", "-http", "127.0.0.1:0", "-devices", "a-1,b-2", "-on"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSuffix(strings.TrimSpace(line), "/api/v1/")
	resp, err := http.Post(base+"/api/v1/authorize", "application/json", strings.NewReader(`{"username":"standalone","password":"G@ppm0ym"}`))
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	req, _ := http.NewRequest("GET", base+"/api/v1/amt/power/state/b-2", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Powerstate int }
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Powerstate != 2 {
		t.Errorf("power state of a device started on: got %d, want 2", st.Powerstate)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-devices", ""}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: got no error", args)
		}
	}
}

// No EIM binary links the simulator.
func TestOnlyThisLinksTheSimulator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../eim", "../eim-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "eim/internal/mpssim") {
		t.Error("cmd/eim or cmd/eim-agent links internal/mpssim")
	}
}
