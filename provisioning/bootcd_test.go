package provisioning_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// cdArtifacts writes stand-ins of the micro-OS and systemd-boot.
func cdArtifacts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, n := range map[string]int{bootartifact.KernelFile: 700_001, bootartifact.InitrdFile: 1_300_003, bootartifact.BootLoaderFile: 90_000} {
		b := bytes.Repeat([]byte(name[:3]), n/3)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBootCD: the CD image is composed of the artifacts: a UEFI El
// Torito entry (checked with Debian's xorriso) whose partition holds the
// loader, the micro-OS and an entry with the deployment's command line
// (read back with mtools); ranges are served; a missing part is a 404
// naming it.
func TestBootCD(t *testing.T) {
	dir := cdArtifacts(t)
	srv := bootServer(t, dir)
	code, body, hdr := get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName+"?enroll=tok-1")
	if code != http.StatusOK || len(body)%2048 != 0 || len(body) < 2_000_000 {
		t.Fatalf("GET the CD: %d, %d bytes", code, len(body))
	}
	if hdr.Get("Accept-Ranges") != "bytes" {
		t.Errorf("Accept-Ranges %q: a BMC reads a virtual CD in ranges", hdr.Get("Accept-Ranges"))
	}
	code, part, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName+"?enroll=tok-1", "Range", "bytes=32768-34815")
	if code != http.StatusPartialContent || part != body[32768:34816] {
		t.Errorf("a range of the CD: %d, %d bytes; want 206 and the same bytes as the whole", code, len(part))
	}
	if !strings.HasPrefix(body[32768+1:], "CD001") {
		t.Errorf("no ISO 9660 volume descriptor at sector 16")
	}
	if code, _, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName+"?enroll=a%20b"); code != http.StatusBadRequest {
		t.Errorf("a bad enrollment token: %d, want 400", code)
	}

	for _, tool := range []string{"xorriso", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("EIM_REQUIRE_TOOLS") != "" {
				t.Fatalf("%s is not installed (.ci/run installs Debian's xorriso and mtools)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	iso := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(iso, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-indev", iso, "-report_el_torito", "plain").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "El Torito boot img :   1  UEFI  y   none") {
		t.Fatalf("xorriso -report_el_torito: %v\n%s", err, out)
	}
	// The partition image, as xorriso would extract it: at LBA 23 to the end.
	esp := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(esp, []byte(body[23*2048:]), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"EFI/BOOT/BOOTX64.EFI":    "sys",
		"vmlinuz":                 "vml",
		"initramfs.img":           "ini",
		"loader/loader.conf":      "timeout 0\neditor no\n",
		"loader/entries/eim.conf": "linux /vmlinuz\ninitrd /initramfs.img\noptions eim.url=https://10.0.0.1:8443 eim.ca=sha256:ab12cd eim.enroll=tok-1 console=ttyS0",
	} {
		got, err := exec.Command("mtype", "-i", esp, "::/"+path).Output()
		if err != nil {
			t.Fatalf("mtype %s: %v", path, err)
		}
		if !strings.Contains(string(got), want) {
			t.Errorf("%s on the CD: %.100q, want it to hold %q", path, got, want)
		}
	}

	if err := os.Remove(filepath.Join(dir, bootartifact.BootLoaderFile)); err != nil {
		t.Fatal(err)
	}
	code, body, _ = get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName)
	if code != http.StatusNotFound || !strings.Contains(body, bootartifact.BootLoaderFile) || !strings.Contains(body, "eim microos build") {
		t.Errorf("the CD without systemd-boot: %d %q, want 404 naming it and how to build it", code, body)
	}
	// A file of the CD's name is served as it is.
	if err := os.WriteFile(filepath.Join(dir, provisioning.CDName), []byte("own image"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body, _ = get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName); code != http.StatusOK || body != "own image" {
		t.Errorf("an operator's own CD image: %d %q", code, body)
	}
}

// TestBootCDSecureBoot: a deployment requiring Secure Boot serves no CD
// whose loader or kernel is not signed with its key.
func TestBootCDSecureBoot(t *testing.T) {
	key, cert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := secureboot.Sign(petest.Minimal(1), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := cdArtifacts(t)
	for name, b := range map[string][]byte{bootartifact.BootLoaderFile: signed, bootartifact.KernelFile: petest.Minimal(2)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(provisioning.BootHandler(provisioning.Options{AgentURL: "https://10.0.0.1:8443", CAFingerprint: "ab12cd",
		ArtifactsDir: dir, SecureBootCert: cert, RequireSecureBoot: true}))
	defer srv.Close()
	code, body, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName)
	if code != http.StatusForbidden || !strings.Contains(body, bootartifact.KernelFile) {
		t.Fatalf("the CD with an unsigned kernel: %d %q, want 403 naming it", code, body)
	}
	kernel, err := secureboot.Sign(petest.Minimal(2), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, bootartifact.KernelFile), kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.CDName); code != http.StatusOK {
		t.Fatalf("the CD, its loader and kernel signed: %d %.200q", code, body)
	}
}
