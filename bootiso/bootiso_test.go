package bootiso_test

import (
	"bytes"
	"crypto/sha256"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim/bootiso"
)

// need skips the test without the tool, unless EIM_REQUIRE_TOOLS says CI
// installed it.
func need(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("EIM_REQUIRE_TOOLS") != "" {
			t.Fatalf("%s not installed (Debian's %s; .ci/run installs it)", tool, pkg)
		}
		t.Skipf("%s not installed (Debian's %s)", tool, pkg)
	}
}

// pattern is n bytes that differ at every offset modulo a large prime,
// so that a piece read from the wrong place shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ seed
	}
	return b
}

func write(t *testing.T, im *bootiso.Image) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "boot.iso")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.NewSectionReader(im, 0, im.Size())); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func build(t *testing.T, sizes map[string]int) (*bootiso.Image, map[string][]byte) {
	t.Helper()
	var files []bootiso.File
	data := map[string][]byte{}
	seed := byte(1)
	for _, p := range slices.Sorted(maps.Keys(sizes)) {
		n := sizes[p]
		b := pattern(n, seed)
		seed++
		data[p] = b
		files = append(files, bootiso.File{Path: p, Data: bytes.NewReader(b), Size: int64(n)})
	}
	im, err := bootiso.Build("EIM_MICROOS", files)
	if err != nil {
		t.Fatal(err)
	}
	if im.Size()%2048 != 0 {
		t.Fatalf("size %d: not whole CD sectors", im.Size())
	}
	return im, data
}

// TestElTorito: xorriso (Debian's, not ours) finds one UEFI boot image,
// no emulation, where Build put the partition; fsck.fat finds the
// partition image clean; mtools reads every file back byte for byte.
func TestElTorito(t *testing.T) {
	need(t, "xorriso", "xorriso")
	need(t, "fsck.fat", "dosfstools")
	need(t, "mcopy", "mtools")
	for name, sizes := range map[string]map[string]int{
		// A small partition (its entry counts its sectors) and one over
		// 32 MiB (the entry's 16 bits do not: 0, to the end of the CD).
		// Long names (with their short aliases) beside short ones.
		"small": {"EFI/BOOT/BOOTX64.EFI": 300_001, "loader/loader.conf": 100, "loader/entries/eim.conf": 300,
			"loader/entries/eim-second-entry-with-a-long-name.conf": 7, "loader/entries/eim-second-entry-with-a-long-name2.conf": 9,
			"vmlinuz": 1 << 20, "EMPTY": 0, "Mixed.Case.Name.txt": 33},
		"large": {"EFI/BOOT/BOOTX64.EFI": 1_000_003, "vmlinuz": 9_000_000, "initrd.img": 30_000_017},
	} {
		t.Run(name, func(t *testing.T) {
			im, data := build(t, sizes)
			iso := write(t, im)
			out, err := exec.Command("xorriso", "-indev", iso, "-report_el_torito", "plain").CombinedOutput()
			if err != nil {
				t.Fatalf("xorriso: %v\n%s", err, out)
			}
			rep := string(out)
			t.Logf("xorriso -report_el_torito plain:\n%s", rep)
			var entry string
			for _, l := range strings.Split(rep, "\n") {
				if strings.HasPrefix(l, "El Torito boot img :   1") {
					entry = l
				}
			}
			f := strings.Fields(entry)
			// "El Torito boot img :   1  UEFI  y   none  0x0000  0x00  SECTS  LBA"
			if len(f) != 13 || f[6] != "UEFI" || f[7] != "y" || f[8] != "none" || f[12] != "23" {
				t.Fatalf("boot image entry %q: want one bootable UEFI image, no emulation, at LBA 23", entry)
			}
			wantSects := im.ESPSize / 512
			if wantSects > 0xFFFF {
				wantSects = 0 // to the end of the CD
			}
			if f[11] != strconv.FormatInt(wantSects, 10) {
				t.Errorf("boot image entry %q: %s sectors, want %d", entry, f[11], wantSects)
			}
			if im.ESPOffset+im.ESPSize != im.Size() {
				t.Errorf("the partition image ends at %d, the CD at %d: want it last", im.ESPOffset+im.ESPSize, im.Size())
			}
			if strings.Contains(rep, "El Torito boot img :   2") {
				t.Errorf("more than one boot image:\n%s", rep)
			}
			// The partition image, cut out of the CD as the firmware sees it.
			esp := filepath.Join(t.TempDir(), "esp.img")
			b := make([]byte, im.ESPSize)
			if _, err := im.ReadAt(b, im.ESPOffset); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(esp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("fsck.fat", "-n", "-v", esp).CombinedOutput(); err != nil || !strings.Contains(string(out), "16 bit entries") {
				t.Fatalf("fsck.fat -n: %v\n%s", err, out)
			}
			for p, want := range data {
				got, err := exec.Command("mtype", "-i", esp, "::/"+p).Output()
				if err != nil {
					t.Fatalf("mtype %s: %v", p, err)
				}
				if sha256.Sum256(got) != sha256.Sum256(want) {
					t.Errorf("%s: %d bytes read back, not the %d written", p, len(got), len(want))
				}
			}
			// The ISO 9660 side: the catalog and the partition image as files.
			out, err = exec.Command("xorriso", "-indev", iso, "-find", "/", "-exec", "lsdl").CombinedOutput()
			if err != nil {
				t.Fatalf("xorriso -find: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "/EFIBOOT.IMG") || !strings.Contains(string(out), "/BOOT.CAT") {
				t.Errorf("the CD's files:\n%s\nwant /EFIBOOT.IMG and /BOOT.CAT", out)
			}
		})
	}
}

// TestSameBytes: the same files give the same image.
func TestSameBytes(t *testing.T) {
	sizes := map[string]int{"EFI/BOOT/BOOTX64.EFI": 5000, "A.TXT": 7, "EFI/X/Y.Z": 70_000}
	a, _ := build(t, sizes)
	b, _ := build(t, sizes)
	ha, hb := sha256.New(), sha256.New()
	io.Copy(ha, io.NewSectionReader(a, 0, a.Size()))
	io.Copy(hb, io.NewSectionReader(b, 0, b.Size()))
	if !bytes.Equal(ha.Sum(nil), hb.Sum(nil)) {
		t.Fatal("two builds of the same files differ")
	}
}

// TestReadAt: reads across pieces and past the end.
func TestReadAt(t *testing.T) {
	im, _ := build(t, map[string]int{"EFI/BOOT/BOOTX64.EFI": 3000})
	whole := make([]byte, im.Size())
	if n, err := im.ReadAt(whole, 0); n != len(whole) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt whole: %d, %v", n, err)
	}
	for _, off := range []int64{0, 16*2048 - 5, im.ESPOffset - 1, im.Size() - 100} {
		p := make([]byte, 300)
		n, err := im.ReadAt(p, off)
		want := min(int64(len(p)), im.Size()-off)
		if int64(n) != want || (want < int64(len(p)) && err != io.EOF) {
			t.Fatalf("ReadAt(%d): %d, %v; want %d", off, n, err, want)
		}
		if !bytes.Equal(p[:n], whole[off:off+int64(n)]) {
			t.Errorf("ReadAt(%d): bytes differ from the whole read's", off)
		}
	}
	if _, err := im.ReadAt(make([]byte, 1), im.Size()); err != io.EOF {
		t.Errorf("ReadAt at the end: %v, want EOF", err)
	}
}

// TestRefused: what Build does not make.
func TestRefused(t *testing.T) {
	f := func(p string) bootiso.File { return bootiso.File{Path: p, Data: bytes.NewReader(nil)} }
	for name, tc := range map[string]struct {
		vol   string
		files []bootiso.File
		want  string
	}{
		"no loader":   {"EIM", []bootiso.File{f("VMLINUZ")}, "no EFI/BOOT/BOOTX64.EFI"},
		"bad name":    {"EIM", []bootiso.File{f("EFI/BOOT/BOOTX64.EFI"), f("a:b")}, "not a FAT file name"},
		"twice":       {"EIM", []bootiso.File{f("EFI/BOOT/BOOTX64.EFI"), f("efi/boot/bootx64.efi")}, "twice"},
		"bad volume":  {"eim os", []bootiso.File{f("EFI/BOOT/BOOTX64.EFI")}, "volume ID"},
		"file as dir": {"EIM", []bootiso.File{f("EFI/BOOT/BOOTX64.EFI"), f("EFI/BOOT/BOOTX64.EFI/X")}, "twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bootiso.Build(tc.vol, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
