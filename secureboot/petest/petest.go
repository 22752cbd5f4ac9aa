// Package petest makes small PE/COFF images for tests of code that signs
// or checks EFI executables.
package petest

import "encoding/binary"

// Minimal returns a valid 1 KiB PE32+ image (x86-64): headers and one
// section filled with fill, unsigned.
func Minimal(fill byte) []byte {
	b := make([]byte, 0x400)
	b[0], b[1] = 'M', 'Z'
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	coff := 0x84
	binary.LittleEndian.PutUint16(b[coff:], 0x8664) // Machine
	binary.LittleEndian.PutUint16(b[coff+2:], 1)    // NumberOfSections
	binary.LittleEndian.PutUint16(b[coff+16:], 240) // SizeOfOptionalHeader
	opt := coff + 20
	binary.LittleEndian.PutUint16(b[opt:], 0x20b)     // PE32+
	binary.LittleEndian.PutUint32(b[opt+32:], 0x1000) // SectionAlignment
	binary.LittleEndian.PutUint32(b[opt+36:], 0x200)  // FileAlignment
	binary.LittleEndian.PutUint32(b[opt+56:], 0x2000) // SizeOfImage
	binary.LittleEndian.PutUint32(b[opt+60:], 0x200)  // SizeOfHeaders
	binary.LittleEndian.PutUint32(b[opt+108:], 16)    // NumberOfRvaAndSizes
	sec := opt + 240
	copy(b[sec:], ".text")
	binary.LittleEndian.PutUint32(b[sec+8:], 0x200)   // VirtualSize
	binary.LittleEndian.PutUint32(b[sec+12:], 0x1000) // VirtualAddress
	binary.LittleEndian.PutUint32(b[sec+16:], 0x200)  // SizeOfRawData
	binary.LittleEndian.PutUint32(b[sec+20:], 0x200)  // PointerToRawData
	for i := 0x200; i < 0x400; i++ {
		b[i] = fill
	}
	return b
}

// Stub returns a valid PE32+ image like Minimal whose headers leave room
// for more section headers (1 KiB of headers, then one 512-byte section):
// a stand-in for systemd-stub, which a unified kernel image's sections
// are added to.
func Stub(fill byte) []byte {
	m := Minimal(fill)
	b := make([]byte, 0x600)
	copy(b, m[:0x200])
	opt := 0x84 + 20
	binary.LittleEndian.PutUint32(b[opt+60:], 0x400)     // SizeOfHeaders
	binary.LittleEndian.PutUint32(b[opt+240+20:], 0x400) // PointerToRawData
	copy(b[0x400:], m[0x200:])
	return b
}
