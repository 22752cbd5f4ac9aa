package secureboot

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Section is a named section of a PE image: what AddSections appends, and
// what Image.Section reads (a unified kernel image's .linux, .initrd,
// .cmdline …).
type Section struct {
	// Name is at most 8 bytes (the section table has no room for more).
	Name string
	Data []byte
}

// Section header fields (PE format specification, "Section Table").
const (
	secVirtualSize    = 8
	secVirtualAddress = 12
	secRawSize        = 16
	secRawPointer     = 20
	secFlags          = 36
	// scnData is IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ:
	// read-only data, what a UKI's sections are.
	scnData = 0x40000040
	// pageSize aligns the new sections in memory (what objcopy-built UKIs
	// do), even in a stub whose section alignment is smaller.
	pageSize = 0x1000
)

// Section returns the contents of the first section called name (its
// bytes in the file, up to its virtual size when that is smaller: the
// raw size is padded to the file alignment). They are the parsed image's
// own bytes, not a copy.
func (im *Image) Section(name string) ([]byte, bool) {
	for _, s := range im.sections {
		if s.name == name {
			n := s.size
			if s.vsize > 0 {
				n = min(n, s.vsize)
			}
			return im.data[s.off : s.off+n], true
		}
	}
	return nil, false
}

// SectionInMemory returns the contents of the first section called name
// as the loader maps it: VirtualSize bytes, the section's bytes in the
// file and zeros after them when its raw data is shorter (what
// systemd-stub measures of a unified kernel image's sections). ok is false
// when there is no such section, or its VirtualSize is 0 or larger than
// an image this package parses.
func (im *Image) SectionInMemory(name string) ([]byte, bool) {
	for _, s := range im.sections {
		if s.name != name {
			continue
		}
		if s.vsize <= 0 || s.vsize > maxImage {
			return nil, false
		}
		if s.vsize <= s.size {
			return im.data[s.off : s.off+s.vsize], true
		}
		b := make([]byte, s.vsize)
		copy(b, im.data[s.off:s.off+s.size])
		return b, true
	}
	return nil, false
}

// AddSections returns image with secs appended as new read-only data
// sections, in order: their headers after the section table (which must
// have room before the first section's data: a stub made for it, as
// systemd-stub is, has), their data after the last section's, aligned to
// the file alignment, and their virtual addresses after the image's last
// one, page-aligned; SizeOfImage, SizeOfInitializedData and the checksum
// follow. What followed the sections in the file (a COFF symbol table,
// which nothing loads) is dropped: left as a gap between sections,
// Authenticode implementations disagree on the digest (sbverify hashes
// the file's last bytes, EDK2 firmware the bytes after the sections). A
// signature the image had is dropped too, since it cannot cover the new
// sections: sign the result. image is not changed.
func AddSections(image []byte, secs ...Section) ([]byte, error) {
	im, err := Parse(image)
	if err != nil {
		return nil, err
	}
	h := im.hdr
	if !pow2(h.sectionAlign) || !pow2(h.fileAlign) || h.fileAlign > h.sectionAlign {
		return nil, fmt.Errorf("%w: section alignment %#x and file alignment %#x are not powers of two, the first at least the second", ErrNotPE, h.sectionAlign, h.fileAlign)
	}
	if h.nsec+len(secs) > 96 {
		return nil, fmt.Errorf("%d sections and %d more: more than PE's 96", h.nsec, len(secs))
	}
	// The new headers must fit in the header area, before any section's
	// data (the headers' bytes there are zero in a stub made for it).
	newTab := h.secTab + h.nsec*sectionSize
	room := im.sizeOfHeaders
	for _, s := range im.sections {
		room = min(room, s.off)
	}
	if newTab+len(secs)*sectionSize > room {
		return nil, fmt.Errorf("no room for %d more section headers: the section table ends at %d and the first section's data starts at %d (build the stub with room for them)", len(secs), newTab, room)
	}
	if !allZero(image[newTab : newTab+len(secs)*sectionSize]) {
		return nil, fmt.Errorf("no room for %d more section headers: the bytes after the section table (at %d) are in use", len(secs), newTab)
	}
	for _, s := range secs {
		if s.Name == "" || len(s.Name) > 8 || bytes.IndexByte([]byte(s.Name), 0) >= 0 {
			return nil, fmt.Errorf("section name %q: want 1 to 8 bytes, no NUL", s.Name)
		}
		if _, dup := im.Section(s.Name); dup {
			return nil, fmt.Errorf("the image has a section %s already", s.Name)
		}
	}
	end := im.hashedEnd(0)
	if h.vaEnd > 1<<31 {
		return nil, fmt.Errorf("%w: the image's sections end at %#x in memory, beyond what a PE image may span", ErrNotPE, h.vaEnd)
	}
	va := uint32(h.vaEnd)
	align := max(h.sectionAlign, pageSize)
	fileEnd := alignUp(end, int(h.fileAlign))
	total := fileEnd
	for _, s := range secs {
		total += alignUp(len(s.Data), int(h.fileAlign))
	}
	if total > maxImage || uint64(va)+uint64(total) > 1<<32-1 {
		return nil, fmt.Errorf("the image with its new sections would be %d bytes: too large", total)
	}
	out := make([]byte, fileEnd, total)
	copy(out, image[:end])
	binary.LittleEndian.PutUint64(out[im.certDir:], 0)
	// No COFF symbol table any more (PointerToSymbolTable,
	// NumberOfSymbols).
	binary.LittleEndian.PutUint64(out[h.coff+8:], 0)
	initData := binary.LittleEndian.Uint32(out[h.opt+8:])
	for i, s := range secs {
		va = alignUp32(va, align)
		raw := alignUp(len(s.Data), int(h.fileAlign))
		hdr := out[newTab+i*sectionSize : newTab+(i+1)*sectionSize]
		copy(hdr, s.Name)
		binary.LittleEndian.PutUint32(hdr[secVirtualSize:], uint32(len(s.Data)))
		binary.LittleEndian.PutUint32(hdr[secVirtualAddress:], va)
		binary.LittleEndian.PutUint32(hdr[secRawSize:], uint32(raw))
		binary.LittleEndian.PutUint32(hdr[secRawPointer:], uint32(len(out)))
		binary.LittleEndian.PutUint32(hdr[secFlags:], scnData)
		out = append(out, s.Data...)
		out = append(out, make([]byte, raw-len(s.Data))...)
		va += uint32(max(len(s.Data), 1))
		initData += uint32(raw)
	}
	binary.LittleEndian.PutUint16(out[h.coff+2:], uint16(h.nsec+len(secs)))
	binary.LittleEndian.PutUint32(out[h.opt+8:], initData)
	binary.LittleEndian.PutUint32(out[h.opt+56:], alignUp32(va, align))
	binary.LittleEndian.PutUint32(out[im.checksum:], peChecksum(out, im.checksum))
	if _, err := Parse(out); err != nil {
		return nil, fmt.Errorf("the image with its new sections does not parse: %w", err)
	}
	return out, nil
}

func pow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

func alignUp(n, a int) int { return (n + a - 1) / a * a }

func alignUp32(n, a uint32) uint32 { return (n + a - 1) / a * a }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
