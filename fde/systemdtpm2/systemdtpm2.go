// Package systemdtpm2 writes and reads the systemd-tpm2 LUKS2 token: the
// token systemd-cryptenroll --tpm2-device writes and systemd-cryptsetup
// reads to unlock a volume with the TPM, nobody there, in any systemd-based
// initramfs (dracut's, mkosi's, Debian's and Ubuntu's with systemd,
// Fedora's). It is the token of systemd 252, Debian bookworm's; later
// systemd reads it too. A volume EIM encrypts carries one for keyslot 0:
//
//	{"type": "systemd-tpm2", "keyslots": ["0"],
//	 "tpm2-blob": "<base64 of the sealed object: TPM2B_PRIVATE, TPM2B_PUBLIC>",
//	 "tpm2-pcrs": [7], "tpm2-pcr-bank": "sha256", "tpm2-primary-alg": "ecc",
//	 "tpm2-policy-hash": "<hex of the policy digest>", "tpm2-pin": false}
//
// The keyslot's passphrase is the unsealed secret (32 random bytes) in
// base64, standard alphabet with padding, as systemd-cryptenroll enrolls it
// and systemd-cryptsetup presents it. The TPM side is fde/tpmseal's.
//
// The API:
//
//	NewKey(tpm io.ReadWriter, pcrs []int) (passphrase []byte, s *tpmseal.Sealed, err error)
//	AddToken(dev luks2.Device, keyslot int, s *tpmseal.Sealed) (id int, err error)
//	Parse(t luks2.Token) (*Token, error)
//	Unlock(tpm io.ReadWriter, h *luks2.Header) (passphrase []byte, err error)
//	Passphrase(secret []byte) []byte
//
// Errors: ErrNoToken (the volume has none), ErrBadToken (a token this
// package cannot read or use, saying why), and tpmseal's (ErrPolicy,
// ErrOtherTPM, …) from the unseal; branch with errors.Is.
package systemdtpm2

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/tpmseal"
)

// TokenType is the type of systemd's TPM2 token.
const TokenType = "systemd-tpm2"

// SecretSize is the size of the sealed secret, systemd's.
const SecretSize = 32

// Errors callers branch on.
var (
	ErrNoToken  = errors.New("systemdtpm2: the volume has no systemd-tpm2 token")
	ErrBadToken = errors.New("systemdtpm2: systemd-tpm2 token")
)

// Token is a systemd-tpm2 token as systemd 252 reads it.
type Token struct {
	ID      int // the LUKS2 token ID
	Keyslot int // the keyslot it opens (the first it names, as systemd takes it)
	Sealed  tpmseal.Sealed
}

// Passphrase is the keyslot passphrase of secret: its base64.
func Passphrase(secret []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(secret))
}

// NewKey makes a random secret, seals it to the TPM under the SHA-256 PCRs
// pcrs (nil: PCR 7), and returns the passphrase of the keyslot it opens and
// what the token keeps.
func NewKey(tpm io.ReadWriter, pcrs []int) (passphrase []byte, s *tpmseal.Sealed, err error) {
	secret := make([]byte, SecretSize)
	defer clear(secret)
	if _, err := rand.Read(secret); err != nil {
		return nil, nil, err
	}
	s, err = tpmseal.Seal(tpm, secret, pcrs)
	if err != nil {
		return nil, nil, err
	}
	return Passphrase(secret), s, nil
}

// AddToken writes s to the volume on dev as the systemd-tpm2 token of
// keyslot, and returns the token's ID.
func AddToken(dev luks2.Device, keyslot int, s *tpmseal.Sealed) (int, error) {
	return luks2.AddTokenFields(dev, TokenType, []int{keyslot}, map[string]any{
		"tpm2-blob":        base64.StdEncoding.EncodeToString(s.Blob),
		"tpm2-pcrs":        s.PCRs,
		"tpm2-pcr-bank":    s.Bank,
		"tpm2-primary-alg": s.PrimaryAlg,
		"tpm2-policy-hash": hex.EncodeToString(s.PolicyHash),
		"tpm2-pin":         false,
	})
}

// Parse reads t, a systemd-tpm2 token, as systemd 252 reads it, and
// refuses what EIM cannot unseal with nobody there: a PIN, a signed PCR
// policy, a pcrlock policy, a blob sealed under the persistent SRK of
// systemd 254 and later.
func Parse(t luks2.Token) (*Token, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %d: %s", ErrBadToken, t.ID, fmt.Sprintf(format, a...))
	}
	if t.Type != TokenType {
		return nil, bad("type %q, not %s", t.Type, TokenType)
	}
	if len(t.Keyslots) == 0 {
		return nil, bad("names no keyslot")
	}
	out := &Token{ID: t.ID, Keyslot: t.Keyslots[0]}
	f := t.Fields

	pcrs, ok := f["tpm2-pcrs"].([]any)
	if !ok {
		return nil, bad("tpm2-pcrs missing or not an array")
	}
	for _, v := range pcrs {
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) || n < 0 || n > 23 {
			return nil, bad("tpm2-pcrs: %v is not a PCR (0 to 23)", v)
		}
		out.Sealed.PCRs = append(out.Sealed.PCRs, int(n))
	}
	for field, dst := range map[string]*string{"tpm2-pcr-bank": &out.Sealed.Bank, "tpm2-primary-alg": &out.Sealed.PrimaryAlg} {
		// Both optional: systemd before 250 wrote neither.
		if v, present := f[field]; present {
			s, ok := v.(string)
			if !ok {
				return nil, bad("%s is not a string", field)
			}
			*dst = s
		}
	}
	blob, ok := f["tpm2-blob"].(string)
	if !ok {
		return nil, bad("tpm2-blob missing or not a string")
	}
	var err error
	if out.Sealed.Blob, err = base64.StdEncoding.DecodeString(blob); err != nil {
		return nil, bad("tpm2-blob is not base64: %v", err)
	}
	hash, ok := f["tpm2-policy-hash"].(string)
	if !ok {
		return nil, bad("tpm2-policy-hash missing or not a string")
	}
	if out.Sealed.PolicyHash, err = hex.DecodeString(hash); err != nil {
		return nil, bad("tpm2-policy-hash is not hex: %v", err)
	}
	if v, present := f["tpm2-pin"]; present {
		pin, ok := v.(bool)
		if !ok {
			return nil, bad("tpm2-pin is not a boolean")
		}
		if pin {
			return nil, bad("it needs a PIN (systemd-cryptenroll --tpm2-with-pin); EIM unlocks with nobody there to type one")
		}
	}
	for field, what := range map[string]string{
		"tpm2_pubkey":      "a signed PCR policy (systemd-cryptenroll --tpm2-public-key)",
		"tpm2_pubkey_pcrs": "a signed PCR policy (systemd-cryptenroll --tpm2-public-key)",
		"tpm2_pcrlock":     "a pcrlock policy (systemd 255 and later)",
		"tpm2_srk":         "a blob sealed under the TPM's persistent SRK (systemd 254 and later)",
		"tpm2_salt":        "a salted PIN (systemd 254 and later)",
	} {
		if v, present := f[field]; present && v != nil && v != false {
			return nil, bad("it uses %s, which EIM does not unseal", what)
		}
	}
	return out, nil
}

// Unlock unseals the secret of the volume's systemd-tpm2 token with the TPM
// and returns the passphrase of the keyslot it opens. With several tokens,
// the first that unseals wins; when none does, the error says why for
// each.
func Unlock(tpm io.ReadWriter, h *luks2.Header) ([]byte, error) {
	var errs []error
	for _, t := range h.Tokens {
		if t.Type != TokenType {
			continue
		}
		tok, err := Parse(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		secret, err := tpmseal.Unseal(tpm, &tok.Sealed)
		if err != nil {
			errs = append(errs, fmt.Errorf("token %d (keyslot %d): %w", tok.ID, tok.Keyslot, err))
			continue
		}
		pass := Passphrase(secret)
		clear(secret)
		return pass, nil
	}
	switch len(errs) {
	case 0:
		return nil, ErrNoToken
	case 1:
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}
