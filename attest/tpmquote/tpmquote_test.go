package tpmquote_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
)

func nonce(s string) []byte { return digestOf(s) }

func digestOf(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func TestQuote(t *testing.T) {
	dir := t.TempDir()
	sw := swtpmtest.Start(t, dir)
	pcrs := []int{0, 4, 7, 9, 14}
	for _, p := range []int{0, 4, 7} {
		sw.Extend(t, p, digestOf("firmware measured this"))
	}
	values := sw.PCRs(t, pcrs)
	n := nonce("server nonce 1")
	q, err := tpmquote.Make(sw.Conn, n, pcrs)
	if err != nil {
		t.Fatal(err)
	}
	key, err := tpmquote.Verify(*q, n, values)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !strings.HasPrefix(key.Name, "000b") || len(key.Name) != 68 {
		t.Fatalf("AK name %q: want 000b and a SHA-256 digest, in hex", key.Name)
	}
	if name, err := tpmquote.NameOf(q.AKPublic); err != nil || name != key.Name {
		t.Fatalf("NameOf: got %q, %v; want %q", name, err, key.Name)
	}

	t.Run("forged PCR value", func(t *testing.T) {
		forged := map[int][]byte{}
		for i, v := range values {
			forged[i] = v
		}
		forged[4] = bytes.Repeat([]byte{0x44}, 32)
		_, err := tpmquote.Verify(*q, n, forged)
		wantErr(t, err, "not the digest of the reported PCR values")
	})
	t.Run("PCR reported but not quoted", func(t *testing.T) {
		more := map[int][]byte{23: make([]byte, 32)}
		for i, v := range values {
			more[i] = v
		}
		_, err := tpmquote.Verify(*q, n, more)
		wantErr(t, err, "the quote covers PCRs [0 4 7 9 14], not the reported [0 4 7 9 14 23]")
	})
	t.Run("another nonce", func(t *testing.T) {
		// A quote replayed to a server that gave another nonce.
		_, err := tpmquote.Verify(*q, nonce("server nonce 2"), values)
		wantErr(t, err, "the quote is over nonce")
	})
	t.Run("bad signature", func(t *testing.T) {
		bad := *q
		bad.Signature = bytes.Clone(q.Signature)
		bad.Signature[len(bad.Signature)-1] ^= 1
		_, err := tpmquote.Verify(bad, n, values)
		wantErr(t, err, "the signature by attestation key "+key.Name+": does not verify")
	})
	t.Run("attestation changed after signing", func(t *testing.T) {
		bad := *q
		bad.Attest = bytes.Clone(q.Attest)
		bad.Attest[len(bad.Attest)-1] ^= 1 // the PCR digest's last byte
		_, err := tpmquote.Verify(bad, n, values)
		wantErr(t, err, "does not verify")
	})
	t.Run("not a restricted key", func(t *testing.T) {
		pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](q.AKPublic)
		if err != nil {
			t.Fatal(err)
		}
		pub.ObjectAttributes.Restricted = false
		bad := *q
		bad.AKPublic = tpm2.Marshal(pub)
		_, err = tpmquote.Verify(bad, n, values)
		wantErr(t, err, "not a restricted signing key")
	})

	// The PCRs change (another boot): the old quote no longer verifies
	// against the new values, a new one does, by the same AK.
	sw.Extend(t, 7, digestOf("another Secure Boot state"))
	values2 := sw.PCRs(t, pcrs)
	_, err = tpmquote.Verify(*q, n, values2)
	wantErr(t, err, "not the digest of the reported PCR values")
	q2, err := tpmquote.Make(sw.Conn, n, pcrs)
	if err != nil {
		t.Fatal(err)
	}
	if key2, err := tpmquote.Verify(*q2, n, values2); err != nil || key2.Name != key.Name {
		t.Fatalf("after a PCR changed: got %v, %v; want AK %s", key2, err, key.Name)
	}

	// The same TPM restarted (a reboot: seeds kept, PCRs reset) gives the
	// same AK.
	sw.Stop()
	sw = swtpmtest.Start(t, dir)
	q3, err := tpmquote.Make(sw.Conn, n, pcrs)
	if err != nil {
		t.Fatal(err)
	}
	key3, err := tpmquote.Verify(*q3, n, sw.PCRs(t, pcrs))
	if err != nil || key3.Name != key.Name {
		t.Fatalf("after a restart: got %v, %v; want AK %s", key3, err, key.Name)
	}

	// Another TPM has another AK; its quote with this TPM's AK substituted
	// does not verify.
	other := swtpmtest.Start(t, t.TempDir())
	oq, err := tpmquote.Make(other.Conn, n, pcrs)
	if err != nil {
		t.Fatal(err)
	}
	ovalues := other.PCRs(t, pcrs)
	okey, err := tpmquote.Verify(*oq, n, ovalues)
	if err != nil {
		t.Fatal(err)
	}
	if okey.Name == key.Name {
		t.Fatal("two TPMs gave the same AK")
	}
	swapped := *oq
	swapped.AKPublic = q.AKPublic
	_, err = tpmquote.Verify(swapped, n, ovalues)
	wantErr(t, err, "does not verify")
}

func TestMakeBadInput(t *testing.T) {
	sw := swtpmtest.Start(t, t.TempDir())
	for _, tc := range []struct {
		nonce []byte
		pcrs  []int
		want  string
	}{
		{nil, []int{7}, "nonce: 0 bytes"},
		{make([]byte, 33), []int{7}, "nonce: 33 bytes"},
		{nonce("x"), nil, "no PCR to quote"},
		{nonce("x"), []int{24}, "PCR 24"},
	} {
		_, err := tpmquote.Make(sw.Conn, tc.nonce, tc.pcrs)
		wantErr(t, err, tc.want)
	}
}

func TestVerifyGarbage(t *testing.T) {
	for _, q := range []tpmquote.Quote{
		{},
		{AKPublic: []byte{0, 0x23}},
		{AKPublic: bytes.Repeat([]byte{0xff}, 100), Attest: []byte{1}, Signature: []byte{2}},
	} {
		if _, err := tpmquote.Verify(q, nonce("n"), map[int][]byte{7: make([]byte, 32)}); err == nil {
			t.Fatalf("Verify(%x): no error", q)
		}
	}
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got error %v, want one with %q", err, want)
	}
}
