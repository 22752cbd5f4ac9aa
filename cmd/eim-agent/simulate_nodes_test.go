package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSimulateNodesFile(t *testing.T) {
	ok := []string{"--server", "https://127.0.0.1:8443", "--ca", "ca.crt", "--nodes-file", "nodes.jsonl", "--hold", "1m"}
	c, err := parseSimulate(ok, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.nodesFile != "nodes.jsonl" || c.nodes != 0 || c.hold.Minutes() != 1 {
		t.Errorf("got %+v, want the file, all its nodes, a 1 m hold", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(ok[:6:6], "--exit-after-day0"), "--nodes-file has no Day 0: not with --exit-after-day0"},
		{append(ok, "--register", "--token-file", "t", "--nzt"), "--nodes-file has no Day 0: not with --register"},
		{append(ok, "--identities", "ids.csv", "--fail-share", "0.1"), "not with --identities, --fail-share"},
		{append(ok, "--enroll", "tok", "--reboot-share", "0.5", "--write-identities", "w.csv"), "not with --write-identities, --enroll, --reboot-share"},
		{append(ok, "--nodes", "10"), "--nodes-file runs every node of the file: not with --nodes"},
	} {
		_, err := parseSimulate(tc.args, &bytes.Buffer{})
		if !errors.As(err, new(*usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

// The nodes file is checked before anything is dialled, and its errors
// name the file and the line.
func TestSimulateNodesFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nodes.jsonl")
	const (
		a = `{"hostId":"host-0000000a","project":"default","clientId":"edgenode-host-0000000a","clientSecret":"x"}`
		b = `{"hostId":"host-0000000b","project":"other","clientId":"edgenode-host-0000000b","clientSecret":"y"}`
	)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"missing", "", "no such file"},
		{"bad line", a + "\n{\n", file + ": line 2: not a node's JSON object"},
		{"other project", a + "\n" + b + "\n", file + `: line 2: host host-0000000b is in project "other", not in --project "default"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(file)
			if tc.name != "missing" {
				if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--server", "https://127.0.0.1:1", "--ca", filepath.Join(dir, "no-ca.crt"), "--nodes-file", file, "--hold", "1m"}
			err := runSimulate(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
