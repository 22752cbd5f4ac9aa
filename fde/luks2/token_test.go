package luks2_test

import (
	"os"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

// A token added to a volume is read back, keeps the volume opening, and is
// what cryptsetup shows (it keeps tokens of types it does not know); bad
// tokens are refused naming what is wrong.
func TestToken(t *testing.T) {
	dir := t.TempDir()
	img, f := newImage(t, dir)
	key := []byte("tpm key 0123456789abcdef")
	if _, err := luks2.Format(f, devSize, key, luks2.Options{KDF: fastPBKDF2, Label: "eim-root"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		typ      string
		keyslots []int
		fields   map[string]string
		want     string
	}{
		{"cryptsetup's type", "luks2-keyring", []int{0}, nil, "luks2-"},
		{"no type", "", []int{0}, nil, "token type"},
		{"no such keyslot", "eim-tpm2", []int{3}, nil, "no keyslot 3"},
		{"a field named type", "eim-tpm2", []int{0}, map[string]string{"type": "x"}, `field "type"`},
	} {
		if _, err := luks2.AddToken(f, tt.typ, tt.keyslots, tt.fields); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	id, err := luks2.AddToken(f, "eim-tpm2", []int{0}, map[string]string{"eim-tpm2-blob": "AAEC", "eim-tpm2-pcrs": "7"})
	if err != nil || id != 0 {
		t.Fatalf("AddToken: %d, %v; want 0", id, err)
	}
	if id, err := luks2.AddToken(f, "other", []int{0}, nil); err != nil || id != 1 {
		t.Fatalf("second AddToken: %d, %v; want 1", id, err)
	}
	h, err := luks2.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.FindToken("eim-tpm2")
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID != 0 || len(tok.Keyslots) != 1 || tok.Keyslots[0] != 0 || tok.Fields["eim-tpm2-blob"] != "AAEC" || tok.Fields["eim-tpm2-pcrs"] != "7" {
		t.Errorf("token: got %+v", tok)
	}
	if _, err := h.FindToken("systemd-tpm2"); err == nil {
		t.Error("FindToken of a type the volume has none of: no error")
	}
	if _, err := luks2.Unlock(f, key); err != nil {
		t.Errorf("unlock after the tokens: %v", err)
	}

	needCryptsetup(t)
	out, err := cryptsetup(t, "luksDump", img)
	if err != nil {
		t.Fatalf("cryptsetup luksDump: %v\n%s", err, out)
	}
	if !strings.Contains(out, "0: eim-tpm2") || !strings.Contains(out, "1: other") {
		t.Errorf("cryptsetup luksDump shows no tokens 0: eim-tpm2, 1: other:\n%s", out)
	}
	kf := writeFile(t, dir, "key", key)
	if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img); err != nil {
		t.Errorf("cryptsetup open --test-passphrase: %v\n%s", err, out)
	}
	_ = os.Remove(kf)
}
