package bootiso

import (
	"encoding/binary"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf16"
)

// The EFI system partition image: FAT16 (the UEFI specification's FAT12,
// 16 or 32; FAT16 covers 2 to 2,000 MiB with one layout), 512-byte
// sectors, two FATs, a fixed root directory, long (VFAT) names beside
// the short ones where a name is not 8.3 in upper case (systemd-boot
// looks for loader/entries/*.conf). Each file is one run of
// clusters, so that its bytes can be read from the source at an offset
// rather than copied into the image.

const (
	fatSector     = 512
	fatReserved   = 4   // sectors before the first FAT (the boot sector first)
	fatRootEnts   = 512 // root directory entries (16 sectors)
	fatMinCluster = 4085
	fatMaxCluster = 65524
)

// fatDate is the fixed time stamp of every entry (2024-01-01 00:00), so
// that the same files give the same image.
const fatDate = (2024-1980)<<9 | 1<<5 | 1

// fatNode is a directory or a file of the ESP.
type fatNode struct {
	name     string // as given ("loader.conf")
	short    [11]byte
	long     bool  // name is not its short name: long-name entries go first
	file     *File // nil for a directory
	children []*fatNode
	cluster  uint32 // first cluster (0: empty file, or the root directory)
	clusters uint32
}

// shortChars are the characters a short name may hold besides A-Z, 0-9.
const shortChars = "_-~!#$%&'()@^`{}"

// shortName is n as a directory entry's 11 bytes when n is a short name
// itself (8.3, upper case).
func shortName(n string) ([11]byte, bool) {
	var out [11]byte
	for i := range out {
		out[i] = ' '
	}
	base, ext, _ := strings.Cut(n, ".")
	if base == "" || len(base) > 8 || len(ext) > 3 || strings.Contains(ext, ".") {
		return out, false
	}
	for _, c := range base + ext {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(shortChars, c)) {
			return out, false
		}
	}
	copy(out[:8], base)
	copy(out[8:], ext)
	return out, true
}

// alias is the short name of a long name n, the k-th of its directory
// with the same stem ("LOADER~1CON" for loader.conf).
func alias(n string, k int) [11]byte {
	var out [11]byte
	for i := range out {
		out[i] = ' '
	}
	clean := func(s string) string {
		var b strings.Builder
		for _, c := range strings.ToUpper(s) {
			if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(shortChars, c) {
				b.WriteRune(c)
			}
		}
		return b.String()
	}
	base, ext := n, ""
	if i := strings.LastIndex(n, "."); i > 0 {
		base, ext = n[:i], n[i+1:]
	}
	tail := fmt.Sprintf("~%d", k)
	b := clean(base)
	if b == "" {
		b = "X"
	}
	if len(b) > 8-len(tail) {
		b = b[:8-len(tail)]
	}
	copy(out[:8], b+tail)
	e := clean(ext)
	copy(out[8:], e[:min(3, len(e))])
	return out
}

// longOK reports whether n may be a long name.
func longOK(n string) error {
	if len(utf16.Encode([]rune(n))) > 255 {
		return fmt.Errorf("%q: longer than 255 characters", n)
	}
	if n == "." || n == ".." || strings.ContainsAny(n, "\\:*?\"<>|") || strings.TrimRight(n, ". ") != n {
		return fmt.Errorf("%q is not a FAT file name", n)
	}
	for _, c := range n {
		if c < 0x20 {
			return fmt.Errorf("%q: control character %q", n, c)
		}
	}
	return nil
}

// fatTree makes the directory tree of files (paths like
// "EFI/BOOT/BOOTX64.EFI"; names compared without case, as FAT does),
// each directory's entries sorted by name.
func fatTree(files []File) (*fatNode, error) {
	root := &fatNode{}
	for i := range files {
		f := &files[i]
		p := strings.Trim(f.Path, "/")
		if p == "" || path.Clean(p) != p {
			return nil, fmt.Errorf("esp: %q is not a clean relative path", f.Path)
		}
		dir := root
		parts := strings.Split(p, "/")
		for j, part := range parts {
			if err := longOK(part); err != nil {
				return nil, fmt.Errorf("esp: %s: %w", f.Path, err)
			}
			k := slices.IndexFunc(dir.children, func(c *fatNode) bool { return strings.EqualFold(c.name, part) })
			last := j == len(parts)-1
			switch {
			case k >= 0 && (last || dir.children[k].file != nil):
				return nil, fmt.Errorf("esp: %s: %s is there twice (or is both a file and a directory)", f.Path, part)
			case k >= 0:
				dir = dir.children[k]
			case last:
				dir.children = append(dir.children, &fatNode{name: part, file: f})
			default:
				n := &fatNode{name: part}
				dir.children = append(dir.children, n)
				dir = n
			}
		}
	}
	var name func(n *fatNode) error
	name = func(n *fatNode) error {
		slices.SortFunc(n.children, func(a, b *fatNode) int { return strings.Compare(a.name, b.name) })
		taken := map[[11]byte]bool{}
		for _, c := range n.children {
			if sn, ok := shortName(c.name); ok {
				c.short = sn
				taken[sn] = true
			}
		}
		for _, c := range n.children {
			if _, ok := shortName(c.name); ok {
				continue
			}
			c.long = true
			for k := 1; ; k++ {
				if sn := alias(c.name, k); !taken[sn] {
					c.short, taken[sn] = sn, true
					break
				}
			}
			if err := name(c); err != nil {
				return err
			}
		}
		for _, c := range n.children {
			if !c.long {
				if err := name(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := name(root); err != nil {
		return nil, err
	}
	if n := entriesOf(root); n > fatRootEnts-1 {
		return nil, fmt.Errorf("esp: %d entries in the root directory, at most %d", n, fatRootEnts-1)
	}
	return root, nil
}

// entriesOf is how many 32-byte entries n's children take.
func entriesOf(n *fatNode) int {
	sum := 0
	for _, c := range n.children {
		sum++
		if c.long {
			sum += (len(utf16.Encode([]rune(c.name))) + 12) / 13
		}
	}
	return sum
}

// buildESP lays out the FAT image of files and adds it to im at byte
// offset base; it returns the image's size (a multiple of 2048).
func buildESP(im *Image, base int64, files []File, label string) (int64, error) {
	root, err := fatTree(files)
	if err != nil {
		return 0, err
	}
	// The smallest cluster that numbers every byte with at most 65,524
	// clusters.
	var spc uint32 = 1
	var need uint32
	for ; spc <= 64; spc *= 2 {
		need = clustersFor(root, int64(spc)*fatSector, true)
		if need <= fatMaxCluster-16 {
			break
		}
	}
	if spc > 64 {
		return 0, fmt.Errorf("esp: the files need more than %d clusters of 32 KiB (2 GiB)", fatMaxCluster)
	}
	clusterSize := int64(spc) * fatSector
	count := max(need+16, fatMinCluster+11) // FAT16 from 4,085 clusters on
	// Round the whole image up to 2048-byte CD sectors.
	fatSectors := (uint32(count)*2 + 4 + fatSector - 1) / fatSector
	rootSectors := uint32(fatRootEnts * 32 / fatSector)
	dataStart := fatReserved + 2*fatSectors + rootSectors
	total := int64(dataStart) + int64(count)*int64(spc)
	for total%4 != 0 {
		total++
	}
	count = uint32((total - int64(dataStart)) / int64(spc))
	if count > fatMaxCluster {
		return 0, fmt.Errorf("esp: %d clusters, more than FAT16's %d", count, fatMaxCluster)
	}

	// Allocate clusters from 2 on, each file or directory one run.
	next := uint32(2)
	fat := make([]byte, int(fatSectors)*fatSector)
	binary.LittleEndian.PutUint16(fat[0:], 0xFFF8)
	binary.LittleEndian.PutUint16(fat[2:], 0xFFFF)
	var alloc func(n *fatNode, isRoot bool)
	alloc = func(n *fatNode, isRoot bool) {
		if !isRoot {
			n.clusters = nodeClusters(n, clusterSize)
			if n.clusters > 0 {
				n.cluster = next
				for i := range n.clusters {
					c := next + i
					v := uint16(c + 1)
					if i == n.clusters-1 {
						v = 0xFFFF
					}
					binary.LittleEndian.PutUint16(fat[2*c:], v)
				}
				next += n.clusters
			}
		}
		for _, c := range n.children {
			alloc(c, false)
		}
	}
	alloc(root, true)

	dataOff := func(cluster uint32) int64 {
		return base + (int64(dataStart)+int64(cluster-2)*int64(spc))*fatSector
	}
	im.addBytes(base, bootSector(uint32(total), spc, fatSectors, label))
	for i := range 2 {
		im.addBytes(base+int64(fatReserved+uint32(i)*fatSectors)*fatSector, fat)
	}
	// The root directory: the volume label (as the boot sector's), then the entries.
	rootDir := append(dirEntry(fmt.Sprintf("%-11.11s", strings.ToUpper(label)), 0x08, 0, 0), dirEntries(root)...)
	im.addBytes(base+int64(fatReserved+2*fatSectors)*fatSector, rootDir)
	var place func(n, parent *fatNode, parentIsRoot bool)
	place = func(n, parent *fatNode, parentIsRoot bool) {
		switch {
		case n.file != nil && n.file.Size > 0:
			im.add(dataOff(n.cluster), n.file.Data, n.file.Size)
		case n.file == nil:
			var p *fatNode
			if !parentIsRoot {
				p = parent
			}
			dot := append(dirEntry(".          ", 0x10, n.cluster, 0), dirEntry("..         ", 0x10, clusterOf(p), 0)...)
			im.addBytes(dataOff(n.cluster), append(dot, dirEntries(n)...))
		}
		for _, c := range n.children {
			place(c, n, false)
		}
	}
	for _, c := range root.children {
		place(c, root, true)
	}
	return total * fatSector, nil
}

func clusterOf(n *fatNode) uint32 {
	if n == nil {
		return 0
	}
	return n.cluster
}

// nodeClusters is how many clusters n takes.
func nodeClusters(n *fatNode, clusterSize int64) uint32 {
	var bytes int64
	if n.file != nil {
		bytes = n.file.Size
	} else {
		bytes = int64(entriesOf(n)+2) * 32
	}
	return uint32((bytes + clusterSize - 1) / clusterSize)
}

// clustersFor is how many clusters the tree below n takes.
func clustersFor(n *fatNode, clusterSize int64, isRoot bool) uint32 {
	var sum uint32
	if !isRoot {
		sum = nodeClusters(n, clusterSize)
	}
	for _, c := range n.children {
		sum += clustersFor(c, clusterSize, false)
	}
	return sum
}

// dirEntries are the directory entries of n's children, a long name's
// entries before its short one.
func dirEntries(n *fatNode) []byte {
	var b []byte
	for _, c := range n.children {
		if c.long {
			b = append(b, longEntries(c.name, c.short)...)
		}
		var attr byte = 0x20 // archive
		var size uint32
		if c.file == nil {
			attr = 0x10
		} else {
			size = uint32(c.file.Size)
		}
		b = append(b, dirEntry(string(c.short[:]), attr, c.cluster, size)...)
	}
	return b
}

// longEntries are the long-name (VFAT) entries of name, whose short name
// is short: 13 UTF-16 units each, the last part first, each carrying the
// short name's checksum.
func longEntries(name string, short [11]byte) []byte {
	var sum byte
	for _, c := range short {
		sum = (sum&1)<<7 + sum>>1 + c
	}
	u := utf16.Encode([]rune(name))
	n := (len(u) + 12) / 13
	if len(u)%13 != 0 {
		u = append(u, 0)
	}
	for len(u)%13 != 0 {
		u = append(u, 0xFFFF)
	}
	var b []byte
	for i := n; i >= 1; i-- {
		e := make([]byte, 32)
		e[0] = byte(i)
		if i == n {
			e[0] |= 0x40
		}
		e[11] = 0x0F
		e[13] = sum
		part := u[(i-1)*13 : i*13]
		for j, off := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
			binary.LittleEndian.PutUint16(e[off:], part[j])
		}
		b = append(b, e...)
	}
	return b
}

// dirEntry is one 32-byte directory entry.
func dirEntry(name11 string, attr byte, cluster, size uint32) []byte {
	e := make([]byte, 32)
	copy(e[0:11], name11)
	e[11] = attr
	for _, off := range []int{16, 18, 24} { // created, accessed, written dates
		binary.LittleEndian.PutUint16(e[off:], fatDate)
	}
	binary.LittleEndian.PutUint16(e[20:], uint16(cluster>>16))
	binary.LittleEndian.PutUint16(e[26:], uint16(cluster))
	binary.LittleEndian.PutUint32(e[28:], size)
	return e
}

// bootSector is the FAT16 boot sector (BIOS parameter block), with no
// boot code: the firmware reads the files, it runs nothing of the sector.
func bootSector(total uint32, spc, fatSectors uint32, label string) []byte {
	b := make([]byte, fatSector)
	copy(b[0:], []byte{0xEB, 0x3C, 0x90})
	copy(b[3:11], "EIM     ")
	binary.LittleEndian.PutUint16(b[11:], fatSector)
	b[13] = byte(spc)
	binary.LittleEndian.PutUint16(b[14:], fatReserved)
	b[16] = 2 // FATs
	binary.LittleEndian.PutUint16(b[17:], fatRootEnts)
	if total < 1<<16 {
		binary.LittleEndian.PutUint16(b[19:], uint16(total))
	} else {
		binary.LittleEndian.PutUint32(b[32:], total)
	}
	b[21] = 0xF8 // fixed media
	binary.LittleEndian.PutUint16(b[22:], uint16(fatSectors))
	binary.LittleEndian.PutUint16(b[24:], 32) // sectors per track
	binary.LittleEndian.PutUint16(b[26:], 64) // heads
	b[36] = 0x80                              // drive number
	b[38] = 0x29                              // extended boot signature
	binary.LittleEndian.PutUint32(b[39:], 0x45494d42)
	copy(b[43:54], fmt.Sprintf("%-11.11s", strings.ToUpper(label)))
	copy(b[54:62], "FAT16   ")
	b[510], b[511] = 0x55, 0xAA
	return b
}
