package pki_test

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/secureboot"
)

func TestSecureBootKeyCreatedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	k1, err := pki.LoadSecureBootKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Generated {
		t.Fatal("first load: Generated false, want true")
	}
	st, err := os.Stat(filepath.Join(dir, pki.SecureBootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	k2, err := pki.LoadSecureBootKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Generated || !k2.Cert.Equal(k1.Cert) {
		t.Fatalf("second load: generated %v, same certificate %v; want false, true", k2.Generated, k2.Cert.Equal(k1.Cert))
	}
	c, err := pki.LoadSecureBootCert(dir)
	if err != nil || !c.Equal(k1.Cert) {
		t.Fatalf("LoadSecureBootCert: %v, same %v", err, c != nil && c.Equal(k1.Cert))
	}
	if k1.Cert.PublicKey.(*rsa.PublicKey).N.BitLen() != 2048 {
		t.Errorf("key size %d, want 2048", k1.Cert.PublicKey.(*rsa.PublicKey).N.BitLen())
	}
}

// An operator's own key (PKCS#1, as openssl genrsa writes it) is used as
// it is; half a pair, or a certificate of another key, is refused.
func TestSecureBootKeyBroughtByOperator(t *testing.T) {
	dir := t.TempDir()
	key, cert, err := secureboot.NewKey("operator db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	writeF(t, filepath.Join(dir, pki.SecureBootCertFile), certPEM)
	if _, err := pki.LoadSecureBootKey(dir); err == nil || !strings.Contains(err.Error(), "without") {
		t.Fatalf("certificate without key: %v, want an error naming the missing file", err)
	}
	writeF(t, filepath.Join(dir, pki.SecureBootKeyFile), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	k, err := pki.LoadSecureBootKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k.Generated || k.Cert.Subject.CommonName != "operator db" {
		t.Fatalf("got generated %v, CN %q; want the operator's", k.Generated, k.Cert.Subject.CommonName)
	}
	_, other, err := secureboot.NewKey("other", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	writeF(t, filepath.Join(dir, pki.SecureBootCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Raw}))
	if _, err := pki.LoadSecureBootKey(dir); err == nil || !strings.Contains(err.Error(), "is not the certificate of the key") {
		t.Fatalf("mismatched pair: %v", err)
	}
}

func writeF(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
