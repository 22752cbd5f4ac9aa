package bootartifact_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/eimhq/eim/bootartifact"
)

func sample(t *testing.T) *bootartifact.Manifest {
	t.Helper()
	k, err := bootartifact.Describe("vmlinuz", strings.NewReader("kernel"))
	if err != nil {
		t.Fatal(err)
	}
	i, _ := bootartifact.Describe("initramfs.img", strings.NewReader("initramfs"))
	return &bootartifact.Manifest{Version: bootartifact.Version, KernelRelease: "6.1.0-56-amd64", Files: []bootartifact.File{k, i}}
}

func TestSignVerify(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	m := sample(t)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sig := bootartifact.Sign(key, b)
	got, err := bootartifact.Verify(pub, b, sig)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := got.Find("initramfs.img")
	if !ok {
		t.Fatal("initramfs.img not found")
	}
	if err := f.Check(strings.NewReader("initramfs")); err != nil {
		t.Errorf("the same bytes: %v", err)
	}
	if err := f.Check(strings.NewReader("initramfS")); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("other bytes: got %v, want a sha256 mismatch", err)
	}

	// A changed manifest, another key or a damaged signature fail.
	other, _, _ := ed25519.GenerateKey(nil)
	tampered := bytes.Replace(b, []byte("6.1.0"), []byte("6.2.0"), 1)
	for name, c := range map[string]struct {
		pub      ed25519.PublicKey
		body     []byte
		sig      []byte
		contains string
	}{
		"tampered manifest": {pub, tampered, sig, "does not verify"},
		"another key":       {other, b, sig, "does not verify"},
		"not base64":        {pub, b, []byte("!!"), "not a base64"},
		"short signature":   {pub, b, []byte("AAAA"), "not a base64"},
	} {
		if _, err := bootartifact.Verify(c.pub, c.body, c.sig); err == nil || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.contains)
		}
	}
}

func TestPublicKeyPEM(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	b, err := bootartifact.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bootartifact.ParsePublicKey(b)
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := bootartifact.ParsePublicKey([]byte("junk")); err == nil {
		t.Error("junk: got nil error")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"unknown field": `{"version":1,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}],"extra":1}`,
		"no files":      `{"version":1,"files":[]}`,
		"version":       `{"version":2,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
		"path":          `{"version":1,"files":[{"name":"../a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
		"upper hex":     `{"version":1,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("A", 64) + `"}]}`,
		"twice":         `{"version":1,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"},{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
	} {
		if _, err := bootartifact.Parse([]byte(body)); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
}

// FuzzParse: manifests come from the network (the micro-OS fetches them).
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"kernelRelease":"6.1","files":[{"name":"vmlinuz","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := bootartifact.Parse(b)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("a parsed manifest does not marshal: %v", err)
		}
		if _, err := bootartifact.Parse(out); err != nil {
			t.Fatalf("a marshalled manifest does not parse: %v", err)
		}
	})
}
