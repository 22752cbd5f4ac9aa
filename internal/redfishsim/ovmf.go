package redfishsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"unicode/utf16"
)

// OVMF's HTTP boot needs its boot file's URL either from DHCP, in an
// offer whose class identifier (option 60) is "HTTPClient" — which QEMU's
// user-mode network does not send — or from the boot option it is asked
// to boot: a load option whose device path is a URI node alone (UEFI's
// short-form URI path, which the boot manager expands onto the HTTP boot
// devices). SetHTTPBootNext writes such an option and BootNext into a
// VM's copy of OVMF's variables, for a Machine's BootArgs to honour a
// one-time UefiHttp override with its HttpBootUri: the firmware boots it
// once, deleting BootNext, and its boot order afterwards.

// httpBootOption is the number of the option SetHTTPBootNext writes.
const httpBootOption = 0x0100 // decimal-looking digits: no case for the firmware to print otherwise

// The UEFI global variables' vendor GUID (8BE4DF61-93CA-11D2-AA0D-00E098032B8C), as stored.
var efiGlobalVariable = [16]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}

// The authenticated variable store's signature GUID (AAF32C78-947B-439A-A180-2E144EC37792), as stored.
var authVariableStore = [16]byte{0x78, 0x2c, 0xf3, 0xaa, 0x7b, 0x94, 0x9a, 0x43, 0xa1, 0x80, 0x2e, 0x14, 0x4e, 0xc3, 0x77, 0x92}

const (
	varStartID   = 0x55aa
	varAdded     = 0x3f // a variable's State: valid (erased bits cleared as it was written)
	varHeaderLen = 60   // an authenticated variable's header
	storeHdrLen  = 28   // the variable store's header
	nvBsRt       = 0x7  // NON_VOLATILE | BOOTSERVICE_ACCESS | RUNTIME_ACCESS
)

// SetHTTPBootNext writes into the OVMF variables file at path a boot
// option that HTTP boots uri, BootNext naming it, and BootOrder with it
// first (the boot the firmware tries when BootNext is gone; provisioning
// writes its own order). The file must be a
// copy of OVMF's (authenticated variable store) and not in use by a
// running VM; an option and BootNext already there are superseded (the
// old ones marked deleted, as the firmware does).
func SetHTTPBootNext(path, uri string) error {
	if uri == "" || len(uri) > 1024 {
		return fmt.Errorf("redfishsim: HTTP boot URI %q: want 1 to 1024 bytes", uri)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("redfishsim: OVMF variables: %w", err)
	}
	if len(b) < 0x40 || string(b[0x28:0x2c]) != "_FVH" {
		return fmt.Errorf("redfishsim: %s: not a firmware volume", path)
	}
	store := int(binary.LittleEndian.Uint16(b[0x30:]))
	if store+storeHdrLen > len(b) || !bytes.Equal(b[store:store+16], authVariableStore[:]) {
		return fmt.Errorf("redfishsim: %s: no authenticated variable store after the volume's header", path)
	}
	end := store + int(binary.LittleEndian.Uint32(b[store+16:]))
	if end > len(b) {
		return fmt.Errorf("redfishsim: %s: variable store larger than the file", path)
	}
	name := fmt.Sprintf("Boot%04X", httpBootOption)
	order := binary.LittleEndian.AppendUint16(nil, httpBootOption) // first in BootOrder too
	off := store + storeHdrLen
	for off+varHeaderLen <= end && binary.LittleEndian.Uint16(b[off:]) == varStartID {
		ns, ds := int(binary.LittleEndian.Uint32(b[off+36:])), int(binary.LittleEndian.Uint32(b[off+40:]))
		n := off + varHeaderLen
		if n+ns+ds > end {
			return fmt.Errorf("redfishsim: %s: variable at %#x runs past the store", path, off)
		}
		if bytes.Equal(b[off+44:off+60], efiGlobalVariable[:]) && b[off+2] == varAdded {
			switch v := string(b[n : n+ns]); v {
			case string(ucs2("BootOrder")):
				for i := n + ns; i+1 < n+ns+ds; i += 2 {
					if o := binary.LittleEndian.Uint16(b[i:]); o != httpBootOption {
						order = binary.LittleEndian.AppendUint16(order, o)
					}
				}
				fallthrough
			case string(ucs2(name)), string(ucs2("BootNext")):
				b[off+2] &^= 0x02 // VAR_DELETED (0xfd) ANDed in: superseded
			}
		}
		off = (n + ns + ds + 3) &^ 3
	}
	// EFI_LOAD_OPTION: active, its device path a URI node and the end.
	path16 := make([]byte, 4, 4+len(uri)+4)
	path16[0], path16[1] = 3, 24 // MESSAGING_DEVICE_PATH, MSG_URI_DP
	binary.LittleEndian.PutUint16(path16[2:], uint16(4+len(uri)))
	path16 = append(append(path16, uri...), 0x7f, 0xff, 4, 0)
	opt := binary.LittleEndian.AppendUint32(nil, 1) // LOAD_OPTION_ACTIVE
	opt = binary.LittleEndian.AppendUint16(opt, uint16(len(path16)))
	opt = append(append(opt, ucs2("EIM HTTP boot")...), path16...)
	add := append(variable(name, opt), variable("BootNext", binary.LittleEndian.AppendUint16(nil, httpBootOption))...)
	add = append(add, variable("BootOrder", order)...)
	if off+len(add) > end {
		return fmt.Errorf("redfishsim: %s: variable store full", path)
	}
	copy(b[off:], add)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("redfishsim: OVMF variables: %w", err)
	}
	return nil
}

// variable is a global variable (non-volatile, boot and run time) as the
// store keeps it, padded to 4 bytes.
func variable(name string, data []byte) []byte {
	n := ucs2(name)
	v := make([]byte, varHeaderLen, varHeaderLen+len(n)+len(data)+3)
	binary.LittleEndian.PutUint16(v[0:], varStartID)
	v[2] = varAdded
	binary.LittleEndian.PutUint32(v[4:], nvBsRt)
	binary.LittleEndian.PutUint32(v[36:], uint32(len(n)))
	binary.LittleEndian.PutUint32(v[40:], uint32(len(data)))
	copy(v[44:], efiGlobalVariable[:])
	v = append(append(v, n...), data...)
	for len(v)%4 != 0 {
		v = append(v, 0xff)
	}
	return v
}

// ucs2 is s in UTF-16LE with its terminating NUL.
func ucs2(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s + "\x00")) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}
