package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// UEFI boot entries written through efivarfs, for a micro-OS without
// efibootmgr: the same Boot#### load option "efibootmgr --create --disk D
// --part N --label L --loader P" makes (a hard drive device path to the
// EFI System Partition, then the loader's file path), put first in
// BootOrder.

// efiGlobal is the vendor GUID of the UEFI global variables (Boot####,
// BootOrder).
const efiGlobal = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// efiAttrs: non-volatile, boot-service and runtime access.
const efiAttrs = 0x7

var bootVarRE = regexp.MustCompile(`^Boot([0-9A-F]{4})-` + efiGlobal + `$`)

// loadOption encodes an EFI_LOAD_OPTION: active, described by label,
// booting loader from the partition e.
func loadOption(label, loader string, e esp) []byte {
	var path bytes.Buffer
	// Hard drive media device path (type 4, subtype 1), GPT.
	hd := make([]byte, 42)
	hd[0], hd[1] = 0x04, 0x01
	binary.LittleEndian.PutUint16(hd[2:], 42)
	binary.LittleEndian.PutUint32(hd[4:], uint32(e.number))
	binary.LittleEndian.PutUint64(hd[8:], e.start)
	binary.LittleEndian.PutUint64(hd[16:], e.size)
	copy(hd[24:40], e.guid[:])
	hd[40], hd[41] = 0x02, 0x02 // GPT, GUID signature
	path.Write(hd)
	// File path media device path (type 4, subtype 4).
	file := ucs2(loader)
	fp := make([]byte, 4)
	fp[0], fp[1] = 0x04, 0x04
	binary.LittleEndian.PutUint16(fp[2:], uint16(4+len(file)))
	path.Write(fp)
	path.Write(file)
	// End of the device path.
	path.Write([]byte{0x7f, 0xff, 0x04, 0x00})

	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(1)) // LOAD_OPTION_ACTIVE
	binary.Write(&b, binary.LittleEndian, uint16(path.Len()))
	b.Write(ucs2(label))
	b.Write(path.Bytes())
	return b.Bytes()
}

// ucs2 encodes s as NUL-terminated UTF-16LE.
func ucs2(s string) []byte {
	u := utf16.Encode([]rune(s + "\x00"))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// loadOptionLabel decodes the description of an EFI_LOAD_OPTION.
func loadOptionLabel(b []byte) string {
	if len(b) < 6 {
		return ""
	}
	var u []uint16
	for i := 6; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// efiVars reads and writes UEFI variables in an efivarfs directory: each
// file is the variable's 4-byte attributes, then its data.
type efiVars struct{ dir string }

func (v efiVars) path(name string) string { return filepath.Join(v.dir, name+"-"+efiGlobal) }

func (v efiVars) read(name string) ([]byte, error) {
	b, err := os.ReadFile(v.path(name))
	if err != nil {
		return nil, err
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("EFI variable %s: %d bytes", name, len(b))
	}
	return b[4:], nil
}

// write sets a variable in one write, as efivarfs requires.
func (v efiVars) write(name string, data []byte) error {
	p := v.path(name)
	clearImmutable(p)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(data))
	binary.LittleEndian.PutUint32(buf, efiAttrs)
	copy(buf[4:], data)
	_, err = f.Write(buf)
	if err == nil {
		// A plain file (tests) must not keep a longer old value; efivarfs
		// replaced the variable with the write already.
		_ = f.Truncate(int64(len(buf)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write EFI variable %s: %w", name, err)
	}
	return nil
}

func (v efiVars) remove(name string) error {
	p := v.path(name)
	clearImmutable(p)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete EFI variable %s: %w", name, err)
	}
	return nil
}

// addBootEntry replaces the boot entries labelled label by one booting
// loader from e, and puts it first in BootOrder.
func (v efiVars) addBootEntry(label, loader string, e esp, out io.Writer) error {
	ents, err := os.ReadDir(v.dir)
	if err != nil {
		return fmt.Errorf("EFI variables: %w", err)
	}
	used := map[uint16]bool{}
	var removed []uint16
	for _, ent := range ents {
		m := bootVarRE.FindStringSubmatch(ent.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.ParseUint(m[1], 16, 16)
		num := uint16(n)
		data, err := v.read("Boot" + m[1])
		if err == nil && loadOptionLabel(data) == label {
			if err := v.remove("Boot" + m[1]); err != nil {
				return err
			}
			removed = append(removed, num)
			fmt.Fprintf(out, "removed the old boot entry Boot%s %q\n", m[1], label)
			continue
		}
		used[num] = true
	}
	var num uint16
	for used[num] {
		num++
	}
	name := fmt.Sprintf("Boot%04X", num)
	if err := v.write(name, loadOption(label, loader, e)); err != nil {
		return err
	}
	order := []uint16{num}
	if b, err := v.read("BootOrder"); err == nil {
		for i := 0; i+1 < len(b); i += 2 {
			n := binary.LittleEndian.Uint16(b[i:])
			if n != num && !slices.Contains(removed, n) {
				order = append(order, n)
			}
		}
	}
	ob := make([]byte, 2*len(order))
	var names []string
	for i, n := range order {
		binary.LittleEndian.PutUint16(ob[2*i:], n)
		names = append(names, fmt.Sprintf("%04X", n))
	}
	if err := v.write("BootOrder", ob); err != nil {
		return err
	}
	fmt.Fprintf(out, "added boot entry %s %q (partition %d, %s); BootOrder %s\n", name, label, e.number, loader, strings.Join(names, ","))
	return nil
}
