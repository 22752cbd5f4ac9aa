package provisioning_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/provisioning/osbuild"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

const (
	ukiAgentURL = "https://10.0.0.1:8443"
	ukiCA       = "ab12cd"
)

// testUKI is a small stand-in for the micro-OS's unified kernel image: a
// PE image with the .cmdline and .initrd sections eim microos build adds,
// then given to sign.
func testUKI(t *testing.T, cmdline string, sign func([]byte) []byte) []byte {
	t.Helper()
	uki, err := secureboot.AddSections(petest.Minimal(1),
		secureboot.Section{Name: ".cmdline", Data: []byte(cmdline)},
		secureboot.Section{Name: ".initrd", Data: bytes.Repeat([]byte("initramfs"), 1000)})
	if err != nil {
		t.Fatal(err)
	}
	return sign(uki)
}

func ukiServer(t *testing.T, files map[string][]byte) (*httptest.Server, string) {
	t.Helper()
	key, cert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range files {
		if b == nil {
			b = testUKI(t, osbuild.UKICmdline(ukiAgentURL, ukiCA), func(b []byte) []byte {
				s, err := secureboot.Sign(b, cert, key)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(provisioning.BootHandler(provisioning.Options{
		AgentURL: ukiAgentURL, CAFingerprint: ukiCA, ArtifactsDir: dir, SecureBootCert: cert, RequireSecureBoot: true,
	}))
	t.Cleanup(srv.Close)
	return srv, dir
}

// A deployment that requires Secure Boot boots the micro-OS as its signed
// unified kernel image: the script loads that one file, with its signed
// command line, and no separate initramfs; a per-boot enrollment token is
// refused with the reason (it cannot be signed into the image).
func TestBootScriptUKI(t *testing.T) {
	srv, _ := ukiServer(t, map[string][]byte{provisioning.UKIName: nil})
	code, body, _ := get(t, srv.URL+"/boot/boot.ipxe")
	want := "kernel artifacts/eim-microos.efi eim.url=https://10.0.0.1:8443 eim.ca=sha256:ab12cd console=ttyS0 console=tty0 || goto failed\nboot "
	if code != 200 || !strings.HasPrefix(body, "#!ipxe\n") || !strings.Contains(body, want) {
		t.Fatalf("got %d, script:\n%s\nwant it to contain %q", code, body, want)
	}
	if strings.Contains(body, "initrd") || strings.Contains(body, "vmlinuz") {
		t.Errorf("the Secure Boot script loads more than the UKI:\n%s", body)
	}
	code, body, _ = get(t, srv.URL+"/boot/boot.ipxe?enroll=tok1")
	if code != http.StatusBadRequest || !strings.Contains(body, "per-boot enrollment token cannot be passed") {
		t.Errorf("enroll under Secure Boot: got %d %q, want 400 saying why", code, body)
	}
	if code, _, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.UKIName); code != 200 {
		t.Errorf("the signed UKI: got %d, want 200", code)
	}
}

// The script is not served when the UKI is missing or was built for
// another server: the node would load nothing, or call elsewhere.
func TestBootScriptUKIRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmdline string // "" : no UKI at all
		want    string
	}{
		{"missing", "", "no eim-microos.efi in the boot artifacts"},
		{"other URL", osbuild.UKICmdline("https://elsewhere:8443", ukiCA), `built for the agent URL "https://elsewhere:8443" and this server's is "https://10.0.0.1:8443"`},
		{"other CA", osbuild.UKICmdline(ukiAgentURL, "ffff"), "built for the CA sha256:ffff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{"ipxe.efi": []byte("placeholder")}
			if tc.cmdline != "" {
				files[provisioning.UKIName] = testUKI(t, tc.cmdline, func(b []byte) []byte { return b })
			}
			srv, _ := ukiServer(t, files)
			code, body, _ := get(t, srv.URL+"/boot/boot.ipxe")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %q, want 503 with %q", code, body, tc.want)
			}
		})
	}
}

// A UKI whose initramfs was changed after it was signed is refused with
// 403 and the reason, as the firmware would refuse it.
func TestBootRefusesTamperedUKI(t *testing.T) {
	srv, dir := ukiServer(t, map[string][]byte{provisioning.UKIName: nil})
	path := filepath.Join(dir, provisioning.UKIName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	im, err := secureboot.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	initrd, ok := im.Section(".initrd")
	if !ok {
		t.Fatal("no .initrd")
	}
	copy(initrd, "evil init")
	// A new file, as an attacker with write access to the directory would
	// put there (the check is cached by size and modification time).
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	code, body, _ := get(t, srv.URL+"/boot/artifacts/"+provisioning.UKIName)
	if code != http.StatusForbidden || !strings.Contains(body, "the image changed after signing") || !strings.Contains(body, "requires Secure Boot") {
		t.Errorf("tampered UKI: got %d %q, want 403 saying it changed after signing", code, body)
	}
}
