package pki

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files of the artifact-signing key, in the directory given to
// LoadArtifactKey.
const (
	ArtifactKeyFile    = "artifacts.key"
	ArtifactPubKeyFile = "artifacts.pub"
)

// LoadArtifactKey returns the server's artifact-signing key (Ed25519) of
// dir, creating it on first use. It signs the manifests of the boot
// artifacts (the micro-OS kernel and initramfs), which the micro-OS checks
// against what it booted; it is apart from the CA, which an operator may
// bring without its key, and from the token-signing key, so that each key
// signs one kind of thing. The public key is written beside it
// (artifacts.pub) for operators and tools.
func LoadArtifactKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, ArtifactKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err := parseArtifactKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return key, writePublic(dir, key)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	// O_EXCL: of two processes creating it at once, one key wins and the
	// other process reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadArtifactKey(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	return key, writePublic(dir, key)
}

func parseArtifactKey(b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("want an Ed25519 key, got %T", k)
	}
	return key, nil
}

// ArtifactPublicKeyPEM encodes the public half of key as a PEM "PUBLIC KEY".
func ArtifactPublicKeyPEM(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// writePublic keeps artifacts.pub in step with the key.
func writePublic(dir string, key ed25519.PrivateKey) error {
	pub, err := ArtifactPublicKeyPEM(key)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ArtifactPubKeyFile)
	if b, err := os.ReadFile(path); err == nil && string(b) == string(pub) {
		return nil
	}
	return writeFile(path, pub, 0o644)
}
