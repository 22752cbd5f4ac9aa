package main

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
)

// TestObjectStorageCLI: eim objectstorage set (the secret from stdin, kept
// when not given), get (no secret shown, the bucket check's outcome) and
// delete, against the part's API on a real store.
func TestObjectStorageCLI(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateProject(ctx, &eim.Project{Name: "default", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key, _ := seal.New(raw)
	svc, err := objstore.New(objstore.Options{Store: st, Key: key, Authenticator: oneToken{}, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hd := range svc.Routes() {
		mux.Handle(p, hd)
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := &cli{ctx: ctx, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		err := c.run(append([]string{"--server", hs.URL, "--token-file", tok, "objectstorage"}, args...))
		return out.String() + errOut.String(), err
	}
	stored := func() string {
		o, err := st.GetObjectStorage(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		s, err := key.OpenText(o.SealedSecretKey, eim.ObjectStorageSecretPurpose("default"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Nothing listens on port 1 of loopback: saved, UNREACHABLE.
	out, err := run("s3cret-key\n", "set", "--endpoint", "http://127.0.0.1:1", "--bucket", "edge", "--path-style", "--access-key-id", "AK", "--secret-key-stdin")
	if err != nil {
		t.Fatalf("set: %v: %s", err, out)
	}
	if !strings.Contains(out, "UNREACHABLE") || !strings.Contains(out, "path") || strings.Contains(out, "s3cret") {
		t.Fatalf("set: got %q", out)
	}
	if s := stored(); s != "s3cret-key" {
		t.Fatalf("stored secret %q, want the line from stdin", s)
	}
	if out, err := run("", "set", "--endpoint", "http://127.0.0.1:1", "--bucket", "edge2", "--path-style", "--access-key-id", "AK"); err != nil {
		t.Fatalf("set without a secret: %v: %s", err, out)
	}
	if s := stored(); s != "s3cret-key" {
		t.Fatalf("after a set without a secret: %q, want it kept", s)
	}
	out, err = run("", "get", "-o", "json")
	if err != nil || !strings.Contains(out, `"secretAccessKeySet": true`) || !strings.Contains(out, `"bucket": "edge2"`) || strings.Contains(out, "s3cret") {
		t.Fatalf("get: %v: %s", err, out)
	}
	if _, err := run("", "set", "--endpoint", "ftp://x", "--bucket", "edge", "--access-key-id", "AK"); err == nil || !strings.Contains(err.Error(), "endpoint:") {
		t.Fatalf("set with a bad endpoint: got %v, want the API's error naming endpoint", err)
	}
	if out, err := run("", "delete"); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %v: %s", err, out)
	}
	if _, err := run("", "get"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("get after delete: got %v, want not found", err)
	}
}
