package redfishsim_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/internal/redfishsim"
)

// TestSetHTTPBootNext writes the HTTP boot option twice into a copy of
// Debian's OVMF variables: the store then holds one valid option, with
// the second URI, one valid BootNext and one BootOrder naming it (once);
// the first three are marked deleted. (TestVMDay0BMC's redfish-http case boots it.)
func TestSetHTTPBootNext(t *testing.T) {
	const vars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Skipf("Debian's ovmf is not installed: %v", err)
	}
	path := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"http://10.0.2.2:1/first.efi", "http://10.0.2.2:2/ipxe.efi"} {
		if err := redfishsim.SetHTTPBootNext(path, uri); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(b) || !bytes.Equal(got[:0x64], b[:0x64]) {
		t.Fatal("the volume's or the store's header changed")
	}
	valid := map[string][]byte{}
	deleted := 0
	for off := 0x64; binary.LittleEndian.Uint16(got[off:]) == 0x55aa; {
		ns, ds := int(binary.LittleEndian.Uint32(got[off+36:])), int(binary.LittleEndian.Uint32(got[off+40:]))
		var name []rune
		for i := 0; i+1 < ns-2; i += 2 {
			name = append(name, rune(binary.LittleEndian.Uint16(got[off+60+i:])))
		}
		switch got[off+2] {
		case 0x3f:
			if _, dup := valid[string(name)]; dup {
				t.Fatalf("two valid %s", string(name))
			}
			valid[string(name)] = got[off+60+ns : off+60+ns+ds]
		case 0x3d:
			deleted++
		default:
			t.Fatalf("variable %s: state %#x", string(name), got[off+2])
		}
		off = (off + 60 + ns + ds + 3) &^ 3
	}
	next, opt, order := valid["BootNext"], valid["Boot0100"], valid["BootOrder"]
	if len(valid) != 3 || deleted != 3 || len(next) != 2 || binary.LittleEndian.Uint16(next) != 0x0100 || !bytes.Equal(order, []byte{0, 1}) {
		t.Fatalf("variables: valid %v, %d deleted; want Boot0100, BootNext 0x0100 and BootOrder 0x0100 valid, the first three deleted", valid, deleted)
	}
	if binary.LittleEndian.Uint32(opt) != 1 || !strings.HasSuffix(string(opt), "\x03\x18\x1e\x00http://10.0.2.2:2/ipxe.efi\x7f\xff\x04\x00") {
		t.Fatalf("Boot0100: got %q, want an active option whose path is the second URI's node and the end", opt)
	}
}
