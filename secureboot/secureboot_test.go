package secureboot_test

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	_ "crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/secureboot"
)

// ipxeEFI is Debian's iPXE EFI binary (package ipxe): a real, unsigned
// PE32+ image.
const ipxeEFI = "/usr/lib/ipxe/ipxe.efi"

// need skips the test without tool (or file), or fails it when
// EIM_REQUIRE_SECUREBOOT is set (.ci/run installs them and sets it).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		var err error
		if strings.HasPrefix(tool, "/") {
			_, err = os.Stat(tool)
		} else {
			_, err = exec.LookPath(tool)
		}
		if err == nil {
			continue
		}
		if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
			t.Fatalf("%s is missing and EIM_REQUIRE_SECUREBOOT is set (Debian: sbsigntool, efitools, ipxe, ovmf)", tool)
		}
		t.Skipf("%s is missing (Debian: sbsigntool, efitools, ipxe, ovmf)", tool)
	}
}

// keyFiles makes a db key and writes its certificate (PEM) and key (PKCS#1
// PEM, what sbsign reads) into dir.
func keyFiles(t *testing.T, dir, cn string) (*rsa.PrivateKey, *x509.Certificate, string, string) {
	t.Helper()
	key, cert, err := secureboot.NewKey(cn, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	write(t, certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	write(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	return key, cert, certPath, keyPath
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// TestSignCheckedBySbverify signs Debian's iPXE with this package and has
// sbsigntool's sbverify (OpenSSL's PKCS#7 and its own PE digest) check the
// result: it verifies with the signing certificate, not with another one,
// and not after one byte of the image changed. This package's Verify
// agrees each time, and also accepts what sbsign signs.
func TestSignCheckedBySbverify(t *testing.T) {
	need(t, "sbverify", "sbsign", ipxeEFI)
	dir := t.TempDir()
	key, cert, certPath, keyPath := keyFiles(t, dir, "db")
	_, other, otherPath, _ := keyFiles(t, dir, "other")
	unsigned := read(t, ipxeEFI)
	if err := secureboot.Verify(unsigned, cert); !errors.Is(err, secureboot.ErrUnsigned) {
		t.Fatalf("Verify(unsigned iPXE) = %v, want ErrUnsigned", err)
	}
	signed, err := secureboot.Sign(unsigned, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ipxe-signed.efi")
	write(t, path, signed)
	if out, err := run("sbverify", "--cert", certPath, path); err != nil {
		t.Fatalf("sbverify --cert db.crt: %v\n%s", err, out)
	}
	if err := secureboot.Verify(signed, cert); err != nil {
		t.Fatalf("Verify(signed, its cert) = %v", err)
	}
	if out, err := run("sbverify", "--cert", otherPath, path); err == nil {
		t.Fatalf("sbverify with another certificate accepted the image:\n%s", out)
	}
	if err := secureboot.Verify(signed, other); err == nil {
		t.Fatal("Verify with another certificate accepted the image")
	}
	// One byte of code changed after signing.
	tampered := append([]byte(nil), signed...)
	tampered[len(tampered)/3] ^= 0x01
	tpath := filepath.Join(dir, "ipxe-tampered.efi")
	write(t, tpath, tampered)
	if out, err := run("sbverify", "--cert", certPath, tpath); err == nil {
		t.Fatalf("sbverify accepted a tampered image:\n%s", out)
	}
	if err := secureboot.Verify(tampered, cert); err == nil || !strings.Contains(err.Error(), "changed after signing") {
		t.Fatalf("Verify(tampered) = %v, want the digest mismatch", err)
	}
	// Signing again replaces the signature: one, by the new key.
	resigned, err := secureboot.Sign(signed, other, mustKey(t, dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	rpath := filepath.Join(dir, "ipxe-resigned.efi")
	write(t, rpath, resigned)
	if out, err := run("sbverify", "--cert", otherPath, rpath); err != nil {
		t.Fatalf("sbverify of the re-signed image: %v\n%s", err, out)
	}
	if out, _ := run("sbverify", "--list", rpath); !strings.Contains(out, "signature 1\n") || strings.Contains(out, "signature 2") {
		t.Fatalf("re-signed image: sbverify --list shows, want one signature:\n%s", out)
	}
	if err := secureboot.Verify(resigned, cert); err == nil {
		t.Fatal("the re-signed image still verifies with the first key")
	}
	// sbsign's own signature verifies here too.
	spath := filepath.Join(dir, "ipxe-sbsign.efi")
	if out, err := run("sbsign", "--key", keyPath, "--cert", certPath, "--output", spath, ipxeEFI); err != nil {
		t.Fatalf("sbsign: %v\n%s", err, out)
	}
	if err := secureboot.Verify(read(t, spath), cert); err != nil {
		t.Fatalf("Verify(sbsign's signature) = %v", err)
	}
	// The Authenticode digest is the same as sbsign's: the image signed
	// by sbsign and by Sign differ only in the signature.
	im1, err := secureboot.Parse(read(t, spath))
	if err != nil {
		t.Fatal(err)
	}
	im2, err := secureboot.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := im1.Digest(crypto.SHA256), im2.Digest(crypto.SHA256); !bytes.Equal(d1, d2) {
		t.Fatalf("digest of sbsign's image %x, of Sign's %x", d1, d2)
	}
}

func mustKey(t *testing.T, dir, cn string) *rsa.PrivateKey {
	t.Helper()
	blk, _ := pem.Decode(read(t, filepath.Join(dir, cn+".key")))
	k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSignatureListIsEfitools: the .esl is byte for byte what efitools'
// cert-to-efi-sig-list writes for the same certificate and owner.
func TestSignatureListIsEfitools(t *testing.T) {
	need(t, "cert-to-efi-sig-list")
	dir := t.TempDir()
	_, cert, certPath, _ := keyFiles(t, dir, "db")
	const owner = "3b1d6e2a-1f4c-4b5e-9a0d-7c2e8f9a1b3c"
	g, err := secureboot.ParseGUID(owner)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "db.esl")
	if out, err := run("cert-to-efi-sig-list", "-g", owner, certPath, want); err != nil {
		t.Fatalf("cert-to-efi-sig-list: %v\n%s", err, out)
	}
	if got := secureboot.SignatureList(cert.Raw, g); !bytes.Equal(got, read(t, want)) {
		t.Fatalf("SignatureList:\n got %x\nwant %x", got, read(t, want))
	}
	if g.String() != owner {
		t.Fatalf("GUID round trip: got %s, want %s", g, owner)
	}
	for _, bad := range []string{"", "3b1d6e2a1f4c4b5e9a0d7c2e8f9a1b3c", "3b1d6e2a-1f4c-4b5e-9a0d-7c2e8f9a1b3g"} {
		if _, err := secureboot.ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) accepted", bad)
		}
	}
}

// TestAuthVariableVerifiesWithOpenSSL: the .auth's PKCS#7 signature
// verifies, with OpenSSL, over the message UEFI firmware hashes (the
// variable name in UTF-16, its vendor GUID, attributes, the timestamp and
// the signature list), with the KEK's certificate; and its layout is that
// of sign-efi-sig-list's file for the same input and time.
func TestAuthVariableVerifiesWithOpenSSL(t *testing.T) {
	need(t, "openssl", "sign-efi-sig-list")
	dir := t.TempDir()
	_, cert, _, _ := keyFiles(t, dir, "db")
	kek, kekCert, kekPath, kekKeyPath := keyFiles(t, dir, "kek")
	esl := secureboot.SignatureList(cert.Raw, mustGUID(t, "3b1d6e2a-1f4c-4b5e-9a0d-7c2e8f9a1b3c"))
	at := time.Date(2026, 12, 2, 10, 11, 12, 0, time.UTC)
	auth, err := secureboot.AuthVariable("db", esl, at, false, kekCert, kek)
	if err != nil {
		t.Fatal(err)
	}
	// EFI_TIME, WIN_CERTIFICATE_UEFI_GUID (length, revision, type, GUID),
	// PKCS#7, the data.
	certLen := int(uint32(auth[16]) | uint32(auth[17])<<8 | uint32(auth[18])<<16 | uint32(auth[19])<<24)
	p7 := auth[16+24 : 16+certLen]
	if !bytes.Equal(auth[16+certLen:], esl) {
		t.Fatal("the .auth does not end with the signature list")
	}
	msg := []byte{'d', 0, 'b', 0}
	msg = append(msg, 0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f)
	msg = append(msg, 0x27, 0, 0, 0)
	msg = append(msg, auth[:16]...)
	msg = append(msg, esl...)
	write(t, filepath.Join(dir, "p7.der"), p7)
	write(t, filepath.Join(dir, "msg.bin"), msg)
	if out, err := run("openssl", "smime", "-verify", "-binary", "-inform", "DER", "-in", filepath.Join(dir, "p7.der"),
		"-content", filepath.Join(dir, "msg.bin"), "-CAfile", kekPath, "-purpose", "any", "-out", "/dev/null"); err != nil {
		t.Fatalf("openssl smime -verify: %v\n%s", err, out)
	}
	msg[len(msg)-1] ^= 1
	write(t, filepath.Join(dir, "msg.bin"), msg)
	if out, err := run("openssl", "smime", "-verify", "-binary", "-inform", "DER", "-in", filepath.Join(dir, "p7.der"),
		"-content", filepath.Join(dir, "msg.bin"), "-CAfile", kekPath, "-purpose", "any", "-out", "/dev/null"); err == nil {
		t.Fatalf("openssl verified a changed message:\n%s", out)
	}
	// sign-efi-sig-list's file for the same input: the same timestamp and
	// header fields around its own PKCS#7.
	eslPath, ref := filepath.Join(dir, "db.esl"), filepath.Join(dir, "db.auth")
	write(t, eslPath, esl)
	if out, err := run("sign-efi-sig-list", "-t", "2026-12-02 10:11:12", "-k", kekKeyPath, "-c", kekPath, "db", eslPath, ref); err != nil {
		t.Fatalf("sign-efi-sig-list: %v\n%s", err, out)
	}
	want := read(t, ref)
	if !bytes.Equal(want[:16], auth[:16]) {
		t.Errorf("EFI_TIME: got %x, want sign-efi-sig-list's %x", auth[:16], want[:16])
	}
	if !bytes.Equal(want[20:40], auth[20:40]) {
		t.Errorf("WIN_CERTIFICATE_UEFI_GUID revision, type, GUID: got %x, want %x", auth[20:40], want[20:40])
	}
	if !bytes.HasSuffix(want, esl) {
		t.Error("sign-efi-sig-list's file does not end with the list")
	}
	if _, err := secureboot.AuthVariable("PK", esl, at, false, kekCert, kek); err == nil {
		t.Error("AuthVariable signed PK")
	}
}

func mustGUID(t *testing.T, s string) secureboot.GUID {
	t.Helper()
	g, err := secureboot.ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSignDistributionKernel re-signs a distribution's signed kernel (the
// newest /boot/vmlinuz-*, Debian's linux-image-amd64, or the file
// EIM_SECUREBOOT_KERNEL names): the distribution's signature is replaced
// by the deployment's, which sbverify accepts, and only it is there.
func TestSignDistributionKernel(t *testing.T) {
	path := os.Getenv("EIM_SECUREBOOT_KERNEL")
	if path == "" {
		ks, _ := filepath.Glob("/boot/vmlinuz-*")
		if len(ks) == 0 {
			t.Skip("no /boot/vmlinuz-* (Debian's linux-image-amd64) and no EIM_SECUREBOOT_KERNEL")
		}
		path = ks[len(ks)-1]
	}
	need(t, "sbverify")
	dir := t.TempDir()
	key, cert, certPath, _ := keyFiles(t, dir, "db")
	signed, err := secureboot.Sign(read(t, path), cert, key)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := filepath.Join(dir, "vmlinuz")
	write(t, out, signed)
	if o, err := run("sbverify", "--cert", certPath, out); err != nil {
		t.Fatalf("sbverify --cert of the re-signed %s: %v\n%s", path, err, o)
	}
	if o, _ := run("sbverify", "--list", out); strings.Contains(o, "signature 2") {
		t.Fatalf("the re-signed kernel has more than one signature:\n%s", o)
	}
}
