package agent_test

import (
	"bytes"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/bootartifact"
)

// A micro-OS root (what the kernel unpacked) and the signed manifest the
// server serves for it.
func bootFixture(t *testing.T) (root string, pub ed25519.PublicKey, body, sig []byte) {
	t.Helper()
	root = t.TempDir()
	files := map[string]string{
		"init":                          "the agent",
		"etc/eim/ca.crt":                "the CA",
		"lib/modules/6.1/kernel/a.ko":   "a module",
		"lib/modules/6.1/kernel/b/c.ko": "another",
	}
	m := &bootartifact.Manifest{Version: bootartifact.Version, KernelRelease: "6.1.0-test"}
	for _, n := range []string{bootartifact.KernelFile, bootartifact.InitrdFile} {
		d, _ := bootartifact.Describe(n, strings.NewReader("image of "+n))
		m.Files = append(m.Files, d)
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		d, _ := bootartifact.Describe(name, strings.NewReader(content))
		m.InitrdFiles = append(m.InitrdFiles, d)
	}
	// Files made at run time are not in the manifest and not checked.
	os.WriteFile(filepath.Join(root, "etc/resolv.conf"), []byte("nameserver 10.0.2.3\n"), 0o644)
	pub, key, _ := ed25519.GenerateKey(nil)
	body, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return root, pub, body, bootartifact.Sign(key, body)
}

func serveManifest(t *testing.T, body, sig []byte) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boot/artifacts/manifest.json", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	mux.HandleFunc("GET /boot/artifacts/manifest.json.sig", func(w http.ResponseWriter, r *http.Request) { w.Write(sig) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestCheckBoot(t *testing.T) {
	root, pub, body, sig := bootFixture(t)
	srv := serveManifest(t, body, sig)
	m, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, pub, root, "6.1.0-test")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.InitrdFiles) != 4 {
		t.Errorf("%d initramfs files, want 4", len(m.InitrdFiles))
	}

	other, _, _ := ed25519.GenerateKey(nil)
	if _, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, other, root, "6.1.0-test"); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("another server's key: got %v", err)
	}
	if _, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, pub, root, "6.2.0"); err == nil || !strings.Contains(err.Error(), "running kernel 6.2.0") {
		t.Errorf("another kernel: got %v", err)
	}
	os.WriteFile(filepath.Join(root, "lib/modules/6.1/kernel/a.ko"), []byte("a modulE"), 0o644)
	if _, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, pub, root, "6.1.0-test"); err == nil || !strings.Contains(err.Error(), "a.ko") {
		t.Errorf("a changed module: got %v", err)
	}
	os.Remove(filepath.Join(root, "lib/modules/6.1/kernel/a.ko"))
	if _, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, pub, root, "6.1.0-test"); err == nil {
		t.Error("a missing module: got nil error")
	}
}

func TestCheckBootTamperedManifest(t *testing.T) {
	root, pub, body, sig := bootFixture(t)
	bad := bytes.Replace(body, []byte("6.1.0-test"), []byte("6.1.0-evil"), 1)
	srv := serveManifest(t, bad, sig)
	if _, err := agent.CheckBoot(t.Context(), srv.Client(), srv.URL, pub, root, "6.1.0-evil"); err == nil {
		t.Error("a changed manifest: got nil error")
	}
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	if _, err := agent.CheckBoot(t.Context(), empty.Client(), empty.URL, pub, root, "6.1.0-test"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("no manifest on the server: got %v", err)
	}
}
