package compat_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// referencePath is the original's document beside the repository
// (../shared/reference from the repository root), as api/reference_test.go
// reads it.
var referencePath = filepath.Join("..", "..", "shared", "reference", "eim-openapi.yaml")

// TestClientIsFresh regenerates the client from the reference into a
// temporary directory with the pinned generator and fails when the
// committed refclient/client.gen.go differs.
func TestClientIsFresh(t *testing.T) {
	if _, err := os.Stat(referencePath); err != nil {
		t.Skipf("the reference document is not beside the repository (%s): cannot check that refclient is fresh", referencePath)
	}
	// The committed configuration, writing into the temporary directory.
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join("refclient", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "client.gen.go")
	cfg = regexp.MustCompile(`(?m)^output: .*$`).ReplaceAll(cfg, []byte("output: "+out))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "config.yaml"), referencePath)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("refclient", "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("refclient/client.gen.go (%d bytes) differs from what the reference generates (%d bytes): run `go generate ./compat`", len(got), len(want))
	}
}
