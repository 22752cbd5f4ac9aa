package agent

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Pin is the CA an agent trusts. Made from a fingerprint (the micro-OS knows
// only that), it learns the certificate on the first TLS handshake whose
// chain carries a certificate with that fingerprint, and from then on
// verifies servers against it; made from a PEM bundle it knows it at once.
type Pin struct {
	fingerprint string // lower-case hex; "" when made from PEM

	mu   sync.Mutex
	pool *x509.CertPool
	pem  []byte
}

// NewPin returns a Pin from a fingerprint ("sha256:<hex>" or hex) or a PEM
// bundle of CA certificates.
func NewPin(ca string) (*Pin, error) {
	if strings.Contains(ca, "-----BEGIN") {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, errors.New("CA PEM holds no certificate")
		}
		return &Pin{pool: pool, pem: []byte(ca)}, nil
	}
	fp, err := ParseFingerprint(ca)
	if err != nil {
		return nil, err
	}
	return &Pin{fingerprint: fp}, nil
}

// CACertPEM is the trusted CA in PEM form, or nil while a fingerprint pin
// has not seen its certificate yet.
func (p *Pin) CACertPEM() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pem
}

// verify checks a server's chain: against the known CA, or, for a
// fingerprint pin, by finding the CA in the presented chain.
func (p *Pin) verify(cs tls.ConnectionState) error {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return errors.New("server presented no certificate")
	}
	p.mu.Lock()
	pool := p.pool
	p.mu.Unlock()
	if pool == nil {
		var ca *x509.Certificate
		for i := len(certs) - 1; i >= 0; i-- {
			sum := sha256.Sum256(certs[i].Raw)
			if hex.EncodeToString(sum[:]) == p.fingerprint {
				ca = certs[i]
				break
			}
		}
		if ca == nil {
			return fmt.Errorf("no certificate in the server's chain has the pinned CA fingerprint sha256:%s", p.fingerprint)
		}
		if !ca.IsCA {
			return errors.New("the certificate with the pinned fingerprint is not a CA")
		}
		pool = x509.NewCertPool()
		pool.AddCert(ca)
		if err := verifyChain(cs, pool); err != nil {
			return err
		}
		p.mu.Lock()
		if p.pool == nil {
			p.pool = pool
			p.pem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
		}
		p.mu.Unlock()
		return nil
	}
	return verifyChain(cs, pool)
}

func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName:       cs.ServerName,
		Roots:         roots,
		Intermediates: inter,
	})
	if err != nil {
		return fmt.Errorf("server certificate: %w", err)
	}
	return nil
}

// TLSConfig returns a client TLS configuration trusting only the pin.
func (p *Pin) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is done by VerifyConnection against the pin: the
		// standard verifier cannot learn a CA from its fingerprint.
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection
		VerifyConnection:   p.verify,
	}
}

// Dial returns an HTTP client for the server at serverURL (https) that
// trusts only ca: a CA fingerprint ("sha256:<hex>", as on the kernel command
// line) or a PEM bundle.
func Dial(serverURL, ca string) (*http.Client, error) {
	c, _, err := DialPin(serverURL, ca)
	return c, err
}

// DialPin is Dial that also returns the Pin, from which the CA certificate
// learnt from a fingerprint can be read after the first call.
func DialPin(serverURL, ca string) (*http.Client, *Pin, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, fmt.Errorf("server URL %q is not an https URL", serverURL)
	}
	pin, err := NewPin(ca)
	if err != nil {
		return nil, nil, err
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     pin.TLSConfig(),
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
	// Per-request deadlines come from contexts; this bounds a hung server.
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}, pin, nil
}
