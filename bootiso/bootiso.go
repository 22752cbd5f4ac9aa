// Package bootiso makes a CD image that UEFI machines boot: an ISO 9660
// file system with an El Torito boot catalog whose one entry, for the
// UEFI platform, is an EFI system partition image (FAT) holding
// \EFI\BOOT\BOOTX64.EFI and what it loads. It is how a BMC's virtual
// media boots EIM's micro-OS (oob, docs/oob.md), made by the server
// without external tools.
//
// The image is not copied together: it is a list of pieces (the file
// systems' few metadata sectors, in memory, and the files' bytes, read
// from their sources at an offset when asked), an io.ReaderAt of its
// whole size. A server answers a BMC's range requests from it without
// holding the kernel and initramfs in memory or writing a copy to disk.
package bootiso

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// File is a file of the EFI system partition.
type File struct {
	// Path is its path in the partition, of 8.3 names ("EFI/BOOT/BOOTX64.EFI").
	Path string
	Data io.ReaderAt
	Size int64
}

// Image is a bootable CD image.
type Image struct {
	segs []segment
	size int64
	// ESPOffset and ESPSize locate the EFI system partition image
	// within the CD image (bytes).
	ESPOffset, ESPSize int64
}

type segment struct {
	off, size int64
	r         io.ReaderAt
}

func (im *Image) add(off int64, r io.ReaderAt, size int64) {
	im.segs = append(im.segs, segment{off: off, size: size, r: r})
}

func (im *Image) addBytes(off int64, b []byte) { im.add(off, bytes.NewReader(b), int64(len(b))) }

// Size is the image's size in bytes (a multiple of 2048).
func (im *Image) Size() int64 { return im.size }

// ReadAt reads the image; bytes no piece covers are zeros.
func (im *Image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("bootiso: negative offset")
	}
	if off >= im.size {
		return 0, io.EOF
	}
	var eof error
	if rest := im.size - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	clear(p)
	end := off + int64(len(p))
	for _, s := range im.segs {
		lo, hi := max(off, s.off), min(end, s.off+s.size)
		if lo >= hi {
			continue
		}
		n, err := s.r.ReadAt(p[lo-off:hi-off], lo-s.off)
		if int64(n) < hi-lo {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return int(lo - off), fmt.Errorf("bootiso: read at %d: %w", lo, err)
		}
	}
	return len(p), eof
}

const (
	sector = 2048
	// Where the fixed parts go (2048-byte sectors).
	lbaPVD     = 16
	lbaBoot    = 17
	lbaTerm    = 18
	lbaCatalog = 19
	lbaPathL   = 20
	lbaPathM   = 21
	lbaRoot    = 22
	lbaESP     = 23
)

// Names in the ISO 9660 root: the boot catalog and the partition image,
// for tools that list the CD (the firmware finds both through the boot
// record).
const (
	catalogName = "BOOT.CAT;1"
	espName     = "EFIBOOT.IMG;1"
)

// Build lays out a CD image labelled volumeID (d-characters: upper case
// letters, digits, _; at most 32) whose UEFI boot entry is a partition of
// files. Each file's Data is read when the image is read: it must stay
// as it is while the image is in use.
func Build(volumeID string, files []File) (*Image, error) {
	if volumeID == "" || len(volumeID) > 32 || strings.Trim(volumeID, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
		return nil, fmt.Errorf("bootiso: volume ID %q: want 1 to 32 of A-Z, 0-9, _", volumeID)
	}
	if !slices.ContainsFunc(files, func(f File) bool { return strings.EqualFold(strings.Trim(f.Path, "/"), "EFI/BOOT/BOOTX64.EFI") }) {
		return nil, errors.New("bootiso: no EFI/BOOT/BOOTX64.EFI among the files: UEFI firmware would find nothing to start")
	}
	im := &Image{ESPOffset: lbaESP * sector}
	espSize, err := buildESP(im, im.ESPOffset, files, volumeID)
	if err != nil {
		return nil, fmt.Errorf("bootiso: %w", err)
	}
	im.ESPSize = espSize
	espSectors := uint32(espSize / sector)
	total := uint32(lbaESP) + espSectors
	im.size = int64(total) * sector

	root := dirRecord([]byte{0}, lbaRoot, sector, true)
	im.addBytes(lbaPVD*sector, pvd(volumeID, total, root))
	im.addBytes(lbaBoot*sector, bootRecord())
	term := make([]byte, 7)
	copy(term, "\xffCD001\x01")
	im.addBytes(lbaTerm*sector, term)
	im.addBytes(lbaCatalog*sector, catalog(lbaESP, espSize))
	im.addBytes(lbaPathL*sector, pathTable(binary.LittleEndian))
	im.addBytes(lbaPathM*sector, pathTable(binary.BigEndian))
	var dir []byte
	dir = append(dir, dirRecord([]byte{0}, lbaRoot, sector, true)...)
	dir = append(dir, dirRecord([]byte{1}, lbaRoot, sector, true)...)
	dir = append(dir, dirRecord([]byte(catalogName), lbaCatalog, sector, false)...)
	dir = append(dir, dirRecord([]byte(espName), lbaESP, uint32(espSize), false)...)
	im.addBytes(lbaRoot*sector, dir)
	return im, nil
}

// both32 and both16 are ISO 9660's both-byte-order numbers.
func both32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

func both16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

// recDate is a directory record's fixed date (2024-01-01 00:00 UTC), so
// that the same files give the same image.
var recDate = []byte{124, 1, 1, 0, 0, 0, 0}

// volDate is a volume descriptor's date, the same.
const volDate = "2024010100000000\x00"

// dirRecord is a directory record.
func dirRecord(name []byte, lba, size uint32, dir bool) []byte {
	n := 33 + len(name)
	if n%2 == 1 {
		n++
	}
	r := make([]byte, n)
	r[0] = byte(n)
	both32(r[2:], lba)
	both32(r[10:], size)
	copy(r[18:25], recDate)
	if dir {
		r[25] = 2
	}
	both16(r[28:], 1) // volume sequence number
	r[32] = byte(len(name))
	copy(r[33:], name)
	return r
}

// pvd is the primary volume descriptor.
func pvd(volumeID string, total uint32, root []byte) []byte {
	b := make([]byte, sector)
	b[0] = 1
	copy(b[1:6], "CD001")
	b[6] = 1
	pad := func(off, n int, s string) { copy(b[off:off+n], fmt.Sprintf("%-*.*s", n, n, s)) }
	pad(8, 32, "")
	pad(40, 32, volumeID)
	both32(b[80:], total)
	both16(b[120:], 1) // volume set size
	both16(b[124:], 1) // volume sequence number
	both16(b[128:], sector)
	both32(b[132:], 10) // path table size: the root's entry
	binary.LittleEndian.PutUint32(b[140:], lbaPathL)
	binary.BigEndian.PutUint32(b[148:], lbaPathM)
	copy(b[156:190], root)
	pad(190, 128, "")
	pad(318, 128, "")
	pad(446, 128, "")
	pad(574, 128, "EIM")
	pad(702, 37, "")
	pad(739, 37, "")
	pad(776, 37, "")
	copy(b[813:], volDate)
	copy(b[830:], volDate)
	copy(b[847:], "0000000000000000\x00")
	copy(b[864:], "0000000000000000\x00")
	b[881] = 1
	return b
}

// bootRecord is El Torito's boot record volume descriptor.
func bootRecord() []byte {
	b := make([]byte, sector)
	copy(b[1:6], "CD001")
	b[6] = 1
	copy(b[7:], "EL TORITO SPECIFICATION")
	binary.LittleEndian.PutUint32(b[71:], lbaCatalog)
	return b
}

// platformEFI is El Torito's platform ID of UEFI.
const platformEFI = 0xEF

// catalog is the boot catalog: a validation entry for the UEFI platform
// and its default entry, the partition image without emulation. The
// entry counts 512-byte sectors in 16 bits: an image of more than
// 65,535 of them is given as 0, which UEFI firmware reads as "to the end
// of the CD" (the partition image is last) and whose FAT says its size.
func catalog(lba uint32, size int64) []byte {
	b := make([]byte, sector)
	b[0] = 1
	b[1] = platformEFI
	b[30], b[31] = 0x55, 0xAA
	var sum uint16
	for i := 0; i < 32; i += 2 {
		sum += binary.LittleEndian.Uint16(b[i:])
	}
	binary.LittleEndian.PutUint16(b[28:], -sum)
	e := b[32:64]
	e[0] = 0x88 // bootable
	e[1] = 0    // no emulation
	if n := size / 512; n <= 0xFFFF {
		binary.LittleEndian.PutUint16(e[6:], uint16(n))
	}
	binary.LittleEndian.PutUint32(e[8:], lba)
	return b
}

// pathTable is the path table of a CD whose only directory is the root.
func pathTable(order binary.ByteOrder) []byte {
	b := make([]byte, 10)
	b[0] = 1 // name length
	order.PutUint32(b[2:], lbaRoot)
	order.PutUint16(b[6:], 1) // parent: itself
	return b
}
