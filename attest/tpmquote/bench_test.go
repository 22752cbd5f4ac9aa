package tpmquote_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// BenchmarkVerify is the server's cost of one quote: the checks of a
// quote of 24 PCRs (the AK's public area parsed, ECDSA P-256 verified,
// the attestation parsed, the PCR digest computed).
func BenchmarkVerify(b *testing.B) {
	sw := swtpmtest.Start(b, b.TempDir())
	pcrs := make([]int, 24)
	for i := range pcrs {
		pcrs[i] = i
	}
	n := nonce("bench")
	q, err := tpmquote.Make(sw.Conn, n, pcrs)
	if err != nil {
		b.Fatal(err)
	}
	values := sw.PCRs(b, pcrs)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpmquote.Verify(*q, n, values); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChallenge is the server's cost of wrapping one nonce for a
// TPM's EK and AK (MakeCredential in Go: an ECDH on P-256, KDFs, AES, an
// HMAC), once per answer that asks for a measured boot.
func BenchmarkChallenge(b *testing.B) {
	sw := swtpmtest.Start(b, b.TempDir())
	keys, err := tpmquote.Identify(sw.Conn)
	if err != nil {
		b.Fatal(err)
	}
	n := nonce("bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tpmquote.Challenge(*keys, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyEKCert is the server's cost of checking a TPM's EK
// certificate (swtpm_localca's: RSA 2048 signatures by an intermediate
// under a root) against the makers' CAs, once per quote checked when the
// deployment configures them.
func BenchmarkVerifyEKCert(b *testing.B) {
	ca := swtpmtest.NewCA(b)
	dir := b.TempDir()
	swtpmtest.Manufacture(b, dir, ca)
	sw := swtpmtest.Start(b, dir)
	cert, err := tpmquote.ReadEKCert(sw.Conn)
	if err != nil {
		b.Fatal(err)
	}
	keys, err := tpmquote.Identify(sw.Conn)
	if err != nil {
		b.Fatal(err)
	}
	f := filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(f, ca.BundlePEM(b), 0o600); err != nil {
		b.Fatal(err)
	}
	roots, err := tpmquote.LoadEKRoots([]string{f}, nil)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpmquote.VerifyEKCert(cert, keys.EKPublic, roots, now); err != nil {
			b.Fatal(err)
		}
	}
}
