// Package bmchttp is what the HTTP-based BMC drivers (oob/redfish, oob/amt)
// share: a client that trusts a CA bundle or, by explicit choice, nothing,
// with a timeout per request and no redirects; and the classification of
// its transport errors (no answer, refused, an untrusted certificate). It
// imports nothing of EIM.
package bmchttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// Options configure a Client.
type Options struct {
	// CABundle (PEM) is what the server's certificate must chain to
	// (empty: the system's roots); Insecure skips the check.
	CABundle []byte
	Insecure bool
	// Timeout bounds each request, connection and TLS handshake included.
	Timeout time.Duration
}

// Client returns an HTTP client for o. It follows no redirect: a BMC or a
// management server has no reason to send an API call elsewhere, and
// following one would carry the credentials there.
func Client(o Options) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.Insecure} //nolint:gosec // the operator's explicit choice
	if len(o.CABundle) > 0 && !o.Insecure {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: o.Timeout}
	return &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tc,
			TLSHandshakeTimeout: o.Timeout,
			MaxIdleConns:        2,
			IdleConnTimeout:     time.Minute,
			ForceAttemptHTTP2:   true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Failure is what a transport error means.
type Failure int

const (
	// Other: not a transport failure this package knows.
	Other Failure = iota
	// NoAnswer: the server did not answer within the timeout.
	NoAnswer
	// Refused: the connection could not be made (refused, no route).
	Refused
	// BadCertificate: the server's certificate is not trusted.
	BadCertificate
)

// Classify says what a transport error means, with a short detail.
func Classify(err error) (Failure, string) {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		msg := err.Error()
		if i := strings.LastIndex(msg, "tls: "); i >= 0 {
			msg = msg[i:]
		}
		return BadCertificate, msg
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return NoAnswer, "no answer in time"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Refused, oe.Error()
	}
	if err == nil {
		return Other, ""
	}
	return Other, err.Error()
}
