// Package secureboot signs EFI executables (PE/COFF images: iPXE, the
// micro-OS kernel) with the deployment's Secure Boot db key the way UEFI
// firmware checks them (Authenticode: a PKCS#7 SignedData over the image's
// Authenticode digest, in the image's certificate table), verifies such
// signatures, and encodes the EFI signature lists and authenticated
// variables an operator enrolls into firmware.
//
// It imports only the standard library: the agent may link it.
package secureboot

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// PE/COFF offsets and constants (Microsoft PE format specification).
const (
	dosLfanew      = 0x3c
	coffSize       = 20
	sectionSize    = 40
	magicPE32      = 0x10b
	magicPE32Plus  = 0x20b
	certDirIndex   = 4 // IMAGE_DIRECTORY_ENTRY_SECURITY
	checksumOffset = 64
	// maxImage bounds what is parsed (an EFI binary is a few MB; a kernel
	// tens of MB).
	maxImage = 1 << 30
)

// Image is a parsed PE/COFF file: where the fields Authenticode skips are,
// and the section table.
type Image struct {
	data []byte
	// checksum and certDir are the file offsets of the optional header's
	// CheckSum and of the certificate table's data directory entry.
	checksum, certDir int
	sizeOfHeaders     int
	sections          []section
	// certOff, certSize locate the certificate table (0, 0: none).
	certOff, certSize int
	hdr               headers
}

// headers are what AddSections needs of the headers: the COFF header's,
// the optional header's and the section table's offsets, the number of
// sections, the alignments and where the last section ends in memory.
type headers struct {
	coff, opt, secTab, nsec int
	sectionAlign, fileAlign uint32
	vaEnd                   uint64
}

// section is where a section's data is in the file; vsize is its size in
// memory (0 when the linker left it out).
type section struct {
	name             string
	off, size, vsize int
}

// ErrNotPE is returned for data that is not a PE/COFF image.
var ErrNotPE = errors.New("not a PE/COFF image")

// Parse reads the PE/COFF structure of b. b is kept, not copied.
func Parse(b []byte) (*Image, error) {
	if len(b) > maxImage {
		return nil, fmt.Errorf("%w: %d bytes is larger than %d", ErrNotPE, len(b), maxImage)
	}
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, fmt.Errorf("%w: no MZ header", ErrNotPE)
	}
	pe := int(binary.LittleEndian.Uint32(b[dosLfanew:]))
	if pe < 0x40 || pe > len(b)-4-coffSize {
		return nil, fmt.Errorf("%w: PE header offset %d out of the file", ErrNotPE, pe)
	}
	if string(b[pe:pe+4]) != "PE\x00\x00" {
		return nil, fmt.Errorf("%w: no PE signature", ErrNotPE)
	}
	coff := pe + 4
	nsec := int(binary.LittleEndian.Uint16(b[coff+2:]))
	optSize := int(binary.LittleEndian.Uint16(b[coff+16:]))
	opt := coff + coffSize
	if opt+optSize > len(b) || optSize < 2 {
		return nil, fmt.Errorf("%w: optional header out of the file", ErrNotPE)
	}
	var ddOff, nrvaOff int
	switch binary.LittleEndian.Uint16(b[opt:]) {
	case magicPE32:
		nrvaOff, ddOff = 92, 96
	case magicPE32Plus:
		nrvaOff, ddOff = 108, 112
	default:
		return nil, fmt.Errorf("%w: unknown optional header magic %#x", ErrNotPE, binary.LittleEndian.Uint16(b[opt:]))
	}
	if optSize < ddOff {
		return nil, fmt.Errorf("%w: optional header of %d bytes has no data directories", ErrNotPE, optSize)
	}
	nrva := int(binary.LittleEndian.Uint32(b[opt+nrvaOff:]))
	if nrva <= certDirIndex || ddOff+8*(certDirIndex+1) > optSize {
		return nil, fmt.Errorf("%w: no certificate table entry (%d data directories)", ErrNotPE, nrva)
	}
	im := &Image{
		data:          b,
		checksum:      opt + checksumOffset,
		certDir:       opt + ddOff + 8*certDirIndex,
		sizeOfHeaders: int(binary.LittleEndian.Uint32(b[opt+60:])),
		hdr: headers{coff: coff, opt: opt, secTab: opt + optSize, nsec: nsec,
			sectionAlign: binary.LittleEndian.Uint32(b[opt+32:]), fileAlign: binary.LittleEndian.Uint32(b[opt+36:])},
	}
	secTab := opt + optSize
	if nsec > 96 || secTab+nsec*sectionSize > len(b) {
		return nil, fmt.Errorf("%w: section table out of the file", ErrNotPE)
	}
	if im.sizeOfHeaders < secTab+nsec*sectionSize || im.sizeOfHeaders > len(b) {
		return nil, fmt.Errorf("%w: SizeOfHeaders %d does not cover the headers", ErrNotPE, im.sizeOfHeaders)
	}
	for i := 0; i < nsec; i++ {
		s := b[secTab+i*sectionSize:]
		size := int(binary.LittleEndian.Uint32(s[16:]))
		off := int(binary.LittleEndian.Uint32(s[20:]))
		vsize := binary.LittleEndian.Uint32(s[secVirtualSize:])
		va := binary.LittleEndian.Uint32(s[secVirtualAddress:])
		im.hdr.vaEnd = max(im.hdr.vaEnd, uint64(va)+uint64(max(vsize, uint32(size))))
		if size == 0 {
			continue
		}
		if off < im.sizeOfHeaders || off > len(b) || size > len(b)-off {
			return nil, fmt.Errorf("%w: section %d (%d bytes at %d) out of the file", ErrNotPE, i, size, off)
		}
		name := string(bytes.TrimRight(s[:8], "\x00"))
		im.sections = append(im.sections, section{name: name, off: off, size: size, vsize: int(vsize)})
	}
	sort.Slice(im.sections, func(i, j int) bool { return im.sections[i].off < im.sections[j].off })
	im.certOff = int(binary.LittleEndian.Uint32(b[im.certDir:]))
	im.certSize = int(binary.LittleEndian.Uint32(b[im.certDir+4:]))
	if im.certSize == 0 {
		im.certOff = 0
	} else if im.certOff < im.hashedEnd(0) || im.certOff > len(b) || im.certSize > len(b)-im.certOff {
		return nil, fmt.Errorf("%w: certificate table (%d bytes at %d) out of the file", ErrNotPE, im.certSize, im.certOff)
	} else if im.certOff+im.certSize != len(b) {
		return nil, fmt.Errorf("%w: data after the certificate table", ErrNotPE)
	}
	return im, nil
}

// hashedEnd is where the sections end (at least the headers, at least
// min).
func (im *Image) hashedEnd(min int) int {
	end := max(im.sizeOfHeaders, min)
	for _, s := range im.sections {
		end = max(end, s.off+s.size)
	}
	return end
}

// Signed says whether the image has a certificate table.
func (im *Image) Signed() bool { return im.certSize > 0 }

// Digest returns the image's Authenticode digest with hash h: the headers
// without the CheckSum and the certificate table's directory entry, the
// sections in file order, and whatever follows them up to the certificate
// table (as UEFI firmware computes it).
func (im *Image) Digest(h crypto.Hash) []byte {
	d := h.New()
	b := im.data
	d.Write(b[:im.checksum])
	d.Write(b[im.checksum+4 : im.certDir])
	d.Write(b[im.certDir+8 : im.sizeOfHeaders])
	at := im.sizeOfHeaders
	for _, s := range im.sections {
		// Overlapping sections are hashed as the file has them, once
		// each, as the specification's algorithm does.
		d.Write(b[s.off : s.off+s.size])
		at = max(at, s.off+s.size)
	}
	end := len(b)
	if im.certSize > 0 {
		end = im.certOff
	}
	if end > at {
		d.Write(b[at:end])
	}
	return d.Sum(nil)
}

// peChecksum is the PE image checksum of b (the optional header's CheckSum
// field, at off, counted as zero).
func peChecksum(b []byte, off int) uint32 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		if i == off || i == off+2 {
			continue
		}
		sum += uint64(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	sum = (sum & 0xffff) + (sum >> 16)
	return uint32(sum) + uint32(len(b))
}
