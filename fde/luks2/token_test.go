package luks2_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

func TestTokens(t *testing.T) {
	dev := newMem(devSize)
	if _, err := luks2.Format(dev, devSize, []byte("k"), luks2.Options{KDF: fastPBKDF2}); err != nil {
		t.Fatal(err)
	}
	blob := []byte("ETS\x01 a sealed blob \x00\xff")
	id, err := luks2.AddToken(dev, "eim-tpm2", []int{0}, blob)
	if err != nil || id != 0 {
		t.Fatalf("AddToken: got %d, %v; want 0", id, err)
	}
	h, err := luks2.ReadHeader(dev)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := h.Token("eim-tpm2")
	if !ok || tok.ID != 0 || len(tok.Keyslots) != 1 || tok.Keyslots[0] != 0 || !bytes.Equal(tok.Data, blob) {
		t.Fatalf("Token: got %+v, %v", tok, ok)
	}
	if _, err := luks2.Unlock(dev, []byte("k")); err != nil {
		t.Fatalf("Unlock with a token: %v", err)
	}
	for _, tc := range []struct {
		name  string
		typ   string
		slots []int
		want  string
	}{
		{"no type", "", []int{0}, `token type ""`},
		{"cryptsetup's", "luks2-keyring", []int{0}, `token type "luks2-keyring"`},
		{"no keyslot", "eim-tpm2", []int{3}, "keyslot 3 does not exist"},
	} {
		if _, err := luks2.AddToken(dev, tc.typ, tc.slots, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A token with fields of its program's own (as systemd's).
	id, err = luks2.AddTokenFields(dev, "some-tool", []int{0}, map[string]any{"tool-pcrs": []int{7}, "tool-pin": false, "tool-blob": "AAEC"})
	if err != nil || id != 1 {
		t.Fatalf("AddTokenFields: got %d, %v; want 1", id, err)
	}
	h, err = luks2.ReadHeader(dev)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok = h.Token("some-tool")
	if !ok || tok.ID != 1 || tok.Data != nil || len(tok.Fields) != 3 || tok.Fields["tool-blob"] != "AAEC" || tok.Fields["tool-pin"] != false {
		t.Fatalf("Token with fields: got %+v, %v", tok, ok)
	}
	if pcrs, ok := tok.Fields["tool-pcrs"].([]any); !ok || len(pcrs) != 1 || pcrs[0] != float64(7) {
		t.Fatalf("tool-pcrs: got %#v, want [7]", tok.Fields["tool-pcrs"])
	}
	if _, err := luks2.AddTokenFields(dev, "some-tool", []int{0}, map[string]any{"keyslots": []string{"1"}}); err == nil || !strings.Contains(err.Error(), `token field "keyslots"`) {
		t.Fatalf("AddTokenFields with keyslots: got %v", err)
	}
	if err := luks2.RemoveToken(dev, 1); err != nil {
		t.Fatal(err)
	}
	if err := luks2.RemoveToken(dev, 0); err != nil {
		t.Fatal(err)
	}
	if h, _ := luks2.ReadHeader(dev); len(h.Tokens) != 0 {
		t.Fatalf("after RemoveToken: got %+v", h.Tokens)
	}
	if err := luks2.RemoveToken(dev, 0); err == nil || !strings.Contains(err.Error(), "token 0: no such token") {
		t.Fatalf("RemoveToken twice: got %v", err)
	}
}

// cryptsetup keeps and shows Go's token, and Go reads a token cryptsetup
// imported.
func TestTokensCryptsetup(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img, f := newImage(t, dir)
	key := writeFile(t, dir, "k", []byte("k"))
	if _, err := luks2.Format(f, devSize, []byte("k"), luks2.Options{KDF: fastPBKDF2}); err != nil {
		t.Fatal(err)
	}
	blob := []byte("a sealed blob")
	if _, err := luks2.AddToken(f, "eim-tpm2", []int{0}, blob); err != nil {
		t.Fatal(err)
	}
	out, err := cryptsetup(t, "luksDump", img)
	if err != nil || !strings.Contains(out, "Tokens:\n  0: eim-tpm2") {
		t.Fatalf("luksDump: %v\n%s", err, out)
	}
	out, err = cryptsetup(t, "token", "export", "--token-id", "0", img)
	if err != nil || !strings.Contains(out, `"eim_data":"`+base64.StdEncoding.EncodeToString(blob)+`"`) {
		t.Fatalf("token export: %v\n%s", err, out)
	}
	json := writeFile(t, dir, "t.json", []byte(`{"type":"other-tool","keyslots":["0"],"x":1}`))
	if out, err := cryptsetup(t, "token", "import", "--json-file", json, img); err != nil {
		t.Fatalf("token import: %v\n%s", err, out)
	}
	if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", key, img); err != nil {
		t.Fatalf("open: %v\n%s", err, out)
	}
	h, err := luks2.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Tokens) != 2 || h.Tokens[1].Type != "other-tool" || h.Tokens[1].Data != nil || !bytes.Equal(h.Tokens[0].Data, blob) {
		t.Fatalf("tokens: got %+v", h.Tokens)
	}
	// Go rewrites the header with cryptsetup's token kept.
	if err := luks2.RemoveToken(f, 0); err != nil {
		t.Fatal(err)
	}
	out, err = cryptsetup(t, "token", "export", "--token-id", "1", img)
	if err != nil || !strings.Contains(out, `"type":"other-tool"`) || !strings.Contains(out, `"x":1`) {
		t.Fatalf("cryptsetup's token after Go's rewrite: %v\n%s", err, out)
	}
}

// Re-sealing after PCR 7 changed: a new TPM key in a new keyslot with its
// token, the old keyslot and its token removed; cryptsetup agrees.
func TestRemoveKeyslot(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img, f := newImage(t, dir)
	vk, _ := luks2.NewVolumeKey()
	oldKey, recovery, newKey := []byte("old tpm key"), []byte("recovery"), []byte("new tpm key")
	if _, err := luks2.Format(f, devSize, oldKey, luks2.Options{KDF: fastPBKDF2, VolumeKey: vk}); err != nil {
		t.Fatal(err)
	}
	if _, err := luks2.AddKeyVolumeKey(f, vk, recovery, fastPBKDF2); err != nil {
		t.Fatal(err)
	}
	if _, err := luks2.AddToken(f, "eim-tpm2", []int{0}, []byte("old blob")); err != nil {
		t.Fatal(err)
	}
	slot, err := luks2.AddKey(f, recovery, newKey, fastPBKDF2)
	if err != nil || slot != 2 {
		t.Fatalf("AddKey: got %d, %v", slot, err)
	}
	if _, err := luks2.AddToken(f, "eim-tpm2", []int{slot}, []byte("new blob")); err != nil {
		t.Fatal(err)
	}
	if err := luks2.RemoveKeyslot(f, 0); err != nil {
		t.Fatal(err)
	}
	h, err := luks2.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := h.Token("eim-tpm2")
	if len(h.Keyslots) != 2 || len(h.Tokens) != 1 || !ok || string(tok.Data) != "new blob" {
		t.Fatalf("after RemoveKeyslot: keyslots %+v, tokens %+v", h.Keyslots, h.Tokens)
	}
	if _, err := luks2.Unlock(f, oldKey); err == nil {
		t.Fatal("the removed keyslot's key still opens the volume")
	}
	// Its key material is gone, not only its header entry.
	area := make([]byte, 258048)
	if _, err := f.ReadAt(area, 32768); err != nil || !bytes.Equal(area, make([]byte, len(area))) {
		t.Fatalf("keyslot 0's area is not wiped (%v)", err)
	}
	for _, k := range [][]byte{recovery, newKey} {
		kf := writeFile(t, dir, "k", k)
		if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img); err != nil {
			t.Fatalf("cryptsetup open with %q: %v\n%s", k, err, out)
		}
	}
	kf := writeFile(t, dir, "k", oldKey)
	if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img); err == nil {
		t.Fatalf("cryptsetup opened with the removed key:\n%s", out)
	}
	if err := luks2.RemoveKeyslot(f, 0); err == nil || !strings.Contains(err.Error(), "keyslot 0: no such keyslot") {
		t.Fatalf("RemoveKeyslot twice: got %v", err)
	}
	if err := luks2.RemoveKeyslot(f, 1); err != nil {
		t.Fatal(err)
	}
	if err := luks2.RemoveKeyslot(f, 2); err == nil || !strings.Contains(err.Error(), "the last one") {
		t.Fatalf("RemoveKeyslot of the last: got %v", err)
	}
}
