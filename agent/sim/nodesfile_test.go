package sim_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent/sim"
)

func TestNodesRoundTrip(t *testing.T) {
	nodes := []sim.ProvisionedNode{
		{HostID: "host-0000abcd", Project: "default", ClientID: "edgenode-host-0000abcd", ClientSecret: "s1", Hostname: "sim-00001"},
		{HostID: "host-0000abce", Project: "default", ClientID: "edgenode-host-0000abce", ClientSecret: "s2", TokenURL: "https://127.0.0.1:8443/oauth2/token"},
	}
	var b bytes.Buffer
	if err := sim.WriteNodes(&b, nodes); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 2 {
		t.Errorf("got %d lines, want 2:\n%s", n, b.String())
	}
	got, err := sim.ReadNodes(&b)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Line, nodes[1].Line = 1, 2
	if !slices.Equal(got, nodes) {
		t.Errorf("got %+v, want %+v", got, nodes)
	}
}

func TestReadNodes(t *testing.T) {
	const (
		a = `{"hostId":"host-0000000a","project":"p","clientId":"edgenode-host-0000000a","clientSecret":"x"}`
		b = `{"hostId":"host-0000000b","project":"p","clientId":"edgenode-host-0000000b","clientSecret":"y"}`
	)
	for _, tc := range []struct {
		name, in string
		want     int    // nodes, when no error
		err      string // part of the error
	}{
		{"two", a + "\n" + b + "\n", 2, ""},
		{"no final newline", a + "\n" + b, 2, ""},
		{"blank lines and CRLF", "\n" + a + "\r\n\r\n  " + b + "  \n\n", 2, ""},
		{"empty", "", 0, "no nodes"},
		{"blank only", "\n \n", 0, "no nodes"},
		{"not JSON", a + "\nhost-0000000b,p\n", 0, "line 2: not a node's JSON object"},
		{"unknown field", `{"hostId":"host-0000000a","project":"p","clientId":"c","clientSecret":"x","secret":"y"}`, 0, `line 1: not a node's JSON object: json: unknown field "secret"`},
		{"two values", a + " " + b, 0, "line 1: more than one JSON value"},
		{"no host", `{"project":"p","clientId":"c","clientSecret":"x"}`, 0, "line 1: hostId is required"},
		{"bad host", `{"hostId":"inst-0000000a","project":"p","clientId":"c","clientSecret":"x"}`, 0, `line 1: hostId "inst-0000000a" is not a host ID`},
		{"no project", `{"hostId":"host-0000000a","clientId":"c","clientSecret":"x"}`, 0, "line 1: project is required"},
		{"no client", `{"hostId":"host-0000000a","project":"p","clientSecret":"x"}`, 0, "line 1: clientId is required"},
		{"no secret", `{"hostId":"host-0000000a","project":"p","clientId":"c"}`, 0, "line 1: clientSecret is required"},
		{"relative token URL", `{"hostId":"host-0000000a","project":"p","clientId":"c","clientSecret":"x","tokenUrl":"/oauth2/token"}`, 0, `line 1: tokenUrl "/oauth2/token" is not an absolute http(s) URL`},
		{"repeated host", a + "\n\n" + b + "\n" + a + "\n", 0, "line 4: host host-0000000a repeats line 1"},
		{"long line", a + "\n" + strings.Repeat(" ", 70000) + b + "\n", 0, "line 2: longer than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sim.ReadNodes(strings.NewReader(tc.in))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("got error %v, want %d nodes", err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got error %v, want one containing %q", err, tc.err)
			case tc.err == "" && len(got) != tc.want:
				t.Fatalf("got %d nodes, want %d", len(got), tc.want)
			}
			if tc.name == "blank lines and CRLF" && (got[0].Line != 2 || got[1].Line != 4) {
				t.Errorf("lines: got %d and %d, want 2 and 4", got[0].Line, got[1].Line)
			}
		})
	}
}
