// Package attesttest writes TPM 2.0 event logs for tests of code that
// receives measured boots: a firmware-like boot that measured the given
// EFI binaries into PCR 4, with the PCR values a TPM would then hold.
// The real firmware's logs are in attest/testdata.
package attesttest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
)

// Boot is a measured boot: its event log and the SHA-256 bank it leaves.
type Boot struct {
	EventLog []byte
	PCRs     map[int][]byte
}

// NewBoot writes the log of a boot with Secure Boot on (the SecureBoot
// variable measured into PCR 7) that loaded EFI applications with the
// given Authenticode SHA-256 digests, in order, and the PCRs it leaves.
func NewBoot(apps ...[]byte) Boot {
	return NewUKIBoot(nil, apps...)
}

// Section is a section of a unified kernel image as systemd-stub
// measures it: its name and its contents as loaded.
type Section struct {
	Name string
	Data []byte
}

// NewUKIBoot is NewBoot whose last application is a unified kernel image
// whose stub then measured sections into PCR 11, in the order given: for
// each, an EV_IPL event of its name with the terminating NUL, then one of
// its contents, both described by the name in UTF-16 (as systemd-stub 252
// logs them).
func NewUKIBoot(sections []Section, apps ...[]byte) Boot {
	var log bytes.Buffer
	le := func(v any) { _ = binary.Write(&log, binary.LittleEndian, v) }
	// The header: a SHA-1-format event with the Spec ID Event03 of two
	// banks, SHA-1 and SHA-256.
	var spec bytes.Buffer
	spec.WriteString("Spec ID Event03\x00")
	_ = binary.Write(&spec, binary.LittleEndian, struct {
		Class                  uint32
		Minor, Major, Errata   uint8
		UintnSize              uint8
		N                      uint32
		Alg1, Size1, Alg2, Sz2 uint16
		Vendor                 uint8
	}{0, 0, 2, 0, 2, 2, 0x0004, 20, 0x000b, 32, 0})
	le(uint32(0))
	le(uint32(3)) // EV_NO_ACTION
	log.Write(make([]byte, 20))
	le(uint32(spec.Len()))
	log.Write(spec.Bytes())

	pcrs := map[int][]byte{}
	for i := 0; i < 24; i++ {
		pcrs[i] = make([]byte, 32)
	}
	event := func(pcr int, typ uint32, sha256Digest, data []byte) {
		s1 := sha1.Sum(data)
		le(uint32(pcr))
		le(typ)
		le(uint32(2))
		le(uint16(0x0004))
		log.Write(s1[:])
		le(uint16(0x000b))
		log.Write(sha256Digest)
		le(uint32(len(data)))
		log.Write(data)
		h := sha256.New()
		h.Write(pcrs[pcr])
		h.Write(sha256Digest)
		pcrs[pcr] = h.Sum(nil)
	}
	measure := func(pcr int, typ uint32, data []byte) {
		d := sha256.Sum256(data)
		event(pcr, typ, d[:], data)
	}

	// PCR 7: SecureBoot = 1 (UEFI_VARIABLE_DATA of the global variable).
	var v bytes.Buffer
	v.Write([]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c})
	_ = binary.Write(&v, binary.LittleEndian, uint64(len("SecureBoot")))
	_ = binary.Write(&v, binary.LittleEndian, uint64(1))
	for _, c := range "SecureBoot" {
		v.Write([]byte{byte(c), 0})
	}
	v.WriteByte(1)
	measure(7, 0x80000001, v.Bytes())
	for pcr := 0; pcr < 8; pcr++ {
		measure(pcr, 0x4, make([]byte, 4)) // EV_SEPARATOR
	}
	measure(4, 0x80000007, []byte("Calling EFI Application from Boot Option"))
	for _, d := range apps {
		// UEFI_IMAGE_LOAD_EVENT with a file path of \EFI\BOOT\BOOTX64.EFI.
		var ev bytes.Buffer
		path := filePath(`\EFI\BOOT\BOOTX64.EFI`)
		_ = binary.Write(&ev, binary.LittleEndian, [3]uint64{0x1000000, 0x10000, 0})
		_ = binary.Write(&ev, binary.LittleEndian, uint64(len(path)))
		ev.Write(path)
		event(4, 0x80000003, d, ev.Bytes())
	}
	for _, sec := range sections {
		var desc []byte
		for _, c := range sec.Name + "\x00" {
			desc = append(desc, byte(c), 0)
		}
		name := sha256.Sum256(append([]byte(sec.Name), 0))
		event(11, 0xd, name[:], desc)
		data := sha256.Sum256(sec.Data)
		event(11, 0xd, data[:], desc)
	}
	return Boot{EventLog: log.Bytes(), PCRs: pcrs}
}

// filePath is a device path of one media file path node and the end node.
func filePath(name string) []byte {
	var b bytes.Buffer
	var u []byte
	for _, c := range name + "\x00" {
		u = append(u, byte(c), 0)
	}
	b.Write([]byte{4, 4})
	_ = binary.Write(&b, binary.LittleEndian, uint16(4+len(u)))
	b.Write(u)
	b.Write([]byte{0x7f, 0xff, 4, 0})
	return b.Bytes()
}
