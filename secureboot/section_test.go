package secureboot_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// efiStub is systemd-stub as Debian's systemd-boot-efi ships it: what a
// unified kernel image is made of.
const efiStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

func TestAddSections(t *testing.T) {
	base := petest.Minimal(0x90)
	secs := []secureboot.Section{
		{Name: ".osrel", Data: []byte("ID=eim\n")},
		{Name: ".initrd", Data: bytes.Repeat([]byte{7}, 5000)},
	}
	out, err := secureboot.AddSections(base, secs...)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(base, petest.Minimal(0x90)) == false {
		t.Fatal("AddSections changed its input")
	}
	im, err := secureboot.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		got, ok := im.Section(s.Name)
		if !ok || !bytes.Equal(got, s.Data) {
			t.Errorf("section %s: got %d bytes (found %v), want %d", s.Name, len(got), ok, len(s.Data))
		}
	}
	if got, ok := im.Section(".text"); !ok || len(got) != 0x200 || got[0] != 0x90 {
		t.Errorf(".text: got %d bytes (found %v), want the original 512", len(got), ok)
	}
	// Headers as the loader reads them: three sections, each at an
	// aligned address after the last, SizeOfImage covering them.
	opt := 0x84 + 20
	if n := binary.LittleEndian.Uint16(out[0x84+2:]); n != 3 {
		t.Errorf("NumberOfSections %d, want 3", n)
	}
	var prevEnd uint32 = 0x1000 + 0x200
	for i := 1; i < 3; i++ {
		h := out[opt+240+i*40:]
		va, vs := binary.LittleEndian.Uint32(h[12:]), binary.LittleEndian.Uint32(h[8:])
		raw, ptr := binary.LittleEndian.Uint32(h[16:]), binary.LittleEndian.Uint32(h[20:])
		if va%0x1000 != 0 || va < prevEnd || ptr%0x200 != 0 || raw%0x200 != 0 || raw < vs {
			t.Errorf("section %d: VA %#x size %#x raw %#x at %#x: want aligned, after %#x", i, va, vs, raw, ptr, prevEnd)
		}
		prevEnd = va + vs
	}
	if soi := binary.LittleEndian.Uint32(out[opt+56:]); soi%0x1000 != 0 || soi < prevEnd {
		t.Errorf("SizeOfImage %#x, want aligned and at least %#x", soi, prevEnd)
	}
	// The result signs and verifies; changing a new section afterwards
	// is caught.
	key, cert, err := secureboot.NewKey("uki test", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := secureboot.Sign(out, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := secureboot.Verify(signed, cert); err != nil {
		t.Fatal(err)
	}
	sim, _ := secureboot.Parse(signed)
	initrd, _ := sim.Section(".initrd")
	initrd[100] ^= 1
	if err := secureboot.Verify(signed, cert); err == nil || !strings.Contains(err.Error(), "changed after signing") {
		t.Errorf("Verify of a UKI whose .initrd changed after signing: %v, want the image changed after signing", err)
	}
	// Adding to a signed image drops its signature.
	again, err := secureboot.AddSections(signed)
	if err != nil {
		t.Fatal(err)
	}
	if im, _ := secureboot.Parse(again); im.Signed() {
		t.Error("AddSections kept a signature that cannot cover the new section")
	}
}

func TestAddSectionsRefuses(t *testing.T) {
	base := petest.Minimal(1)
	many := make([]secureboot.Section, 3)
	for i := range many {
		many[i] = secureboot.Section{Name: ".s" + strconv.Itoa(i), Data: []byte{1}}
	}
	for _, tc := range []struct {
		name string
		secs []secureboot.Section
		want string
	}{
		{"long name", []secureboot.Section{{Name: ".cmdline12", Data: []byte{1}}}, "1 to 8 bytes"},
		{"empty name", []secureboot.Section{{Name: "", Data: []byte{1}}}, "1 to 8 bytes"},
		{"existing", []secureboot.Section{{Name: ".text", Data: []byte{1}}}, "has a section .text already"},
		{"no room", many, "no room for 3 more section headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secureboot.AddSections(base, tc.secs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := secureboot.AddSections([]byte("MZ not a PE")); err == nil {
		t.Error("AddSections of a non-PE: no error")
	}
}

// TestUKIFromStub makes a unified kernel image of Debian's systemd-stub
// and kernel as eim microos build does, signs it, and checks it with the
// independent tools: objdump -h lists the sections at the addresses the
// stub finds them, sbverify accepts the signature.
func TestUKIFromStub(t *testing.T) {
	need(t, efiStub, "sbverify", "objdump")
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		need(t, "/boot/vmlinuz-*")
	}
	kernel := read(t, kernels[len(kernels)-1])
	initrd := bytes.Repeat([]byte("initramfs "), 100000)
	cmdline := "console=ttyS0 console=tty0 eim.ca=sha256:" + strings.Repeat("ab", 32)
	secs := []secureboot.Section{
		{Name: ".osrel", Data: []byte("NAME=\"EIM micro-OS\"\nID=eim\n")},
		{Name: ".cmdline", Data: []byte(cmdline)},
		{Name: ".uname", Data: []byte("6.1.0-test")},
		{Name: ".initrd", Data: initrd},
		{Name: ".linux", Data: kernel},
	}
	uki, err := secureboot.AddSections(read(t, efiStub), secs...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, cert, certPath, _ := keyFiles(t, dir, "uki")
	signed, err := secureboot.Sign(uki, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "uki.efi")
	write(t, path, signed)
	if out, err := run("sbverify", "--cert", certPath, path); err != nil {
		t.Fatalf("sbverify --cert of the signed UKI: %v\n%s", err, out)
	}
	out, err := run("objdump", "-h", path)
	if err != nil {
		t.Fatalf("objdump -h: %v\n%s", err, out)
	}
	// objdump: "Idx Name Size VMA LMA File off Algn".
	row := regexp.MustCompile(`(?m)^\s*\d+\s+(\.\w+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)`)
	found := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		found[m[1]] = m[2:]
	}
	for _, sec := range secs {
		f, ok := found[sec.Name]
		if !ok {
			t.Errorf("objdump -h does not list %s:\n%s", sec.Name, out)
			continue
		}
		size, _ := strconv.ParseInt(f[0], 16, 64)
		vma, _ := strconv.ParseInt(f[1], 16, 64)
		off, _ := strconv.ParseInt(f[2], 16, 64)
		if int(size) != len(sec.Data) || vma%4096 != 0 || !bytes.Equal(signed[off:off+size], sec.Data) {
			t.Errorf("objdump -h: %s is %d bytes at VMA %#x, file offset %#x: want its %d bytes there, page-aligned", sec.Name, size, vma, off, len(sec.Data))
		}
	}
	// The stub's own sections are where they were.
	if _, ok := found[".text"]; !ok {
		t.Errorf("objdump -h lost the stub's .text:\n%s", out)
	}
}
