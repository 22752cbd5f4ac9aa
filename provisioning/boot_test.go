package provisioning_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/provisioning"
)

func bootServer(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(provisioning.BootHandler(provisioning.Options{
		AgentURL: "https://10.0.0.1:8443", CAFingerprint: "ab12cd", ArtifactsDir: dir,
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestBootScript(t *testing.T) {
	srv := bootServer(t, t.TempDir())
	code, body, _ := get(t, srv.URL+"/boot/boot.ipxe")
	if code != 200 || !strings.HasPrefix(body, "#!ipxe\n") {
		t.Fatalf("got %d %q", code, body)
	}
	wantKernel := "kernel artifacts/vmlinuz initrd=initramfs.img eim.url=https://10.0.0.1:8443 eim.ca=sha256:ab12cd console=ttyS0 console=tty0 "
	if !strings.Contains(body, wantKernel) || !strings.Contains(body, "initrd artifacts/initramfs.img") || !strings.Contains(body, "\nboot ") {
		t.Fatalf("got script:\n%s", body)
	}
	if strings.Contains(body, "eim.enroll") {
		t.Fatalf("enroll argument without a token:\n%s", body)
	}
	code, body, _ = get(t, srv.URL+"/boot/boot.ipxe?enroll=tok_EN-1.x")
	if code != 200 || !strings.Contains(body, "eim.ca=sha256:ab12cd eim.enroll=tok_EN-1.x console=ttyS0") {
		t.Fatalf("got %d:\n%s", code, body)
	}
	for _, bad := range []string{"a%20b", "a%0Aboot", "x%3Bshell", strings.Repeat("a", 129)} {
		if code, _, _ := get(t, srv.URL+"/boot/boot.ipxe?enroll="+bad); code != http.StatusBadRequest {
			t.Fatalf("enroll=%s: got %d, want 400", bad, code)
		}
	}
	if code, _, _ := get(t, srv.URL+"/boot/other"); code != http.StatusNotFound {
		t.Fatalf("unknown path: got %d, want 404", code)
	}
}

func TestBootArtifacts(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "boot")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := bootServer(t, dir)

	code, body, _ := get(t, srv.URL+"/boot/artifacts/vmlinuz")
	if code != 200 || body != "0123456789" {
		t.Fatalf("got %d %q", code, body)
	}
	code, body, hdr := get(t, srv.URL+"/boot/artifacts/vmlinuz", "Range", "bytes=2-4")
	if code != http.StatusPartialContent || body != "234" || hdr.Get("Content-Range") != "bytes 2-4/10" {
		t.Fatalf("range: got %d %q %q", code, body, hdr.Get("Content-Range"))
	}
	code, body, _ = get(t, srv.URL+"/boot/artifacts/initramfs.img")
	if code != http.StatusNotFound || !strings.Contains(body, "--boot-artifacts") {
		t.Fatalf("missing: got %d %q", code, body)
	}
	for _, p := range []string{"../secret", "..%2fsecret", "%2e%2e%2fsecret", "link", "sub", ".hidden", "..%5csecret"} {
		code, body, _ := get(t, srv.URL+"/boot/artifacts/"+p)
		if code == 200 || strings.Contains(body, "secret\n") || body == "secret" {
			t.Fatalf("%s: got %d %q, want refused", p, code, body)
		}
	}
}

func TestBootArtifactsDirMissing(t *testing.T) {
	srv := bootServer(t, filepath.Join(t.TempDir(), "none"))
	if code, body, _ := get(t, srv.URL+"/boot/artifacts/vmlinuz"); code != http.StatusNotFound || !strings.Contains(body, "vmlinuz") {
		t.Fatalf("got %d %q", code, body)
	}
}

// An artifact larger than the listener's write timeout allows is served
// whole to a reader that keeps reading: OS images take minutes.
func TestArtifactOutlastsWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	const size = 16 << 20
	f, err := os.Create(filepath.Join(dir, "os.img"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	srv := httptest.NewUnstartedServer(provisioning.BootHandler(provisioning.Options{ArtifactsDir: dir}))
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/boot/artifacts/os.img")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// A slow link: 1 MiB every 40 ms, 16 MiB in about twice the timeout.
	var n int64
	buf := make([]byte, 1<<20)
	for {
		m, err := io.ReadFull(resp.Body, buf)
		n += int64(m)
		if err != nil {
			break
		}
		time.Sleep(40 * time.Millisecond)
	}
	if n != size {
		t.Errorf("read %d bytes of %d", n, size)
	}
}
