package tpmquote_test

import (
	"bytes"
	"testing"

	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// The server's credential for a TPM's EK and AK unwraps in that TPM only,
// and only for that AK.
func TestCredential(t *testing.T) {
	dir := t.TempDir()
	sw := swtpmtest.Start(t, dir)
	keys, err := tpmquote.Identify(sw.Conn)
	if err != nil {
		t.Fatal(err)
	}
	secret := nonce("server nonce")
	blob, enc, err := tpmquote.Challenge(*keys, secret)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpmquote.Activate(sw.Conn, blob, enc)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Activate: got %x, %v; want the secret", got, err)
	}
	// The same TPM restarted: the same keys, the credential still opens.
	sw.Stop()
	sw = swtpmtest.Start(t, dir)
	again, err := tpmquote.Identify(sw.Conn)
	if err != nil || !bytes.Equal(again.EKPublic, keys.EKPublic) || !bytes.Equal(again.AKPublic, keys.AKPublic) {
		t.Fatalf("Identify after a restart: got other keys (%v)", err)
	}
	if got, err := tpmquote.Activate(sw.Conn, blob, enc); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Activate after a restart: got %x, %v", got, err)
	}

	// Another TPM cannot open it.
	other := swtpmtest.Start(t, t.TempDir())
	if _, err := tpmquote.Activate(other.Conn, blob, enc); err == nil {
		t.Fatal("another TPM activated the credential")
	}
	// A credential for this EK but another AK (the other TPM's) does not
	// open here: the AK must be in the EK's TPM.
	okeys, err := tpmquote.Identify(other.Conn)
	if err != nil {
		t.Fatal(err)
	}
	blob2, enc2, err := tpmquote.Challenge(tpmquote.Keys{EKPublic: keys.EKPublic, AKPublic: okeys.AKPublic}, secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpmquote.Activate(sw.Conn, blob2, enc2); err == nil {
		t.Fatal("a credential for another AK activated")
	}
	// Keys that are not an EK and an AK are refused.
	if _, _, err := tpmquote.Challenge(tpmquote.Keys{EKPublic: keys.AKPublic, AKPublic: keys.AKPublic}, secret); err == nil {
		t.Fatal("Challenge took an AK as the EK")
	}
	if _, _, err := tpmquote.Challenge(tpmquote.Keys{EKPublic: keys.EKPublic, AKPublic: keys.EKPublic}, secret); err == nil {
		t.Fatal("Challenge took the EK as the AK")
	}
}
