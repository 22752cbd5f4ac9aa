// Package initramfs writes Linux initramfs archives: the "newc" cpio format
// the kernel unpacks into its root file system, compressed with gzip.
//
// An Archive is reproducible: entries are written sorted by name, every
// directory a file needs is created, and owners, times and inode numbers
// are fixed, so the same files give the same bytes on every machine.
package initramfs

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// Mode bits of cpio entries (those of stat(2)).
const (
	typeDir     = 0o040000
	typeRegular = 0o100000
	typeSymlink = 0o120000
	typeChar    = 0o020000
)

// entry is one archive member.
type entry struct {
	mode         uint32 // type and permission bits
	data         []byte // file content, or a symbolic link's target
	major, minor uint32 // of a device node
}

// Archive is an initramfs being assembled. The zero value is empty and
// ready to use.
type Archive struct {
	entries map[string]entry
}

// clean turns name into the archive's form: relative, slash-separated,
// without "." or ".." ("/etc/eim/x" and "etc/eim/x" are the same entry).
func clean(name string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+name), "/")
	if c == "" || c == "." {
		return "", fmt.Errorf("initramfs: invalid name %q", name)
	}
	return c, nil
}

func (a *Archive) add(name string, e entry) error {
	c, err := clean(name)
	if err != nil {
		return err
	}
	if a.entries == nil {
		a.entries = map[string]entry{}
	}
	if old, ok := a.entries[c]; ok && (old.mode&0o170000 != typeDir || e.mode&0o170000 != typeDir) {
		return fmt.Errorf("initramfs: %s added twice", c)
	}
	// Parents must be directories: a file may not be both.
	for p := path.Dir(c); p != "."; p = path.Dir(p) {
		if old, ok := a.entries[p]; ok && old.mode&0o170000 != typeDir {
			return fmt.Errorf("initramfs: %s needs directory %s, which is a file", c, p)
		}
	}
	a.entries[c] = e
	return nil
}

// AddFile adds a regular file with the permission bits of perm.
func (a *Archive) AddFile(name string, data []byte, perm uint32) error {
	return a.add(name, entry{mode: typeRegular | perm&0o7777, data: data})
}

// AddDir adds a directory. Directories that files need are added anyway
// (mode 0755); AddDir is for empty ones and other modes.
func (a *Archive) AddDir(name string, perm uint32) error {
	return a.add(name, entry{mode: typeDir | perm&0o7777})
}

// AddSymlink adds a symbolic link to target.
func (a *Archive) AddSymlink(name, target string) error {
	if target == "" {
		return errors.New("initramfs: empty symbolic link target")
	}
	return a.add(name, entry{mode: typeSymlink | 0o777, data: []byte(target)})
}

// AddCharDevice adds a character device node (such as dev/console, which
// the kernel opens for init before any file system is mounted).
func (a *Archive) AddCharDevice(name string, perm, major, minor uint32) error {
	return a.add(name, entry{mode: typeChar | perm&0o7777, major: major, minor: minor})
}

// Names returns the names of the entries, implied directories included, in
// archive order.
func (a *Archive) Names() []string {
	names, _ := a.all()
	return names
}

// File is a regular file of an archive.
type File struct {
	Name string // its path in the archive, without a leading slash
	Data []byte
}

// Files returns the regular files, in archive order.
func (a *Archive) Files() []File {
	names, all := a.all()
	var out []File
	for _, n := range names {
		if e := all[n]; e.mode&0o170000 == typeRegular {
			out = append(out, File{Name: n, Data: e.data})
		}
	}
	return out
}

// all returns every entry, with the directories files imply (mode 0755),
// and their names in archive order.
func (a *Archive) all() ([]string, map[string]entry) {
	all := make(map[string]entry, len(a.entries))
	for name := range a.entries {
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			all[p] = entry{mode: typeDir | 0o755}
		}
	}
	// An explicitly added directory keeps its mode.
	for name, e := range a.entries {
		all[name] = e
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	// Sorted bytewise: a directory ("a") comes before its children ("a/b"),
	// which the kernel needs to create them.
	sort.Strings(names)
	return names, all
}

// WriteCpio writes the archive uncompressed (newc cpio, with its trailer).
func (a *Archive) WriteCpio(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	names, all := a.all()
	for i, name := range names {
		e := all[name]
		nlink := uint32(1)
		if e.mode&0o170000 == typeDir {
			nlink = 2
		}
		if err := writeEntry(bw, uint32(i+1), name, e, nlink); err != nil {
			return err
		}
	}
	if err := writeEntry(bw, 0, "TRAILER!!!", entry{}, 1); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteGzip writes the archive compressed with gzip, as the kernel and boot
// loaders take it. The gzip header carries no name and no time.
func (a *Archive) WriteGzip(w io.Writer) error {
	z, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := a.WriteCpio(z); err != nil {
		return err
	}
	return z.Close()
}

var zeros [4]byte

// writeEntry writes one newc header, the name and the data, each padded to
// four bytes.
func writeEntry(w *bufio.Writer, ino uint32, name string, e entry, nlink uint32) error {
	fields := []uint32{
		ino, e.mode, 0, 0, nlink, 0, // ino, mode, uid, gid, nlink, mtime
		uint32(len(e.data)), 0, 0, // filesize, devmajor, devminor
		e.major, e.minor, // rdevmajor, rdevminor
		uint32(len(name) + 1), 0, // namesize (with the NUL), check
	}
	if uint64(len(e.data)) > 0xffffffff {
		return fmt.Errorf("initramfs: %s is larger than 4 GiB", name)
	}
	if _, err := w.WriteString("070701"); err != nil {
		return err
	}
	for _, f := range fields {
		if _, err := fmt.Fprintf(w, "%08x", f); err != nil {
			return err
		}
	}
	w.WriteString(name)
	w.WriteByte(0)
	// The header is 110 bytes; name and header together are padded.
	w.Write(zeros[:pad(110+len(name)+1)])
	w.Write(e.data)
	_, err := w.Write(zeros[:pad(len(e.data))])
	return err
}

func pad(n int) int { return (4 - n%4) % 4 }
