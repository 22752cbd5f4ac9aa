// Package pki keeps the certificates of the agent-facing (southbound) HTTPS
// listener.
//
// On first start Load creates a private certificate authority (ECDSA P-256,
// valid ten years) and a server certificate it signs (two years) in the data
// directory. Nodes network-booted into the micro-OS learn only the CA's
// fingerprint from their kernel command line and pin it; provisioned nodes get
// the CA certificate itself in their trust store. The server certificate is
// renewed on load when it nears its end or its names change; the CA is never
// replaced behind the operator's back, since every node trusts it.
//
// An operator can bring their own certificate and key instead (and the root
// of its chain); they are then used as they are.
package pki

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
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// File names in the directory given to Load.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
)

// Lifetimes of generated certificates, and when the server certificate is
// renewed.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 2 * 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
	// backdate covers clocks of nodes that are a little behind.
	backdate = time.Hour
)

// Options configure Load. Zero values select the defaults.
type Options struct {
	// CertFile and KeyFile name an operator-supplied server certificate
	// (PEM, leaf first, then intermediates) and its key. Both or neither.
	CertFile, KeyFile string
	// CAFile names the root of the operator's chain (PEM). Without it the
	// last certificate of CertFile is taken as the root nodes pin.
	CAFile string
	// Hosts are extra names and addresses for the generated server
	// certificate. 127.0.0.1, ::1, localhost and the machine's hostname are
	// always included; empty and unspecified addresses (0.0.0.0, ::) are
	// skipped.
	Hosts []string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Hostname returns the machine's name; nil means os.Hostname.
	Hostname func() (string, error)
}

// Authority holds the CA certificate nodes trust and the server certificate
// the southbound listener presents.
type Authority struct {
	ca        *x509.Certificate
	caPEM     []byte
	server    tls.Certificate
	generated bool
	renewed   bool
}

// Load returns the Authority of dir, creating the directory, a CA and a
// server certificate as needed (see the package comment).
func Load(dir string, opts Options) (*Authority, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Hostname == nil {
		opts.Hostname = os.Hostname
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, eim.Errorf(eim.EINVALID, "tls: give both a certificate and a key file, or neither")
	}
	if opts.CAFile != "" && opts.CertFile == "" {
		return nil, eim.Errorf(eim.EINVALID, "tls: a CA file is only used with an operator certificate and key")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki dir: %w", err)
	}
	if opts.CertFile != "" {
		return loadOperator(dir, opts)
	}
	return loadGenerated(dir, opts)
}

// Fingerprint returns the lower-case hex SHA-256 of the CA certificate's DER
// encoding, as nodes pin it ("eim.ca=sha256:<fingerprint>").
func (a *Authority) Fingerprint() string { return Fingerprint(a.ca) }

// Fingerprint returns the lower-case hex SHA-256 of c's DER encoding.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// CACertPEM returns the CA certificate in PEM form.
func (a *Authority) CACertPEM() []byte { return bytes.Clone(a.caPEM) }

// CACert returns the CA certificate.
func (a *Authority) CACert() *x509.Certificate { return a.ca }

// CertPool returns a pool holding the CA certificate, for clients.
func (a *Authority) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.ca)
	return p
}

// ServerCert returns the server certificate (leaf).
func (a *Authority) ServerCert() *x509.Certificate { return a.server.Leaf }

// Generated reports whether Load created a new CA; Renewed whether it issued
// a new server certificate.
func (a *Authority) Generated() bool { return a.generated }

// Renewed reports whether Load issued a new server certificate.
func (a *Authority) Renewed() bool { return a.renewed }

// ServerTLS returns the TLS configuration of the southbound listener: TLS 1.2
// or later, HTTP/2 and HTTP/1.1, presenting the server certificate followed
// by its chain up to and including the root, so that a node knowing only the
// root's fingerprint finds it in the handshake.
func (a *Authority) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{a.server},
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

func loadOperator(dir string, opts Options) (*Authority, error) {
	cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, eim.Errorf(eim.EINVALID, "tls certificate %s and key %s: %v", opts.CertFile, opts.KeyFile, err)
	}
	var root *x509.Certificate
	if opts.CAFile != "" {
		b, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		certs, err := parseCerts(b)
		if err != nil {
			return nil, eim.Errorf(eim.EINVALID, "tls ca %s: %v", opts.CAFile, err)
		}
		root = certs[len(certs)-1]
	} else {
		last, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
		if err != nil {
			return nil, eim.Errorf(eim.EINVALID, "tls certificate %s: %v", opts.CertFile, err)
		}
		root = last
	}
	// The chain must lead to the root, or nodes pinning it would refuse us.
	pool := x509.NewCertPool()
	pool.AddCert(root)
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: opts.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "tls certificate %s does not verify against its root %q: %v", opts.CertFile, root.Subject.CommonName, err)
	}
	// Present the root last (nodes pin it); add it when the file lacks it.
	if !bytes.Equal(cert.Certificate[len(cert.Certificate)-1], root.Raw) {
		cert.Certificate = append(cert.Certificate, root.Raw)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	if err := writeFile(filepath.Join(dir, CACertFile), caPEM, 0o644); err != nil {
		return nil, err
	}
	return &Authority{ca: root, caPEM: caPEM, server: cert}, nil
}

func loadGenerated(dir string, opts Options) (*Authority, error) {
	now := opts.Now()
	a := &Authority{}
	caKey, ca, err := readCA(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		caKey, ca, err = createCA(dir, now)
		if err != nil {
			return nil, err
		}
		a.generated = true
	case err != nil:
		return nil, err
	}
	a.ca = ca
	a.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})

	names := serverNames(opts)
	cert, err := readServer(dir, ca, names, now)
	if err != nil {
		if cert, err = createServer(dir, ca, caKey, names, now); err != nil {
			return nil, err
		}
		a.renewed = true
	}
	a.server = cert
	return a, nil
}

// readCA reads ca.crt and ca.key; fs.ErrNotExist when there is no ca.crt.
// A CA certificate without its key is an error: nodes trust that CA, so it
// is not silently replaced.
func readCA(dir string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	certs, err := parseCerts(cb)
	if err != nil {
		return nil, nil, eim.Errorf(eim.EINVALID, "%s: %v", certPath, err)
	}
	if fi, err := os.Stat(keyPath); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, nil, eim.Errorf(eim.EINVALID, "CA key %s is accessible by others (mode %04o); make it private with chmod 600", keyPath, fi.Mode().Perm())
	}
	kb, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, eim.Errorf(eim.EINVALID, "%s exists but its key %s does not; restore the key, or remove %s to create a new CA (every node must then learn the new fingerprint)", certPath, keyPath, certPath)
	}
	if err != nil {
		return nil, nil, err
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, nil, eim.Errorf(eim.EINVALID, "%s: %v", keyPath, err)
	}
	ca := certs[0]
	if !ca.IsCA || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, eim.Errorf(eim.EINVALID, "%s is not a CA certificate for the key in %s", certPath, keyPath)
	}
	return key, ca, nil
}

func createCA(dir string, now time.Time) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"EIM"}, CommonName: "EIM southbound CA " + serial.Text(16)[:8]},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	// Key first: a ca.crt on disk always has its key beside it.
	if err := writeKey(filepath.Join(dir, CAKeyFile), key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(filepath.Join(dir, CACertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	return key, ca, nil
}

// readServer returns the stored server certificate when it is still good:
// signed by ca, matching its key, with the wanted names, and more than
// RenewBefore from its end. Any error means "issue a new one".
func readServer(dir string, ca *x509.Certificate, names sans, now time.Time) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ServerCertFile), filepath.Join(dir, ServerKeyFile))
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := cert.Leaf
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return tls.Certificate{}, err
	}
	if now.Add(RenewBefore).After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return tls.Certificate{}, errors.New("server certificate near its end")
	}
	if !names.equal(sansOf(leaf)) {
		return tls.Certificate{}, errors.New("server certificate names changed")
	}
	cert.Certificate = [][]byte{leaf.Raw, ca.Raw}
	return cert, nil
}

func createServer(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names sans, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate server key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	notAfter := now.Add(ServerLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"EIM"}, CommonName: "eim southbound"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names.dns,
		IPAddresses:  names.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create server certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create server certificate: %w", err)
	}
	if err := writeKey(filepath.Join(dir, ServerKeyFile), key); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFile(filepath.Join(dir, ServerCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// sans are a certificate's subject alternative names, sorted and unique.
type sans struct {
	dns []string
	ips []net.IP
}

func serverNames(opts Options) sans {
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, opts.Hosts...)
	if h, err := opts.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	var s sans
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			if !ip.IsUnspecified() {
				s.ips = append(s.ips, ip)
			}
			continue
		}
		s.dns = append(s.dns, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	return s.normalize()
}

func sansOf(c *x509.Certificate) sans {
	return sans{dns: slices.Clone(c.DNSNames), ips: slices.Clone(c.IPAddresses)}.normalize()
}

func (s sans) normalize() sans {
	for i, ip := range s.ips {
		if v4 := ip.To4(); v4 != nil {
			s.ips[i] = v4
		}
	}
	slices.Sort(s.dns)
	s.dns = slices.Compact(s.dns)
	slices.SortFunc(s.ips, func(a, b net.IP) int { return bytes.Compare(a, b) })
	s.ips = slices.CompactFunc(s.ips, func(a, b net.IP) bool { return a.Equal(b) })
	return s
}

func (s sans) equal(o sans) bool {
	return slices.Equal(s.dns, o.dns) && slices.EqualFunc(s.ips, o.ips, func(a, b net.IP) bool { return a.Equal(b) })
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return out, nil
}

func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("want an ECDSA key, got %T", k)
	}
	return ek, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeFile replaces path atomically (temporary file, sync, rename).
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
