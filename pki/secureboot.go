package pki

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/eimhq/eim/secureboot"
)

// Files of the Secure Boot db key, in the directory given to
// LoadSecureBootKey.
const (
	SecureBootKeyFile  = "secureboot-db.key"
	SecureBootCertFile = "secureboot-db.crt"
)

// SecureBootKey is the deployment's Secure Boot db signing key and its
// certificate: what `eim microos build` signs EFI executables (iPXE, the
// micro-OS kernel) with, and what an operator enrolls into the machines'
// firmware db (`eim secureboot export`).
type SecureBootKey struct {
	Key  crypto.Signer
	Cert *x509.Certificate
	// Generated says the key was made by this call.
	Generated bool
}

// LoadSecureBootKey returns the Secure Boot db key of dir, creating it (RSA
// 2048, a self-signed certificate for 10 years) when neither file exists.
// An operator who brings a key puts its PEM private key (PKCS#1 or PKCS#8,
// RSA) and certificate there as secureboot-db.key and secureboot-db.crt
// before the server's first start. The key file stays in the data
// directory, mode 0600; the server never serves it.
func LoadSecureBootKey(dir string) (*SecureBootKey, error) {
	keyPath, certPath := filepath.Join(dir, SecureBootKeyFile), filepath.Join(dir, SecureBootCertFile)
	kb, kerr := os.ReadFile(keyPath)
	cb, cerr := os.ReadFile(certPath)
	switch {
	case kerr == nil && cerr == nil:
		return parseSecureBootKey(kb, cb)
	case errors.Is(kerr, fs.ErrNotExist) && errors.Is(cerr, fs.ErrNotExist):
	case kerr != nil && !errors.Is(kerr, fs.ErrNotExist):
		return nil, fmt.Errorf("secure boot key: %w", kerr)
	case cerr != nil && !errors.Is(cerr, fs.ErrNotExist):
		return nil, fmt.Errorf("secure boot certificate: %w", cerr)
	case kerr != nil:
		return nil, fmt.Errorf("secure boot key: %s exists without %s: put both, or neither (EIM then makes them)", certPath, keyPath)
	default:
		return nil, fmt.Errorf("secure boot key: %s exists without %s: put both, or neither (EIM then makes them)", keyPath, certPath)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	key, cert, err := secureboot.NewKey("EIM Secure Boot db", time.Now(), 10)
	if err != nil {
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	// O_EXCL: of two processes creating it at once, one key wins and the
	// other reads it (once its certificate is there too).
	f, err := os.OpenFile(keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return waitSecureBootKey(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
	}
	if err != nil {
		os.Remove(keyPath)
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	return &SecureBootKey{Key: key, Cert: cert, Generated: true}, nil
}

// waitSecureBootKey reads the key another process is writing, polling
// for its certificate with a deadline.
func waitSecureBootKey(dir string) (*SecureBootKey, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		kb, kerr := os.ReadFile(filepath.Join(dir, SecureBootKeyFile))
		cb, cerr := os.ReadFile(filepath.Join(dir, SecureBootCertFile))
		if kerr == nil && cerr == nil {
			if k, err := parseSecureBootKey(kb, cb); err == nil || time.Now().After(deadline) {
				return k, err
			}
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("secure boot key: another process is creating it and did not finish: %w", errors.Join(kerr, cerr))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func parseSecureBootKey(keyPEM, certPEM []byte) (*SecureBootKey, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("secure boot key %s: no PEM block", SecureBootKeyFile)
	}
	var key *rsa.PrivateKey
	switch kb.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("secure boot key %s: %w", SecureBootKeyFile, err)
		}
		key = k
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("secure boot key %s: %w", SecureBootKeyFile, err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("secure boot key %s: want RSA (what UEFI firmware verifies), got %T", SecureBootKeyFile, k)
		}
		key = rk
	default:
		return nil, fmt.Errorf("secure boot key %s: PEM block %q, want an unencrypted \"PRIVATE KEY\" or \"RSA PRIVATE KEY\"", SecureBootKeyFile, kb.Type)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("secure boot certificate %s: no PEM CERTIFICATE block", SecureBootCertFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("secure boot certificate %s: %w", SecureBootCertFile, err)
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, fmt.Errorf("secure boot certificate %s is not the certificate of the key %s", SecureBootCertFile, SecureBootKeyFile)
	}
	return &SecureBootKey{Key: key, Cert: cert}, nil
}

// LoadSecureBootCert reads only the certificate (what the server needs to
// check the artifacts it serves).
func LoadSecureBootCert(dir string) (*x509.Certificate, error) {
	b, err := os.ReadFile(filepath.Join(dir, SecureBootCertFile))
	if err != nil {
		return nil, fmt.Errorf("secure boot certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("secure boot certificate %s: no PEM CERTIFICATE block", SecureBootCertFile)
	}
	return x509.ParseCertificate(blk.Bytes)
}
