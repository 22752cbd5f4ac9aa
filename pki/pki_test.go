package pki_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eimhq/eim/pki"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func opts(now time.Time, hosts ...string) pki.Options {
	return pki.Options{
		Hosts:    hosts,
		Now:      func() time.Time { return now },
		Hostname: func() (string, error) { return "edge-orch", nil },
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestLoadGeneratesCAAndServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a, err := pki.Load(dir, opts(t0, "eim.example.com", "192.0.2.7", "0.0.0.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Generated() || !a.Renewed() {
		t.Errorf("Generated, Renewed = %v, %v; want true, true", a.Generated(), a.Renewed())
	}
	for name, want := range map[string]os.FileMode{
		pki.CACertFile: 0o644, pki.CAKeyFile: 0o600, pki.ServerCertFile: 0o644, pki.ServerKeyFile: 0o600,
	} {
		if got := mode(t, filepath.Join(dir, name)); got != want {
			t.Errorf("mode of %s = %04o, want %04o", name, got, want)
		}
	}
	ca := a.CACert()
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA || ca.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("CA: IsCA %v, key %v; want an ECDSA P-256 CA", ca.IsCA, ca.PublicKeyAlgorithm)
	}
	if got, want := ca.NotAfter.Sub(t0), pki.CALifetime; got != want {
		t.Errorf("CA lifetime from now = %s, want %s", got, want)
	}
	srv := a.ServerCert()
	if got, want := srv.NotAfter.Sub(t0), pki.ServerLifetime; got != want {
		t.Errorf("server lifetime from now = %s, want %s", got, want)
	}
	if err := srv.CheckSignatureFrom(ca); err != nil {
		t.Errorf("server certificate not signed by the CA: %v", err)
	}
	if want := []string{"edge-orch", "eim.example.com", "localhost"}; !slices.Equal(srv.DNSNames, want) {
		t.Errorf("DNS SANs = %v, want %v", srv.DNSNames, want)
	}
	var ips []string
	for _, ip := range srv.IPAddresses {
		ips = append(ips, ip.String())
	}
	slices.Sort(ips)
	if want := []string{"127.0.0.1", "192.0.2.7", "::1"}; !slices.Equal(ips, want) {
		t.Errorf("IP SANs = %v, want %v", ips, want)
	}

	// Fingerprint is the SHA-256 of the DER of ca.crt on disk.
	b, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, a.CACertPEM()) {
		t.Error("ca.crt differs from CACertPEM()")
	}
	blk, _ := pem.Decode(b)
	sum := sha256.Sum256(blk.Bytes)
	if got, want := a.Fingerprint(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func TestLoadKeepsAndRenews(t *testing.T) {
	dir := t.TempDir()
	a1, err := pki.Load(dir, opts(t0, "eim.example.com"))
	if err != nil {
		t.Fatal(err)
	}

	// Same names, a year later: nothing changes.
	a2, err := pki.Load(dir, opts(t0.Add(365*24*time.Hour), "eim.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if a2.Generated() || a2.Renewed() {
		t.Errorf("reload: Generated, Renewed = %v, %v; want false, false", a2.Generated(), a2.Renewed())
	}
	if a2.Fingerprint() != a1.Fingerprint() || !a2.ServerCert().Equal(a1.ServerCert()) {
		t.Error("reload changed the certificates")
	}

	// A new name: the server certificate is renewed, the CA kept.
	a3, err := pki.Load(dir, opts(t0.Add(365*24*time.Hour), "eim.example.com", "eim2.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if a3.Generated() || !a3.Renewed() || a3.Fingerprint() != a1.Fingerprint() {
		t.Errorf("new SAN: Generated %v, Renewed %v, same CA %v; want false, true, true", a3.Generated(), a3.Renewed(), a3.Fingerprint() == a1.Fingerprint())
	}
	if !slices.Contains(a3.ServerCert().DNSNames, "eim2.example.com") {
		t.Errorf("renewed DNS SANs = %v, want eim2.example.com among them", a3.ServerCert().DNSNames)
	}

	// 29 days before the end: renewed.
	near := a3.ServerCert().NotAfter.Add(-29 * 24 * time.Hour)
	a4, err := pki.Load(dir, opts(near, "eim.example.com", "eim2.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if !a4.Renewed() || !a4.ServerCert().NotAfter.After(a3.ServerCert().NotAfter) {
		t.Errorf("near expiry: Renewed %v, NotAfter %s (was %s); want a later certificate", a4.Renewed(), a4.ServerCert().NotAfter, a3.ServerCert().NotAfter)
	}
	if a4.Fingerprint() != a1.Fingerprint() {
		t.Error("renewal replaced the CA")
	}
}

func TestLoadRefusesCAWithoutKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Load(dir, opts(t0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, pki.CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Load(dir, opts(t0)); err == nil {
		t.Fatal("Load with ca.crt but no ca.key: got nil error, want one")
	}
}

func TestLoadRefusesOpenCAKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Load(dir, opts(t0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, pki.CAKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Load(dir, opts(t0)); err == nil {
		t.Fatal("Load with a world-readable ca.key: got nil error, want one")
	}
}

// TestServerTLS serves HTTPS with ServerTLS and connects with a client that
// trusts only ca.crt, as a provisioned node does, over HTTP/2; the root is
// presented last in the chain, as nodes pinning its fingerprint expect.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	a, err := pki.Load(dir, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.TLS = a.ServerTLS()
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	pool := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	var chain []*x509.Certificate
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, VerifyConnection: func(cs tls.ConnectionState) error {
			chain = cs.PeerCertificates
			return nil
		}},
		ForceAttemptHTTP2: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "HTTP/2.0" {
		t.Errorf("protocol = %q, want HTTP/2.0", body)
	}
	if len(chain) != 2 || pki.Fingerprint(chain[len(chain)-1]) != a.Fingerprint() {
		t.Errorf("presented chain of %d certificates, last one not the CA", len(chain))
	}

	// TLS 1.1 is refused.
	tr11 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}
	defer tr11.CloseIdleConnections()
	if _, err := (&http.Client{Transport: tr11}).Get(srv.URL); err == nil {
		t.Error("TLS 1.1 client: got a response, want a handshake failure")
	}

	// A client trusting another CA is refused.
	other, err := pki.Load(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	trOther := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: other.CertPool()}}
	defer trOther.CloseIdleConnections()
	if _, err := (&http.Client{Transport: trOther}).Get(srv.URL); err == nil {
		t.Error("client trusting another CA: got a response, want a verification failure")
	}
}

// operatorChain writes a root, an intermediate and a leaf for 127.0.0.1.
func operatorChain(t *testing.T, dir string) (certFile, keyFile, caFile string, root *x509.Certificate) {
	t.Helper()
	mk := func(tmpl, parent *x509.Certificate, pub, signer any) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	rk, ik, lk := key(), key(), key()
	rt := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour * 24), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	root = mk(rt, rt, &rk.PublicKey, rk)
	it := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "inter"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour * 24), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	inter := mk(it, root, &ik.PublicKey, rk)
	lt := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour * 24), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	leaf := mk(lt, inter, &lk.PublicKey, ik)

	enc := func(cs ...*x509.Certificate) []byte {
		var b []byte
		for _, c := range cs {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		return b
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(lk)
	certFile, keyFile, caFile = filepath.Join(dir, "op.crt"), filepath.Join(dir, "op.key"), filepath.Join(dir, "root.crt")
	for f, b := range map[string][]byte{
		certFile: enc(leaf, inter),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		caFile:   enc(root),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, caFile, root
}

func TestLoadOperatorCertificate(t *testing.T) {
	src, dir := t.TempDir(), t.TempDir()
	certFile, keyFile, caFile, root := operatorChain(t, src)

	a, err := pki.Load(dir, pki.Options{CertFile: certFile, KeyFile: keyFile, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if a.Generated() || a.Renewed() {
		t.Error("operator certificate: Load generated certificates")
	}
	if !a.CACert().Equal(root) || a.Fingerprint() != pki.Fingerprint(root) {
		t.Error("operator certificate: CA is not the given root")
	}
	if _, err := os.Stat(filepath.Join(dir, pki.CAKeyFile)); err == nil {
		t.Error("operator certificate: ca.key written")
	}
	b, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil || !bytes.Equal(b, a.CACertPEM()) {
		t.Errorf("ca.crt = %q (%v), want the root's PEM", b, err)
	}
	cfg := a.ServerTLS()
	chain := cfg.Certificates[0].Certificate
	if len(chain) != 3 || !bytes.Equal(chain[2], root.Raw) {
		t.Errorf("presented chain has %d certificates, want leaf, intermediate, root", len(chain))
	}

	// Without the root, the chain cannot be checked against anything the
	// nodes would pin: the intermediate is taken as the root, and the leaf
	// verifies against it.
	a2, err := pki.Load(t.TempDir(), pki.Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if a2.CACert().Subject.CommonName != "inter" {
		t.Errorf("no CA file: pinned root %q, want the last certificate of the chain (inter)", a2.CACert().Subject.CommonName)
	}

	// A root that did not sign the chain is refused.
	_, _, otherCA, _ := operatorChain(t, t.TempDir())
	if _, err := pki.Load(t.TempDir(), pki.Options{CertFile: certFile, KeyFile: keyFile, CAFile: otherCA}); err == nil {
		t.Error("chain not leading to the CA file: got nil error, want one")
	}
	if _, err := pki.Load(t.TempDir(), pki.Options{CertFile: certFile}); err == nil {
		t.Error("certificate without key: got nil error, want one")
	}
}
