package attest

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/eimhq/eim/secureboot"
)

// BootCodePCR is the PCR UEFI firmware extends with the Authenticode
// digest of every EFI application it loads (EV_EFI_BOOT_SERVICES_APPLICATION).
const BootCodePCR = 4

// Report is what a node sent of its measured boot.
type Report struct {
	// PCRs is the TPM's SHA-256 bank, by PCR index.
	PCRs map[int][]byte
	// EventLog is the firmware's event log as Linux exposes it
	// (binary_bios_measurements).
	EventLog []byte
	// SecureBoot is whether the node said it booted with Secure Boot
	// enforced (from its EFI variables): the firmware's own measurement
	// of the SecureBoot variable into PCR 7 must then say so too.
	SecureBoot bool
}

// Artifact is an EFI binary EIM serves for the boot, by its Authenticode
// SHA-256 digest: what the firmware measures into PCR 4 when it loads it.
// A unified kernel image has KernelImage too: what its stub measures into
// PCR 11.
type Artifact struct {
	Name        string
	Digest      []byte
	KernelImage *KernelImage
}

// ArtifactOf computes an EFI binary's Authenticode SHA-256 digest and,
// for a unified kernel image, the PCR 11 its sections make.
func ArtifactOf(name string, image []byte) (Artifact, error) {
	im, err := secureboot.Parse(image)
	if err != nil {
		return Artifact{}, fmt.Errorf("%s: %w", name, err)
	}
	return Artifact{Name: name, Digest: im.Digest(crypto.SHA256), KernelImage: KernelImageOf(im)}, nil
}

// Mismatch is a measured boot that does not verify: what the PCR's
// measurements or value show differs from what they should be.
type Mismatch struct {
	PCR    int
	Reason string
}

func (m *Mismatch) Error() string { return fmt.Sprintf("PCR %d: %s", m.PCR, m.Reason) }

// Verify checks a report: its event log parses, replays to the reported
// value of every PCR the log measures, every EFI application measured
// into PCR 4 is one of served, and, when one of them is a unified kernel
// image, PCR 11 is what its sections make. It returns nil when all holds,
// a *Mismatch naming the PCR when a value or a binary is not what it
// should be, and another error when the log cannot be read at all.
func Verify(r Report, served []Artifact) error {
	_, err := Check(r, served)
	return err
}

// Checked says what Verify compared beyond the replay and PCR 4.
type Checked struct {
	// KernelImage names the unified kernel image whose PCR 11 was
	// compared ("" when the boot ran none).
	KernelImage string
}

// Check is Verify, saying what it compared.
func Check(r Report, served []Artifact) (Checked, error) {
	var c Checked
	l, err := Parse(r.EventLog)
	if err != nil {
		return c, err
	}
	if err := Replay(l, r.PCRs); err != nil {
		return c, err
	}
	if r.SecureBoot {
		if on, found := SecureBootOf(l); !found {
			return c, &Mismatch{PCR: SecureBootPCR, Reason: "the node reported Secure Boot enforced, but the firmware measured no SecureBoot variable"}
		} else if !on {
			return c, &Mismatch{PCR: SecureBootPCR, Reason: "the node reported Secure Boot enforced, but the firmware measured SecureBoot off"}
		}
	}
	if err := CheckBootCode(l, served); err != nil {
		return c, err
	}
	c.KernelImage, err = CheckKernelImage(l, r.PCRs, served)
	return c, err
}

// SecureBootPCR is the PCR UEFI firmware extends with the Secure Boot
// policy: the SecureBoot, PK, KEK, db and dbx variables.
const SecureBootPCR = 7

// efiGlobalVariable is the GUID of the UEFI global variables (SecureBoot
// among them), in its byte order in memory.
var efiGlobalVariable = []byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}

// SecureBootOf reads the SecureBoot variable the firmware measured into
// PCR 7 (EV_EFI_VARIABLE_DRIVER_CONFIG, UEFI_VARIABLE_DATA): on is its
// value 1, found whether the log has it (with data that hashes to the
// event's SHA-256 digest, which the replay binds to the PCR).
func SecureBootOf(l *Log) (on, found bool) {
	for _, e := range l.Events {
		if e.PCR != SecureBootPCR || e.Type != EvEFIVariableDriverCfg {
			continue
		}
		r := reader{b: e.Data}
		guid := r.bytes(16)
		nameLen, dataLen := r.u64(), r.u64()
		if r.err != nil || nameLen > 64 || dataLen > uint64(r.left()) {
			continue
		}
		name := r.bytes(int(nameLen) * 2)
		data := r.bytes(int(dataLen))
		if r.err != nil || !bytes.Equal(guid, efiGlobalVariable) || utf16z(append(bytes.Clone(name), 0, 0)) != "SecureBoot" {
			continue
		}
		// The event's digest is that of its data: data that does not hash
		// to it is not what the PCR holds.
		if h := sha256.Sum256(e.Data); !bytes.Equal(h[:], e.Digests[AlgSHA256]) {
			continue
		}
		return len(data) == 1 && data[0] == 1, true
	}
	return false, false
}

// Replay extends a zero bank (PCR 0 starting at the startup locality)
// with each measured event's SHA-256 digest, and compares the result with
// pcrs for every PCR the log measures. The first PCR that differs, in index
// order, is the *Mismatch.
func Replay(l *Log, pcrs map[int][]byte) error {
	bank := map[int][]byte{}
	for _, e := range l.Events {
		if e.Type == EvNoAction {
			continue // not extended into any PCR
		}
		d, ok := e.Digests[AlgSHA256]
		if !ok {
			return fmt.Errorf("event log: event %d (PCR %d) has no SHA-256 digest", e.Index, e.PCR)
		}
		cur, ok := bank[e.PCR]
		if !ok {
			cur = make([]byte, 32)
			if e.PCR == 0 {
				cur[31] = l.Locality
			}
		}
		h := crypto.SHA256.New()
		h.Write(cur)
		h.Write(d)
		bank[e.PCR] = h.Sum(nil)
	}
	idx := make([]int, 0, len(bank))
	for i := range bank {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		got, ok := pcrs[i]
		switch {
		case !ok:
			return &Mismatch{PCR: i, Reason: "not reported, though the event log measures it"}
		case !bytes.Equal(got, bank[i]):
			return &Mismatch{PCR: i, Reason: fmt.Sprintf("the TPM's value %x is not what the event log replays to (%x)", got, bank[i])}
		}
	}
	return nil
}

// CheckBootCode checks that every EFI application the firmware measured
// into PCR 4 is one of served, by Authenticode digest, and that there is
// at least one (a boot that measured none did not load EIM's chain).
func CheckBootCode(l *Log, served []Artifact) error {
	known := map[string]string{}
	var names []string
	for _, a := range served {
		known[string(a.Digest)] = a.Name
		names = append(names, a.Name)
	}
	sort.Strings(names)
	apps := 0
	var bad *Event
	for i, e := range l.Events {
		if e.PCR != BootCodePCR || e.Type != EvEFIBootServicesApp {
			continue
		}
		apps++
		if _, ok := known[string(e.Digests[AlgSHA256])]; !ok && bad == nil {
			bad = &l.Events[i]
		}
	}
	if bad != nil {
		d := bad.Digests[AlgSHA256]
		// A binary loaded twice may be measured once with its device
		// path and once without (iPXE's LoadImage from memory): name it
		// by the path any of its events has.
		what := "an EFI application"
		for _, e := range l.Events {
			if e.PCR == BootCodePCR && e.Type == EvEFIBootServicesApp && bytes.Equal(e.Digests[AlgSHA256], d) {
				if p := ImageLoadPath(e.Data); p != "" {
					what += " from " + p
					break
				}
			}
		}
		return &Mismatch{PCR: BootCodePCR, Reason: fmt.Sprintf("unexpected boot code: %s with Authenticode SHA-256 %s (event %d) is none of the signed binaries EIM served (%s)",
			what, hex.EncodeToString(d), bad.Index, orNone(names))}
	}
	if apps == 0 {
		return &Mismatch{PCR: BootCodePCR, Reason: "no EFI application was measured: the boot did not run EIM's boot chain through UEFI"}
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ImageLoadPath is the device path of an EV_EFI_BOOT_SERVICES_APPLICATION
// event's UEFI_IMAGE_LOAD_EVENT in text, or "" when it has none.
func ImageLoadPath(data []byte) string {
	r := reader{b: data}
	r.u64() // ImageLocationInMemory
	r.u64() // ImageLengthInMemory
	r.u64() // ImageLinkTimeAddress
	n := r.u64()
	if r.err != nil || n == 0 || n > uint64(r.left()) {
		return ""
	}
	return DevicePath(r.bytes(int(n)))
}

// DevicePath renders a UEFI device path in the notation of the UEFI
// specification's text form for the nodes a boot names (PCI, MAC, IP,
// URI, hard drive, file path, firmware file); other nodes as
// Path(type,subtype).
func DevicePath(b []byte) string {
	var parts []string
	r := reader{b: b}
	for r.left() >= 4 {
		typ, sub := r.bytes(1)[0], r.bytes(1)[0]
		n := int(r.u16())
		if n < 4 || n-4 > r.left() {
			parts = append(parts, "…")
			break
		}
		d := r.bytes(n - 4)
		if typ == 0x7f {
			if sub == 0xff {
				break
			}
			continue // end of an instance
		}
		parts = append(parts, node(typ, sub, d))
	}
	return strings.Join(parts, "/")
}

func node(typ, sub byte, d []byte) string {
	switch {
	case typ == 1 && sub == 1 && len(d) == 2:
		return fmt.Sprintf("Pci(0x%x,0x%x)", d[1], d[0])
	case typ == 2 && sub == 1 && len(d) == 8:
		return fmt.Sprintf("PciRoot(0x%x)", uint32(d[4])|uint32(d[5])<<8|uint32(d[6])<<16|uint32(d[7])<<24)
	case typ == 3 && sub == 11 && len(d) >= 33:
		return "MAC(" + hex.EncodeToString(d[:6]) + ")"
	case typ == 3 && sub == 12:
		return "IPv4()"
	case typ == 3 && sub == 13:
		return "IPv6()"
	case typ == 3 && sub == 24:
		return "Uri(" + printable(d) + ")"
	case typ == 4 && sub == 1 && len(d) >= 4:
		return fmt.Sprintf("HD(%d)", uint32(d[0])|uint32(d[1])<<8|uint32(d[2])<<16|uint32(d[3])<<24)
	case typ == 4 && sub == 4:
		return utf16z(d)
	case typ == 4 && (sub == 6 || sub == 7) && len(d) == 16:
		f := "FvFile("
		if sub == 7 {
			f = "Fv("
		}
		return f + guid(d) + ")"
	}
	return fmt.Sprintf("Path(%d,%d)", typ, sub)
}

// utf16z is a NUL-terminated UTF-16LE string (ASCII kept, others "?").
func utf16z(d []byte) string {
	var sb strings.Builder
	for i := 0; i+1 < len(d); i += 2 {
		c := uint16(d[i]) | uint16(d[i+1])<<8
		switch {
		case c == 0:
			return sb.String()
		case c >= 0x20 && c < 0x7f:
			sb.WriteByte(byte(c))
		default:
			sb.WriteByte('?')
		}
	}
	return sb.String()
}

func printable(d []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return '?'
		}
		return r
	}, string(d))
}

func guid(d []byte) string {
	return fmt.Sprintf("%02X%02X%02X%02X-%02X%02X-%02X%02X-%X-%X",
		d[3], d[2], d[1], d[0], d[5], d[4], d[7], d[6], d[8:10], d[10:16])
}
