package pki_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/pki"
)

func TestArtifactKey(t *testing.T) {
	dir := t.TempDir()
	key, err := pki.LoadArtifactKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pki.LoadArtifactKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Equal(again) {
		t.Error("a second load made another key")
	}
	st, err := os.Stat(filepath.Join(dir, pki.ArtifactKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want 0600", err, st.Mode())
	}
	b, err := os.ReadFile(filepath.Join(dir, pki.ArtifactPubKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := bootartifact.ParsePublicKey(b)
	if err != nil || !pub.Equal(key.Public()) {
		t.Errorf("artifacts.pub is not the key's public half: %v", err)
	}
	// A damaged key stops the load rather than being replaced.
	os.WriteFile(filepath.Join(dir, pki.ArtifactKeyFile), []byte("junk"), 0o600)
	if _, err := pki.LoadArtifactKey(dir); err == nil {
		t.Error("a damaged key: got nil error")
	}
}
