package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/secureboot"
)

// eim secureboot export writes the deployment's db certificate (the one
// the data directory's key signs with) as PEM, DER and an EFI signature
// list, and, given a KEK, the signed db update; it never writes the key.
func TestSecureBootExport(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	kek, kekCert, err := secureboot.NewKey("platform KEK", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	kekKeyFile, kekCertFile := filepath.Join(data, "kek.key"), filepath.Join(data, "kek.crt")
	os.WriteFile(kekKeyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(kek)}), 0o600)
	os.WriteFile(kekCertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kekCert.Raw}), 0o600)
	var stdout bytes.Buffer
	if err := Main(context.Background(), []string{"secureboot", "export", "--data-dir", data, "--out", out,
		"--kek-key", kekKeyFile, "--kek-cert", kekCertFile}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	sb, err := pki.LoadSecureBootKey(data)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Generated {
		t.Fatal("export did not create the key in the data directory")
	}
	der, _ := os.ReadFile(filepath.Join(out, "db.cer"))
	if !bytes.Equal(der, sb.Cert.Raw) {
		t.Error("db.cer is not the data directory's certificate")
	}
	crt, _ := os.ReadFile(filepath.Join(out, "db.crt"))
	if blk, _ := pem.Decode(crt); blk == nil || !bytes.Equal(blk.Bytes, sb.Cert.Raw) {
		t.Error("db.crt is not the certificate in PEM")
	}
	esl, _ := os.ReadFile(filepath.Join(out, "db.esl"))
	if !bytes.Equal(esl, secureboot.SignatureList(sb.Cert.Raw, mustParseGUID(t, defaultOwner))) {
		t.Error("db.esl is not the certificate's signature list")
	}
	auth, _ := os.ReadFile(filepath.Join(out, "db.auth"))
	if len(auth) < 40+len(esl) || !bytes.HasSuffix(auth, esl) {
		t.Errorf("db.auth (%d bytes) does not carry the signature list", len(auth))
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(out, e.Name()))
		if bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", e.Name())
		}
	}
	if !strings.Contains(stdout.String(), certFingerprint(sb.Cert)) {
		t.Errorf("output lacks the certificate's fingerprint:\n%s", stdout.String())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"secureboot", "export", "--data-dir", data}, "--out is required"},
		{[]string{"secureboot", "export", "--data-dir", data, "--out", out, "--kek-key", kekKeyFile}, "go together"},
		{[]string{"secureboot", "export", "--data-dir", data, "--out", out, "--owner", "x"}, "--owner"},
		{[]string{"secureboot", "frob"}, `unknown verb "frob"`},
	} {
		err := Main(context.Background(), c.args, &stdout, &stdout)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("eim %q: got %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

func mustParseGUID(t *testing.T, s string) secureboot.GUID {
	t.Helper()
	g, err := secureboot.ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
