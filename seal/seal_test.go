package seal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim/seal"
)

func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	k, err := seal.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("K10abc::server:secret")
	box := k.Seal(secret, "p/cluster-1/join")
	if bytes.Contains(box, secret) {
		t.Fatal("the sealed value holds the secret in the clear")
	}
	got, err := k.Open(box, "p/cluster-1/join")
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open: got %q, %v; want %q", got, err, secret)
	}
	// Bound to its purpose: another row's does not open it.
	if _, err := k.Open(box, "p/cluster-2/join"); err == nil {
		t.Fatal("Open with another purpose: got nil error")
	}
	// The file is kept: a restart opens what was sealed before.
	k2, err := seal.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Open(box, "p/cluster-1/join"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open after reload: got %q, %v", got, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, seal.KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	// Another key does not open it.
	other, err := seal.LoadDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(box, "p/cluster-1/join"); err == nil {
		t.Fatal("Open with another key: got nil error")
	}
}

func TestLoadRefusesOpenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, []byte("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := seal.Load(p); err == nil {
		t.Fatal("a world-readable key: got nil error")
	}
	os.Chmod(p, 0o600)
	if _, err := seal.Load(p); err != nil {
		t.Fatal(err)
	}
}
