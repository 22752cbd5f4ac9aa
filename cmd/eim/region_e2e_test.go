package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegionCreateSameNameWarns: the API allows two regions of one name
// (as the original's does), so "eim region create" makes the second, but
// says on stderr which region already has the name; a first "north", and
// a "north-2" (a name that only starts the same), do not warn.
func TestRegionCreateSameNameWarns(t *testing.T) {
	dir := t.TempDir()
	url, _ := startServer(t, dir)
	create := func(name string) (id, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{"--server", url, "--token-file", filepath.Join(dir, adminTokenFile), "region", "create", "--name", name, "-o", "id"}
		if err := Main(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("region create %s: %v\n%s", name, err, errOut.String())
		}
		return strings.TrimSpace(out.String()), errOut.String()
	}
	first, stderr := create("north")
	if stderr != "" {
		t.Errorf("the first north: stderr %q", stderr)
	}
	if _, stderr = create("north-2"); stderr != "" {
		t.Errorf("north-2: stderr %q", stderr)
	}
	second, stderr := create("north")
	if second == "" || second == first {
		t.Fatalf("the second north: id %q (the first %q)", second, first)
	}
	if want := `warning: another region is also named "north" (` + first + `)`; !strings.HasPrefix(stderr, want) {
		t.Errorf("the second north: stderr %q, want it to start %q", stderr, want)
	}
}
