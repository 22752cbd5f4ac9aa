// Package seal encrypts the secrets EIM must be able to read back (a
// cluster's join token and connect token, which nodes are given; a
// webhook's secret, which signs its deliveries) before
// they reach the database, so that a copy of the database — a backup, a
// replica, a dump for support — does not carry them in the clear. Secrets
// EIM only checks are stored as hashes instead (node credentials, connect
// credentials, enrollment tokens) and need no key.
//
// The key is 32 random bytes (AES-256-GCM), in a file: DataDir/secrets.key,
// created on first start, or the operator's (--secrets-key, e.g. a
// Kubernetes Secret every replica mounts). A sealed value is bound to
// what it is for (the associated data: its project, owner and purpose),
// so that a ciphertext copied into another row does not open there.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/eimhq/eim"
)

// KeyFile is the key's file in the data directory.
const KeyFile = "secrets.key"

// version prefixes a sealed value: the format, and room for a key
// rotation later.
const version = 1

// Key seals and opens values.
type Key struct {
	aead cipher.AEAD
	id   string
	// derive is the root of the keys Derive makes: an HMAC of the key
	// material, so that no derived key reveals it or another one.
	derive []byte
}

// New returns a Key for 32 bytes of key material.
func New(key []byte) (*Key, error) {
	if len(key) != 32 {
		return nil, eim.Errorf(eim.EINVALID, "secrets key: want 32 bytes, got %d", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	d := hmac.New(sha256.New, key)
	d.Write([]byte("eim-seal-derive"))
	return &Key{aead: aead, id: hex.EncodeToString(sum[:4]), derive: d.Sum(nil)}, nil
}

// Derive returns 32 bytes of key material for purpose (e.g. an HMAC key
// that signs URLs), the same in every process holding this key and
// independent of the key for every other purpose and of the sealing.
func (k *Key) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.derive)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// ID names the key (a digest of it) in logs, never the key.
func (k *Key) ID() string { return k.id }

// Seal encrypts plaintext for the purpose ad names.
func (k *Key) Seal(plaintext []byte, ad string) []byte {
	out := make([]byte, 1+k.aead.NonceSize(), 1+k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	out[0] = version
	if _, err := rand.Read(out[1:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k.aead.Seal(out, out[1:], plaintext, []byte(ad))
}

// Open decrypts what Seal made for the same purpose.
func (k *Key) Open(sealed []byte, ad string) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < 1+n+k.aead.Overhead() || sealed[0] != version {
		return nil, errors.New("seal: not a sealed value")
	}
	pt, err := k.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(ad))
	if err != nil {
		return nil, errors.New("seal: the value does not open with this key (another deployment's key, or the value was moved)")
	}
	return pt, nil
}

// Load reads the operator's key file (never writing it): 64 hex digits. It
// may be readable by its group (a Secret mounted for a pod's fsGroup), not
// by others.
func Load(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o007 != 0 {
		return nil, eim.Errorf(eim.EINVALID, "secrets key %s is accessible by others (mode %04o); make it readable by its owner (and group) only, e.g. chmod 640", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != 32 {
		return nil, eim.Errorf(eim.EINVALID, "secrets key %s: want 64 hex digits (32 bytes; e.g. openssl rand -hex 32)", path)
	}
	return New(raw)
}

// LoadDir reads DataDir/secrets.key, creating it (mode 0600) on first
// start; when two processes create it at once, one key wins for both.
func LoadDir(dataDir string) (*Key, error) {
	path := filepath.Join(dataDir, KeyFile)
	k, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dataDir, ".secrets.key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("secrets key: %w", werr)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return Load(path)
}

// textPrefix marks a value sealed by SealText: a stored value without it
// was written before sealing existed (or without a key) and is its own
// plaintext.
const textPrefix = "eim-sealed:v1:"

// SealText seals a secret kept in a text column: textPrefix and the
// sealed bytes in base64. A nil Key returns s unchanged.
func (k *Key) SealText(s, ad string) string {
	if k == nil {
		return s
	}
	return textPrefix + base64.RawStdEncoding.EncodeToString(k.Seal([]byte(s), ad))
}

// OpenText returns the secret SealText made for the same purpose; a value
// that was stored unsealed is returned as it is.
func (k *Key) OpenText(v, ad string) (string, error) {
	rest, ok := strings.CutPrefix(v, textPrefix)
	if !ok {
		return v, nil
	}
	if k == nil {
		return "", errors.New("seal: the value is sealed and no secrets key is loaded")
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return "", errors.New("seal: not a sealed value")
	}
	pt, err := k.Open(raw, ad)
	if err != nil {
		return "", err
	}
	return string(pt), nil
}

// IsSealedText reports whether v is a value SealText made.
func IsSealedText(v string) bool { return strings.HasPrefix(v, textPrefix) }
