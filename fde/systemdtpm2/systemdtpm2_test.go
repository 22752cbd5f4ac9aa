package systemdtpm2_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/systemdtpm2"
	"github.com/eimhq/eim/fde/tpmseal"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// The passphrase is the secret's base64, standard alphabet, padded: what
// systemd-cryptenroll enrolls and systemd-cryptsetup presents.
func TestPassphrase(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	if got, want := string(systemdtpm2.Passphrase(secret)), "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

const size = 20 << 20

func newVolume(t *testing.T, pass []byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "vol"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := luks2.Format(f, size, pass, luks2.Options{KDF: luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// A key made with NewKey, enrolled in keyslot 0 with its token, comes back
// from the token with the same TPM while PCR 7 holds; then no longer.
func TestNewKeyUnlock(t *testing.T) {
	tpm := swtpmtest.Start(t, t.TempDir())
	tpm.Extend(t, 7, digest("the firmware's db"))
	pass, sealed, err := systemdtpm2.NewKey(tpm.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pass) != 44 || pass[43] != '=' {
		t.Fatalf("passphrase %q: want the base64 of 32 bytes", pass)
	}
	f := newVolume(t, pass)
	h, err := luks2.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := systemdtpm2.Unlock(tpm.Conn, h); !errors.Is(err, systemdtpm2.ErrNoToken) {
		t.Fatalf("Unlock without a token: got %v, want ErrNoToken", err)
	}
	if id, err := systemdtpm2.AddToken(f, 0, sealed); err != nil || id != 0 {
		t.Fatalf("AddToken: got %d, %v; want token 0", id, err)
	}
	if h, err = luks2.ReadHeader(f); err != nil {
		t.Fatal(err)
	}
	lt, _ := h.Token(systemdtpm2.TokenType)
	tok, err := systemdtpm2.Parse(lt)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Keyslot != 0 || !bytes.Equal(tok.Sealed.Blob, sealed.Blob) || len(tok.Sealed.PCRs) != 1 || tok.Sealed.PCRs[0] != 7 ||
		tok.Sealed.Bank != "sha256" || tok.Sealed.PrimaryAlg != "ecc" || !bytes.Equal(tok.Sealed.PolicyHash, sealed.PolicyHash) {
		t.Fatalf("token read back: got %+v, want keyslot 0 and %+v", tok, sealed)
	}
	if lt.Fields["tpm2-pin"] != false {
		t.Fatalf("tpm2-pin: got %v, want false", lt.Fields["tpm2-pin"])
	}
	got, err := systemdtpm2.Unlock(tpm.Conn, h)
	if err != nil || !bytes.Equal(got, pass) {
		t.Fatalf("Unlock: got %q, %v; want %q", got, err, pass)
	}
	if _, err := luks2.Unlock(f, got); err != nil {
		t.Fatalf("the passphrase does not open keyslot 0: %v", err)
	}

	tpm.Extend(t, 7, digest("another db"))
	_, err = systemdtpm2.Unlock(tpm.Conn, h)
	if !errors.Is(err, tpmseal.ErrPolicy) || !strings.Contains(err.Error(), "token 0 (keyslot 0): tpmseal: PCR policy does not match: PCR 7 changed") {
		t.Fatalf("Unlock after PCR 7 changed: got %v, want ErrPolicy for token 0", err)
	}
}

func digest(s string) []byte { d := sha256.Sum256([]byte(s)); return d[:] }

// systemd252Token is the shape of the token systemd-cryptenroll 252
// writes (the blob and hash shortened).
const systemd252Token = `{"tpm2-blob":"AAECAw==","tpm2-pcrs":[7],"tpm2-pcr-bank":"sha256","tpm2-primary-alg":"ecc","tpm2-policy-hash":"00ff10","tpm2-pin":false}`

func fields(t testing.TB, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Parse reads what systemd 252 reads and refuses, saying why, what EIM
// cannot unseal with nobody there.
func TestParse(t *testing.T) {
	tok, err := systemdtpm2.Parse(luks2.Token{ID: 2, Type: "systemd-tpm2", Keyslots: []int{1}, Fields: fields(t, systemd252Token)})
	if err != nil {
		t.Fatal(err)
	}
	want := tpmseal.Sealed{Blob: []byte{0, 1, 2, 3}, PCRs: []int{7}, Bank: "sha256", PrimaryAlg: "ecc", PolicyHash: []byte{0, 0xff, 0x10}}
	if tok.ID != 2 || tok.Keyslot != 1 || !bytes.Equal(tok.Sealed.Blob, want.Blob) || !bytes.Equal(tok.Sealed.PolicyHash, want.PolicyHash) ||
		len(tok.Sealed.PCRs) != 1 || tok.Sealed.PCRs[0] != 7 || tok.Sealed.Bank != want.Bank || tok.Sealed.PrimaryAlg != want.PrimaryAlg {
		t.Fatalf("got %+v, want token 2, keyslot 1, %+v", tok, want)
	}
	// systemd before 250 wrote neither bank nor primary algorithm, nor PIN.
	old := fields(t, `{"tpm2-blob":"AAECAw==","tpm2-pcrs":[0,7],"tpm2-policy-hash":"00ff10"}`)
	if tok, err := systemdtpm2.Parse(luks2.Token{Type: "systemd-tpm2", Keyslots: []int{0}, Fields: old}); err != nil || tok.Sealed.Bank != "" || len(tok.Sealed.PCRs) != 2 {
		t.Fatalf("a token of systemd 249: got %+v, %v", tok, err)
	}

	for _, tc := range []struct {
		name   string
		change string // JSON merged into the good token's fields
		typ    string
		slots  []int
		want   string
	}{
		{"type", "", "eim-tpm2", []int{0}, `type "eim-tpm2", not systemd-tpm2`},
		{"no keyslot", "", "", nil, "names no keyslot"},
		{"no pcrs", `{"tpm2-pcrs":null}`, "", nil, "tpm2-pcrs missing or not an array"},
		{"pcr 24", `{"tpm2-pcrs":[7,24]}`, "", nil, "tpm2-pcrs: 24 is not a PCR"},
		{"pcr 1.5", `{"tpm2-pcrs":[1.5]}`, "", nil, "tpm2-pcrs: 1.5 is not a PCR"},
		{"pcr string", `{"tpm2-pcrs":["7"]}`, "", nil, "tpm2-pcrs: 7 is not a PCR"},
		{"bank", `{"tpm2-pcr-bank":256}`, "", nil, "tpm2-pcr-bank is not a string"},
		{"no blob", `{"tpm2-blob":null}`, "", nil, "tpm2-blob missing"},
		{"blob", `{"tpm2-blob":"!!"}`, "", nil, "tpm2-blob is not base64"},
		{"no hash", `{"tpm2-policy-hash":null}`, "", nil, "tpm2-policy-hash missing"},
		{"hash", `{"tpm2-policy-hash":"xyz"}`, "", nil, "tpm2-policy-hash is not hex"},
		{"pin", `{"tpm2-pin":true}`, "", nil, "it needs a PIN"},
		{"pin type", `{"tpm2-pin":"no"}`, "", nil, "tpm2-pin is not a boolean"},
		{"signed policy", `{"tpm2_pubkey":"LS0t","tpm2_pubkey_pcrs":[11]}`, "", nil, "it uses a signed PCR policy"},
		{"srk", `{"tpm2_srk":"AAEC"}`, "", nil, "it uses a blob sealed under the TPM's persistent SRK (systemd 254 and later)"},
		{"pcrlock", `{"tpm2_pcrlock":true}`, "", nil, "it uses a pcrlock policy"},
	} {
		f := fields(t, systemd252Token)
		if tc.change != "" {
			for k, v := range fields(t, tc.change) {
				if v == nil {
					delete(f, k)
				} else {
					f[k] = v
				}
			}
		}
		typ, slots := "systemd-tpm2", []int{0}
		if tc.typ != "" {
			typ = tc.typ
		}
		if tc.name == "no keyslot" {
			slots = nil
		}
		_, err := systemdtpm2.Parse(luks2.Token{ID: 3, Type: typ, Keyslots: slots, Fields: f})
		if !errors.Is(err, systemdtpm2.ErrBadToken) || !strings.Contains(err.Error(), "token 3: "+tc.want) {
			t.Errorf("%s: got %v, want ErrBadToken saying %q", tc.name, err, tc.want)
		}
	}
}

// Tokens come from disk: Parse refuses damage with ErrBadToken, never
// panics.
//
//	go test -fuzz FuzzParse ./fde/systemdtpm2
func FuzzParse(f *testing.F) {
	f.Add([]byte(systemd252Token))
	f.Add([]byte(`{"tpm2-pcrs":[1e300,-1],"tpm2-blob":"","tpm2-policy-hash":""}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var m map[string]any
		if json.Unmarshal(js, &m) != nil {
			return
		}
		tok, err := systemdtpm2.Parse(luks2.Token{Type: "systemd-tpm2", Keyslots: []int{0}, Fields: m})
		if err != nil {
			if !errors.Is(err, systemdtpm2.ErrBadToken) {
				t.Fatalf("an error other than ErrBadToken: %v", err)
			}
			return
		}
		for _, p := range tok.Sealed.PCRs {
			if p < 0 || p > 23 {
				t.Fatalf("accepted PCR %d", p)
			}
		}
	})
}
