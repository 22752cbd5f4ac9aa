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

// TestClientIsFresh regenerates each client from its reference into a
// temporary directory with the pinned generator and fails when the
// committed client.gen.go differs.
func TestClientIsFresh(t *testing.T) {
	for _, c := range []struct{ dir, doc string }{
		{"refclient", referencePath},
		{"clusterclient", filepath.Join(filepath.Dir(referencePath), "cluster-manager-openapi.yaml")},
	} {
		t.Run(c.dir, func(t *testing.T) { checkFresh(t, c.dir, c.doc) })
	}
}

func checkFresh(t *testing.T, client, doc string) {
	if _, err := os.Stat(doc); err != nil {
		t.Skipf("the reference document is not beside the repository (%s): cannot check that %s is fresh", doc, client)
	}
	// The committed configuration, writing into the temporary directory.
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(client, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "client.gen.go")
	cfg = regexp.MustCompile(`(?m)^output: .*$`).ReplaceAll(cfg, []byte("output: "+out))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "config.yaml"), doc)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(client, "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s/client.gen.go (%d bytes) differs from what the reference generates (%d bytes): run `go generate ./compat`", client, len(got), len(want))
	}
}
