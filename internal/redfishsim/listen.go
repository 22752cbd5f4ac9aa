package redfishsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server serves a handler (a BMC) over HTTPS, with a self-signed
// certificate as BMCs have out of the box, and over plain HTTP.
type Server struct {
	URL     string // https://host:port, "" when not served
	HTTPURL string // http://host:port, "" when not served
	CertPEM []byte // the HTTPS certificate, to trust it as a CA bundle

	servers []*http.Server
	wg      sync.WaitGroup
}

// Serve listens on httpsAddr and httpAddr ("127.0.0.1:0" picks a port, ""
// does not listen) and serves h on both until Close.
func Serve(h http.Handler, httpsAddr, httpAddr string) (*Server, error) {
	if httpsAddr == "" && httpAddr == "" {
		return nil, errors.New("redfishsim: no address to listen on")
	}
	s := &Server{}
	quiet := log.New(io.Discard, "", 0) // clients that do not verify the certificate end TLS abruptly
	if httpsAddr != "" {
		ln, err := net.Listen("tcp", httpsAddr)
		if err != nil {
			return nil, err
		}
		cert, certPEM, err := selfSigned(ln.Addr().(*net.TCPAddr).IP)
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.CertPEM = certPEM
		s.URL = "https://" + ln.Addr().String()
		srv := &http.Server{Handler: h, ErrorLog: quiet, ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
		s.start(srv, tls.NewListener(ln, srv.TLSConfig))
	}
	if httpAddr != "" {
		ln, err := net.Listen("tcp", httpAddr)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.HTTPURL = "http://" + ln.Addr().String()
		s.start(&http.Server{Handler: h, ErrorLog: quiet, ReadHeaderTimeout: 10 * time.Second}, ln)
	}
	return s, nil
}

func (s *Server) start(srv *http.Server, ln net.Listener) {
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln) // ends with ErrServerClosed at Close
	}()
}

// Close stops serving, drops open connections and waits.
func (s *Server) Close() error {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	s.wg.Wait()
	return nil
}

// selfSigned makes an ECDSA certificate for localhost, ip and the loopback
// addresses, valid for a day.
func selfSigned(ip net.IP) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "redfishsim BMC"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: it is its own CA, so a client can trust it as a bundle
		DNSNames:              []string{"localhost"},
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("redfishsim: certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}
