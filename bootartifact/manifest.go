// Package bootartifact describes a set of boot artifacts (the micro-OS kernel
// and initramfs) by the size and SHA-256 of each file, and signs that
// description with the server's artifact-signing key (Ed25519), so that a
// node can check that what it booted is what the server built.
//
// The manifest is a small JSON document (manifest.json) and its signature
// a detached file (manifest.json.sig: the base64 Ed25519 signature of the
// manifest's exact bytes, prefixed with a context string so the key signs
// nothing else by mistake). It imports only the standard library: the
// agent links it.
package bootartifact

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// File names beside the artifacts.
const (
	FileName      = "manifest.json"
	SignatureName = "manifest.json.sig"
)

// The micro-OS artifacts a manifest lists.
const (
	KernelFile = "vmlinuz"
	InitrdFile = "initramfs.img"
	// UKIFile is the unified kernel image: the kernel, the same initramfs
	// and the fixed command line in one PE signed for Secure Boot, which
	// the boot script loads when the deployment requires Secure Boot.
	UKIFile = "eim-microos.efi"
)

// The micro-OS as a CD image (a BMC's virtual media): the server composes
// CDFile from the kernel, the initramfs and systemd-boot (BootLoaderFile),
// which eim microos build writes beside them. The manifest does not list
// the loader: the micro-OS checks what its kernel unpacked, not how it was
// loaded.
const (
	CDFile         = "eim-microos.iso"
	BootLoaderFile = "systemd-bootx64.efi"
)

// Version is the manifest format this package writes and reads.
const Version = 1

// context is signed before the manifest's bytes.
const context = "eim boot artifact manifest v1\n"

// File is one artifact.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest lists the artifacts of one build.
type Manifest struct {
	Version int `json:"version"`
	// KernelRelease is the kernel's release ("6.1.0-56-amd64"), which a
	// booted node compares with uname's: the kernel image itself is gone
	// from memory once it runs.
	KernelRelease string `json:"kernelRelease,omitempty"`
	Files         []File `json:"files"`
	// InitrdFiles are the regular files of the initramfs (Name is their
	// path in it), so the booted micro-OS can check what the kernel
	// unpacked: the initramfs image itself is freed after unpacking.
	InitrdFiles []File `json:"initrdFiles,omitempty"`
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	pathRE = regexp.MustCompile(`^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$`)
	sumRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Marshal encodes m as the file holds it.
func (m *Manifest) Marshal() ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (m *Manifest) check() error {
	if m.Version != Version {
		return fmt.Errorf("manifest: version %d, want %d", m.Version, Version)
	}
	if len(m.Files) == 0 {
		return errors.New("manifest: no files")
	}
	if err := checkFiles(m.Files, nameRE, "file name"); err != nil {
		return err
	}
	return checkFiles(m.InitrdFiles, pathRE, "initramfs path")
}

func checkFiles(files []File, re *regexp.Regexp, what string) error {
	seen := map[string]bool{}
	for _, f := range files {
		switch {
		case len(f.Name) > 4096 || !re.MatchString(f.Name): // no segment starts with "."
			return fmt.Errorf("manifest: %s %q is not valid", what, f.Name)
		case seen[f.Name]:
			return fmt.Errorf("manifest: %s listed twice", f.Name)
		case f.Size < 0:
			return fmt.Errorf("manifest: %s: negative size", f.Name)
		case !sumRE.MatchString(f.SHA256):
			return fmt.Errorf("manifest: %s: sha256 %q is not 64 lower-case hex digits", f.Name, f.SHA256)
		}
		seen[f.Name] = true
	}
	return nil
}

// Parse decodes and checks a manifest (without its signature: see Verify).
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Find returns the file called name.
func (m *Manifest) Find(name string) (File, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}

// Describe reads r to its end and returns its size and SHA-256 as the
// file name.
func Describe(name string, r io.Reader) (File, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", name, err)
	}
	return File{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Check reads r to its end and says whether it is f.
func (f File) Check(r io.Reader) error {
	got, err := Describe(f.Name, r)
	if err != nil {
		return err
	}
	if got.Size != f.Size || got.SHA256 != f.SHA256 {
		return fmt.Errorf("%s: got %d bytes with sha256 %s, the manifest says %d bytes with sha256 %s", f.Name, got.Size, got.SHA256, f.Size, f.SHA256)
	}
	return nil
}

// Sign returns the signature file of a marshalled manifest.
func Sign(key ed25519.PrivateKey, manifest []byte) []byte {
	sig := ed25519.Sign(key, append([]byte(context), manifest...))
	return []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
}

// Verify checks the signature file sig of the manifest bytes with pub and
// returns the manifest.
func Verify(pub ed25519.PublicKey, manifest, sig []byte) (*Manifest, error) {
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sig)))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return nil, errors.New("manifest signature: not a base64 Ed25519 signature")
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("manifest signature: not an Ed25519 public key")
	}
	if !ed25519.Verify(pub, append([]byte(context), manifest...), raw) {
		return nil, fmt.Errorf("manifest signature does not verify with key %s", KeyID(pub))
	}
	return Parse(manifest)
}

// MarshalPublicKey encodes pub as a PEM "PUBLIC KEY" (PKIX).
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKey decodes a PEM "PUBLIC KEY" holding an Ed25519 key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("artifact key: no PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("artifact key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("artifact key: want an Ed25519 key, got %T", k)
	}
	return pub, nil
}

// KeyID names a public key in messages: "sha256:" and the first 16 hex
// digits of the SHA-256 of the key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:8])
}
