package provisioning_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// With RequireSecureBoot the boot handler serves an EFI executable only
// when it is signed with the deployment's db key: unsigned, signed with
// another key, or replaced by an unsigned file after it was served, it is
// refused with 403 and the reason; other artifacts are served as ever.
// Without it, everything is served.
func TestBootRefusesUnsignedEFI(t *testing.T) {
	key, cert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	okey, ocert, err := secureboot.NewKey("other", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	signed, err := secureboot.Sign(petest.Minimal(1), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := secureboot.Sign(petest.Minimal(1), ocert, okey)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"ipxe.efi": signed, "unsigned.efi": petest.Minimal(2), "foreign.efi": foreign,
		"initramfs.img": []byte("\x1f\x8b not an EFI executable"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(provisioning.BootHandler(provisioning.Options{
		ArtifactsDir: dir, SecureBootCert: cert, RequireSecureBoot: true,
	}))
	defer srv.Close()
	for _, c := range []struct {
		name, want string
		code       int
	}{
		{"ipxe.efi", "", 200},
		{"initramfs.img", "", 200},
		{"unsigned.efi", "the image is not signed", 403},
		{"foreign.efi", "signed by a key none of the given certificates holds", 403},
	} {
		code, body, _ := get(t, srv.URL+"/boot/artifacts/"+c.name)
		if code != c.code {
			t.Errorf("%s: got %d %q, want %d", c.name, code, body, c.code)
			continue
		}
		if code == 200 && body != string(files[c.name]) {
			t.Errorf("%s: body differs from the file", c.name)
		}
		if code == 403 && (!strings.Contains(body, "requires Secure Boot") || !strings.Contains(body, c.want)) {
			t.Errorf("%s: got %q, want the reason %q", c.name, body, c.want)
		}
	}
	// A second request is served from the check's cache; a file replaced
	// by an unsigned one is checked again.
	if code, _, _ := get(t, srv.URL+"/boot/artifacts/ipxe.efi", "Range", "bytes=0-1"); code != http.StatusPartialContent {
		t.Fatalf("range request: got %d, want 206", code)
	}
	path := filepath.Join(dir, "ipxe.efi")
	if err := os.WriteFile(path, petest.Minimal(3), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, srv.URL+"/boot/artifacts/ipxe.efi"); code != 403 {
		t.Fatalf("replaced by an unsigned file: got %d %q, want 403", code, body)
	}

	open := httptest.NewServer(provisioning.BootHandler(provisioning.Options{ArtifactsDir: dir, SecureBootCert: cert}))
	defer open.Close()
	if code, _, _ := get(t, open.URL+"/boot/artifacts/unsigned.efi"); code != 200 {
		t.Fatalf("without RequireSecureBoot: got %d, want 200", code)
	}
}
