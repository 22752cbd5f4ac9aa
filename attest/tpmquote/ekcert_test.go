package tpmquote_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// roots are the EK CAs of PEM bundles written to files.
func roots(t *testing.T, pems ...[]byte) *tpmquote.EKRoots {
	t.Helper()
	var files []string
	for i, p := range pems {
		f := filepath.Join(t.TempDir(), "ca"+string(rune('a'+i))+".pem")
		if err := os.WriteFile(f, p, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	r, err := tpmquote.LoadEKRoots(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantReason checks that err is an *EKCertError whose text starts with
// "endorsement key certificate "+prefix.
func wantReason(t *testing.T, step string, err error, prefix string) {
	t.Helper()
	var e *tpmquote.EKCertError
	if !errors.As(err, &e) {
		t.Fatalf("%s: got %v, want an EK certificate error %q…", step, err, prefix)
	}
	if !strings.HasPrefix(err.Error(), "endorsement key certificate "+prefix) {
		t.Fatalf("%s: got %q, want %q…", step, err, "endorsement key certificate "+prefix)
	}
}

// The EK certificates swtpm's local CA issues and writes into a TPM's NV at
// manufacture, as a TPM maker's (with a critical subject alternative name
// of directoryName form that Go's x509 alone refuses): read back and
// checked against the CA, its root or its issuing intermediate, or refused
// for another CA, another key, or a time past their validity; a TPM
// without one says so, and names the certificates it has instead.
func TestEKCertSwtpm(t *testing.T) {
	ca, otherCA := swtpmtest.NewCA(t), swtpmtest.NewCA(t)
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()
	swtpmtest.Manufacture(t, dirA, ca)
	swtpmtest.Manufacture(t, dirB, otherCA)
	swtpmtest.ManufactureSwtpm(t, dirC, ca) // swtpm's own certificates: RSA 2048 and ECC P-384 EKs'
	a, b, c := swtpmtest.Start(t, dirA), swtpmtest.Start(t, dirB), swtpmtest.Start(t, dirC)
	bare := swtpmtest.Start(t, t.TempDir()) // no certificate at all

	certA, err := tpmquote.ReadEKCert(a.Conn)
	if err != nil {
		t.Fatal(err)
	}
	keysA, err := tpmquote.Identify(a.Conn)
	if err != nil {
		t.Fatal(err)
	}
	certB, err := tpmquote.ReadEKCert(b.Conn)
	if err != nil {
		t.Fatal(err)
	}
	keysB, err := tpmquote.Identify(b.Conn)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(certA)
	if err != nil {
		t.Fatalf("the EK certificate read from NV does not parse: %v", err)
	}
	if len(parsed.UnhandledCriticalExtensions) == 0 {
		t.Fatalf("swtpm's EK certificate: Go's x509 left no critical extension unhandled; the test no longer shows EIM handling them")
	}
	t.Logf("swtpm's EK certificate: subject %q, issuer %q, critical extensions Go leaves unhandled %v", parsed.Subject, parsed.Issuer, parsed.UnhandledCriticalExtensions)

	r := roots(t, ca.BundlePEM(t))
	now := time.Now()
	info, err := tpmquote.VerifyEKCert(certA, keysA.EKPublic, r, now)
	if err != nil {
		t.Fatalf("valid certificate: %v", err)
	}
	if info.Issuer != parsed.Issuer.String() || info.Serial != parsed.SerialNumber.Text(16) || info.Manufacturer != "id:00001014" || info.Model != "swtpm" {
		t.Fatalf("valid certificate: got %+v, want issuer %q, serial %x and the TPM's manufacturer", info, parsed.Issuer, parsed.SerialNumber)
	}
	// The intermediate that signed it is a trust anchor alone; the root
	// alone is not enough (the node sends no intermediate, and nothing is
	// fetched).
	if _, err := tpmquote.VerifyEKCert(certA, keysA.EKPublic, roots(t, ca.IssuerPEM(t)), now); err != nil {
		t.Fatalf("anchored at the issuing intermediate: %v", err)
	}
	_, err = tpmquote.VerifyEKCert(certA, keysA.EKPublic, roots(t, ca.RootPEM(t)), now)
	wantReason(t, "the root alone", err, "does not chain to a configured TPM maker CA")

	_, err = tpmquote.VerifyEKCert(certB, keysB.EKPublic, r, now)
	wantReason(t, "another CA", err, "does not chain to a configured TPM maker CA")
	_, err = tpmquote.VerifyEKCert(certA, keysB.EKPublic, r, now)
	wantReason(t, "another key", err, "is for another key")
	_, err = tpmquote.VerifyEKCert(certA, keysA.EKPublic, r, parsed.NotAfter.Add(time.Second))
	wantReason(t, "expired", err, "expired on ")
	_, err = tpmquote.VerifyEKCert(nil, keysA.EKPublic, r, now)
	wantReason(t, "no certificate", err, "missing")

	_, err = tpmquote.ReadEKCert(c.Conn)
	if !errors.Is(err, tpmquote.ErrNoEKCert) || !strings.HasSuffix(err.Error(), "none at NV index 0x01c0000a (it has the RSA 2048 EK's at 0x01c00002 and the ECC P-384 EK's at 0x01c00016, of keys the agent does not use)") {
		t.Fatalf("a TPM with swtpm's certificates only: got %v, want ErrNoEKCert naming the others", err)
	}
	_, err = tpmquote.ReadEKCert(bare.Conn)
	if !errors.Is(err, tpmquote.ErrNoEKCert) || !strings.HasSuffix(err.Error(), "none at NV index 0x01c0000a") {
		t.Fatalf("a TPM without certificates: got %v, want ErrNoEKCert", err)
	}
}

// A TCG EK certificate as TPM makers issue them (an empty subject, the
// TPM's maker, model and version in a critical subject alternative name of
// directoryName form, critical subject directory attributes, the TCG's
// extended key usage), made in Go: Go's x509 refuses it for its critical
// extensions; VerifyEKCert reads them and accepts it, and refuses what it
// does not know.
func TestVerifyEKCert(t *testing.T) {
	ca := newTestCA(t, "Maker Root CA")
	other := newTestCA(t, "Another Root CA")
	ek, ekPublic := newEK(t)
	_, otherPublic := newEK(t)
	now := time.Now()
	r := roots(t, ca.pem)

	good := ca.issue(t, ek, ekCertTemplate(now))
	if _, err := good.cert.Verify(x509.VerifyOptions{Roots: poolOf(ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); !errors.As(err, new(x509.UnhandledCriticalExtension)) {
		t.Fatalf("Go's x509 alone: got %v, want it to refuse the critical extensions", err)
	}
	info, err := tpmquote.VerifyEKCert(good.der, ekPublic, r, now)
	if err != nil {
		t.Fatalf("valid: %v", err)
	}
	if info.Manufacturer != "id:53544D20" || info.Model != "ST33TPHF2ESPI" || info.Version != "id:00010102" || info.Issuer != "CN=Maker Root CA" || info.Serial != "2a" {
		t.Fatalf("valid: got %+v", info)
	}

	cases := []struct {
		name   string
		der    []byte
		key    []byte
		now    time.Time
		reason string
	}{
		{"missing", nil, ekPublic, now, "missing: the node sent none"},
		{"garbage", []byte("not a certificate"), ekPublic, now, "does not parse"},
		{"another CA", other.issue(t, ek, ekCertTemplate(now)).der, ekPublic, now, "does not chain to a configured TPM maker CA (issuer CN=Another Root CA"},
		{"another key", good.der, otherPublic, now, "is for another key (issuer CN=Maker Root CA, serial 2a): its public key is not the endorsement key 000b"},
		{"expired", good.der, ekPublic, now.Add(11 * 365 * 24 * time.Hour), "expired on "},
		{"not yet valid", good.der, ekPublic, now.Add(-48 * time.Hour), "is not valid before "},
		{"unknown critical extension", ca.issue(t, ek, func() *x509.Certificate {
			c := ekCertTemplate(now)
			c.ExtraExtensions = append(c.ExtraExtensions, pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Critical: true, Value: []byte{5, 0}})
			return c
		}()).der, ekPublic, now, "(issuer CN=Maker Root CA, serial 2a) has a critical extension EIM does not know (1.3.6.1.4.1.99999.1)"},
		{"critical SAN without the TPM's maker", ca.issue(t, ek, func() *x509.Certificate {
			c := ekCertTemplate(now)
			c.ExtraExtensions[0] = sanExt(t, pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 2}, Value: "model only"}}})
			return c
		}()).der, ekPublic, now, "(issuer CN=Maker Root CA, serial 2a) has a critical subject alternative name without the TPM's manufacturer"},
	}
	for _, tc := range cases {
		_, err := tpmquote.VerifyEKCert(tc.der, tc.key, r, tc.now)
		wantReason(t, tc.name, err, tc.reason)
	}
}

// The CAs are read from PEM bundles, DER files and directories; a file
// that holds no certificate is named.
func TestLoadEKRoots(t *testing.T) {
	a, b, c := newTestCA(t, "A"), newTestCA(t, "B"), newTestCA(t, "C")
	dir := t.TempDir()
	write := func(name string, content []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bundle := write("bundle.pem", append(append([]byte{}, a.pem...), b.pem...))
	cas := filepath.Join(dir, "cas")
	if err := os.Mkdir(cas, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cas, "c.cer"), c.cert.Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cas, "README"), []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := tpmquote.LoadEKRoots([]string{bundle}, []string{cas})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Subjects(), ","); r.Len() != 3 || got != "CN=A,CN=B,CN=C" {
		t.Fatalf("got %d CAs %s, want CN=A,CN=B,CN=C", r.Len(), got)
	}
	for _, tc := range []struct {
		name        string
		files, dirs []string
		want        string
	}{
		{"no certificate in a PEM file", []string{write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))}, nil, "key.pem: no CERTIFICATE in it"},
		{"not a certificate", []string{write("junk.crt", []byte("junk"))}, nil, "junk.crt: neither PEM nor a DER certificate"},
		{"missing file", []string{filepath.Join(dir, "nope.pem")}, nil, "nope.pem: no such file"},
		{"directory without certificates", nil, []string{t.TempDir()}, "no certificate file"},
		{"nothing", nil, nil, "no certificate given"},
	} {
		_, err := tpmquote.LoadEKRoots(tc.files, tc.dirs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

type issued struct {
	der  []byte
	cert *x509.Certificate
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(20 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func poolOf(ca *testCA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func (ca *testCA) issue(t *testing.T, ek *ecdsa.PrivateKey, tmpl *x509.Certificate) issued {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ek.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return issued{der: der, cert: cert}
}

// sanExt is a critical subject alternative name of one directoryName.
func sanExt(t *testing.T, dn pkix.RDNSequence) pkix.Extension {
	t.Helper()
	name, err := asn1.Marshal(dn)
	if err != nil {
		t.Fatal(err)
	}
	v, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 4, IsCompound: true, Bytes: name}})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: v}
}

// ekCertTemplate is an EK certificate as the TCG EK Credential Profile
// describes (an STMicro TPM's attributes), valid from a day before now for
// ten years.
func ekCertTemplate(now time.Time) *x509.Certificate {
	dn := pkix.RDNSequence{{
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 1}, Value: "id:53544D20"},
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 2}, Value: "ST33TPHF2ESPI"},
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 3}, Value: "id:00010102"},
	}}
	name, _ := asn1.Marshal(dn)
	san, _ := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 4, IsCompound: true, Bytes: name}})
	// Subject directory attributes: tcg-at-tpmSpecification (2.23.133.2.16)
	// of family "2.0", level 0, revision 138.
	spec, _ := asn1.Marshal(struct {
		Family   string
		Level    int
		Revision int
	}{"2.0", 0, 138})
	attrs, _ := asn1.Marshal([]struct {
		Type   asn1.ObjectIdentifier
		Values []asn1.RawValue `asn1:"set"`
	}{{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 16}, Values: []asn1.RawValue{{FullBytes: spec}}}})
	return &x509.Certificate{
		SerialNumber:       big.NewInt(42),
		NotBefore:          now.Add(-24 * time.Hour),
		NotAfter:           now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:           x509.KeyUsageKeyAgreement,
		UnknownExtKeyUsage: []asn1.ObjectIdentifier{{2, 23, 133, 8, 1}},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: san},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 9}, Critical: true, Value: attrs},
		},
	}
}

// newEK is an ECC P-256 key and its public area as a TPM's EK (the TCG
// template, the key's point as its unique field).
func newEK(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := k.PublicKey.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	pt := pk.Bytes() // 0x04 || X || Y
	pub := tpm2.ECCEKTemplate
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: pt[1:33]},
		Y: tpm2.TPM2BECCParameter{Buffer: pt[33:]},
	})
	return k, tpm2.Marshal(pub)
}
