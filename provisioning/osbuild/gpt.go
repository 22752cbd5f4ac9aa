package osbuild

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"unicode/utf16"
)

// GPT partition type GUIDs, in the mixed-endian form GPT stores them.
var (
	typeESP   = guid("C12A7328-F81F-11D2-BA4B-00A0C93EC93B")
	typeLinux = guid("0FC63DAF-8483-4772-8E79-3D69D8477DE4")
)

// gptAttrLegacyBoot marks the partition syslinux's GPT MBR boots on BIOS.
const gptAttrLegacyBoot = 1 << 2

// guid encodes a GUID's text form as GPT stores it (the first three fields
// little-endian).
func guid(s string) [16]byte {
	var b [16]byte
	hex := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			hex = append(hex, s[i])
		}
	}
	var raw [16]byte
	for i := range raw {
		raw[i] = unhex(hex[2*i])<<4 | unhex(hex[2*i+1])
	}
	copy(b[:], raw[:])
	b[0], b[1], b[2], b[3] = raw[3], raw[2], raw[1], raw[0]
	b[4], b[5] = raw[5], raw[4]
	b[6], b[7] = raw[7], raw[6]
	return b
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// fixedGUID is a version-4-shaped GUID derived from name, so the image is
// the same at every build.
func fixedGUID(name string) [16]byte {
	sum := sha256.Sum256([]byte("eim test OS " + name))
	var g [16]byte
	copy(g[:], sum[:16])
	g[7] = g[7]&0x0f | 0x40 // version 4 (mixed-endian field 3)
	g[8] = g[8]&0x3f | 0x80 // variant
	return g
}

// gptPart is one partition of the disk being laid out.
type gptPart struct {
	typ   [16]byte
	name  string
	attrs uint64
	data  []byte // a whole number of sectors
}

// assembleGPT lays out a GPT disk: the protective MBR with boot code, the
// primary header and entries, the partitions from 1 MiB on (each 1 MiB
// aligned), the backup entries and header.
func assembleGPT(code []byte, parts []gptPart) []byte {
	const entries, entrySize = 128, 128
	const entrySectors = entries * entrySize / sector
	lba := uint64(firstLBA)
	starts := make([]uint64, len(parts))
	for i, p := range parts {
		starts[i] = lba
		lba += uint64(len(p.data) / sector)
		lba = (lba + firstLBA - 1) / firstLBA * firstLBA
	}
	total := lba + entrySectors + 1 // the backup entries and header
	disk := make([]byte, total*sector)

	// Protective MBR: one partition of type 0xEE over the disk.
	copy(disk, code[:440])
	e := disk[446:462]
	copy(e[1:4], []byte{0x00, 0x02, 0x00})
	e[4] = 0xee
	copy(e[5:8], []byte{0xff, 0xff, 0xff})
	binary.LittleEndian.PutUint32(e[8:], 1)
	binary.LittleEndian.PutUint32(e[12:], uint32(min(total-1, 0xffffffff)))
	disk[510], disk[511] = 0x55, 0xaa

	table := make([]byte, entries*entrySize)
	for i, p := range parts {
		ent := table[i*entrySize:]
		copy(ent[0:16], p.typ[:])
		id := fixedGUID(p.name)
		copy(ent[16:32], id[:])
		binary.LittleEndian.PutUint64(ent[32:], starts[i])
		binary.LittleEndian.PutUint64(ent[40:], starts[i]+uint64(len(p.data)/sector)-1)
		binary.LittleEndian.PutUint64(ent[48:], p.attrs)
		for j, c := range utf16.Encode([]rune(p.name)) {
			if j < 36 {
				binary.LittleEndian.PutUint16(ent[56+2*j:], c)
			}
		}
		copy(disk[starts[i]*sector:], p.data)
	}
	tableCRC := crc32.ChecksumIEEE(table)
	backupTable := total - 1 - entrySectors
	header := func(self, other, tableLBA uint64) []byte {
		h := make([]byte, 92)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], self)
		binary.LittleEndian.PutUint64(h[32:], other)
		binary.LittleEndian.PutUint64(h[40:], 2+entrySectors) // first usable
		binary.LittleEndian.PutUint64(h[48:], backupTable-1)  // last usable
		disk := fixedGUID("disk")
		copy(h[56:72], disk[:])
		binary.LittleEndian.PutUint64(h[72:], tableLBA)
		binary.LittleEndian.PutUint32(h[80:], entries)
		binary.LittleEndian.PutUint32(h[84:], entrySize)
		binary.LittleEndian.PutUint32(h[88:], tableCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
		return h
	}
	copy(disk[1*sector:], header(1, total-1, 2))
	copy(disk[2*sector:], table)
	copy(disk[backupTable*sector:], table)
	copy(disk[(total-1)*sector:], header(total-1, 1, backupTable))
	return disk
}
