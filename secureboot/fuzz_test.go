package secureboot_test

import (
	"crypto"
	_ "crypto/sha256"
	"os"
	"testing"

	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// FuzzParse: the PE parser takes any bytes (an artifact an operator puts
// in the boot directory, a file the server checks before serving it)
// without panicking, and whatever it accepts can be digested and verified
// without panicking. The corpus is in testdata/fuzz/FuzzParse; Debian's
// iPXE is added when installed.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(ipxeEFI); err == nil {
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("MZ"))
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := secureboot.Parse(b)
		if err != nil {
			return
		}
		_ = im.Digest(crypto.SHA256)
		_ = secureboot.Verify(b)
	})
}

// FuzzAddSections: appending sections to whatever parses never panics,
// and what it returns parses and holds the sections.
func FuzzAddSections(f *testing.F) {
	f.Add(petest.Minimal(3), "abc")
	f.Add([]byte("MZ"), "")
	f.Fuzz(func(t *testing.T, b []byte, data string) {
		out, err := secureboot.AddSections(b, secureboot.Section{Name: ".cmdline", Data: []byte(data)})
		if err != nil {
			return
		}
		im, err := secureboot.Parse(out)
		if err != nil {
			t.Fatalf("the result does not parse: %v", err)
		}
		if got, ok := im.Section(".cmdline"); !ok || string(got) != data {
			t.Fatalf(".cmdline: got %q (found %v), want %q", got, ok, data)
		}
		_ = im.Digest(crypto.SHA256)
	})
}
