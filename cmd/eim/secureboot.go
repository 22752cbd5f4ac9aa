package main

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/provisioning/osbuild"
	"github.com/eimhq/eim/secureboot"
)

// defaultIPXE is where Debian's ipxe package puts iPXE's EFI binary.
const defaultIPXE = "/usr/lib/ipxe/ipxe.efi"

// defaultUKIStub is where Debian's systemd-boot-efi puts systemd-stub, of
// which eim microos build makes the unified kernel image.
const defaultUKIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// defaultOwner is the signature owner GUID written into EIM's signature
// lists (any GUID serves: firmware records it, does not check it).
const defaultOwner = "6f0e5b2a-3c1d-4e8f-9a7b-e1a0b0c0d0e1"

func certFingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (c *cli) secureboot(args []string) error {
	if len(args) == 0 || args[0] != "export" {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(c.stdout, "Usage:\n  eim secureboot export --out DIR [--data-dir D] [--owner GUID] [--kek-key F --kek-cert F [--append]]\n")
			return nil
		}
		return usagef("secureboot: unknown verb %q (export)", args[0])
	}
	fs := c.flagSet("eim secureboot export", "eim secureboot export --out DIR [flags]",
		"Writes what an operator enrolls into the machines' firmware so that it runs what EIM signs:\n"+
			"the deployment's Secure Boot db certificate as db.crt (PEM) and db.cer (DER, for firmware setup\n"+
			"menus), db.esl (an EFI signature list, for efi-updatevar or KeyTool) and, given the platform's\n"+
			"KEK key and certificate, db.auth (the db update signed by the KEK, which firmware in user mode\n"+
			"accepts: efi-updatevar -f db.auth db, or KeyTool). The db key is made at the server's first\n"+
			"start (or by eim microos build) and never leaves the data directory. See docs/security.md.")
	var (
		dataDir, out, owner, kekKey, kekCert string
		appendDB                             bool
	)
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "the server's data directory (secureboot-db.key, secureboot-db.crt)")
	fs.StringVar(&out, "out", "", "directory to write db.crt, db.cer, db.esl (and db.auth) into")
	fs.StringVar(&owner, "owner", defaultOwner, "signature owner GUID of the .esl")
	fs.StringVar(&kekKey, "kek-key", "", "PEM private key of a KEK enrolled in the firmware (unencrypted RSA): signs db.auth")
	fs.StringVar(&kekCert, "kek-cert", "", "PEM certificate of that KEK")
	fs.BoolVar(&appendDB, "append", true, "db.auth adds the certificate to db (false: replaces db with it)")
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("secureboot export", pos, 0, "no arguments"); err != nil {
		return err
	}
	if out == "" {
		return usagef("secureboot export: --out is required")
	}
	if (kekKey == "") != (kekCert == "") {
		return usagef("secureboot export: --kek-key and --kek-cert go together")
	}
	g, err := secureboot.ParseGUID(owner)
	if err != nil {
		return usagef("secureboot export: --owner: %v", err)
	}
	sb, err := pki.LoadSecureBootKey(dataDir)
	if err != nil {
		return err
	}
	esl := secureboot.SignatureList(sb.Cert.Raw, g)
	files := []struct {
		name string
		data []byte
	}{
		{"db.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sb.Cert.Raw})},
		{"db.cer", sb.Cert.Raw},
		{"db.esl", esl},
	}
	if kekKey != "" {
		key, cert, err := loadKEK(kekKey, kekCert)
		if err != nil {
			return err
		}
		auth, err := secureboot.AuthVariable("db", esl, time.Now(), appendDB, cert, key)
		if err != nil {
			return err
		}
		files = append(files, struct {
			name string
			data []byte
		}{"db.auth", auth})
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := osbuild.WriteFileAtomic(filepath.Join(out, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.stdout, "Secure Boot db certificate %q, %s, valid until %s\n", sb.Cert.Subject.CommonName, certFingerprint(sb.Cert), sb.Cert.NotAfter.Format(time.DateOnly))
	for _, f := range files {
		fmt.Fprintf(c.stdout, "  %s\n", filepath.Join(out, f.name))
	}
	if kekKey == "" {
		fmt.Fprintf(c.stdout, "  (no db.auth: give --kek-key and --kek-cert, or sign db.esl with efitools' sign-efi-sig-list -a -k KEK.key -c KEK.crt db db.esl db.auth)\n")
	}
	return nil
}

// loadKEK reads a KEK's unencrypted PEM key (PKCS#1 or PKCS#8, RSA) and
// certificate.
func loadKEK(keyFile, certFile string) (crypto.Signer, *x509.Certificate, error) {
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--kek-key: %w", err)
	}
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--kek-cert: %w", err)
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, nil, errors.New("--kek-key: no PEM block")
	}
	var key crypto.Signer
	switch blk.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		var k any
		if k, err = x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
			var ok bool
			if key, ok = k.(crypto.Signer); !ok {
				err = fmt.Errorf("%T is not a signing key", k)
			}
		}
	default:
		err = fmt.Errorf("PEM block %q: want an unencrypted PRIVATE KEY or RSA PRIVATE KEY (openssl pkey -in K -out K.plain decrypts one)", blk.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--kek-key: %w", err)
	}
	cblk, _ := pem.Decode(cb)
	if cblk == nil || cblk.Type != "CERTIFICATE" {
		return nil, nil, errors.New("--kek-cert: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--kek-cert: %w", err)
	}
	return key, cert, nil
}
