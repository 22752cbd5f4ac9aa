package seal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

func TestSealText(t *testing.T) {
	k, err := seal.LoadDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const secret, ad = "whsec-0123456789abcdef", "webhook/p/webhook-1"
	v := k.SealText(secret, ad)
	if strings.Contains(v, secret) || !seal.IsSealedText(v) {
		t.Fatalf("SealText gave %q", v)
	}
	if v2 := k.SealText(secret, ad); v2 == v {
		t.Fatal("two seals of one secret are equal (no fresh nonce)")
	}
	if got, err := k.OpenText(v, ad); err != nil || got != secret {
		t.Fatalf("OpenText: got %q, %v", got, err)
	}
	if _, err := k.OpenText(v, "webhook/p/webhook-2"); err == nil {
		t.Fatal("OpenText with another purpose: got nil error")
	}
	// A value stored before sealing is its own plaintext.
	if got, err := k.OpenText(secret, ad); err != nil || got != secret {
		t.Fatalf("OpenText of an unsealed value: got %q, %v", got, err)
	}
	// Without a key nothing is sealed, and a sealed value does not open.
	var none *seal.Key
	if got := none.SealText(secret, ad); got != secret {
		t.Fatalf("nil key SealText: got %q", got)
	}
	if _, err := none.OpenText(v, ad); err == nil || !strings.Contains(err.Error(), "no secrets key") {
		t.Fatalf("nil key OpenText of a sealed value: got %v", err)
	}
	if _, err := k.OpenText(v[:len(v)-1]+"!", ad); err == nil {
		t.Fatal("OpenText of a damaged value: got nil error")
	}
}

func TestDerive(t *testing.T) {
	k1, _ := seal.New(make([]byte, 32))
	k1b, _ := seal.New(make([]byte, 32))
	other := make([]byte, 32)
	other[0] = 1
	k2, _ := seal.New(other)
	a, b := k1.Derive("a"), k1.Derive("b")
	if len(a) != 32 || string(a) == string(b) {
		t.Fatalf("Derive: got %x and %x for two purposes, want 32 distinct bytes", a, b)
	}
	if string(a) != string(k1b.Derive("a")) {
		t.Fatal("Derive: another Key of the same material derived another key")
	}
	if string(a) == string(k2.Derive("a")) {
		t.Fatal("Derive: two keys derived the same key")
	}
}
