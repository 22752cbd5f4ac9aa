package tpmquote_test

import (
	"testing"

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
