package initramfs_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim/provisioning/initramfs"
)

// member is an entry as read back from an archive.
type member struct {
	name         string
	mode         uint32
	data         string
	rmaj, rmin   uint32
	nlink, mtime uint32
}

// readCpio parses a newc archive up to its trailer.
func readCpio(t *testing.T, b []byte) []member {
	t.Helper()
	var out []member
	off := 0
	for {
		if len(b)-off < 110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("offset %d: no newc header", off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("offset %d field %d: %v", off, i, err)
			}
			f[i] = uint32(v)
		}
		nameLen, size := int(f[11]), int(f[6])
		name := string(b[off+110 : off+110+nameLen-1])
		off += 110 + nameLen
		if off%4 != 0 {
			off += 4 - off%4
		}
		data := string(b[off : off+size])
		off += size
		if off%4 != 0 {
			off += 4 - off%4
		}
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Errorf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, member{name: name, mode: f[1], data: data, rmaj: f[9], rmin: f[10], nlink: f[4], mtime: f[5]})
	}
}

func build(t *testing.T, order []int) []byte {
	t.Helper()
	adds := []func(a *initramfs.Archive) error{
		func(a *initramfs.Archive) error { return a.AddFile("/init", []byte("#!binary"), 0o755) },
		func(a *initramfs.Archive) error {
			return a.AddFile("lib/modules/6.1/kernel/virtio_net.ko", []byte("module"), 0o644)
		},
		func(a *initramfs.Archive) error { return a.AddSymlink("bin/sh", "/init") },
		func(a *initramfs.Archive) error { return a.AddCharDevice("dev/console", 0o600, 5, 1) },
		func(a *initramfs.Archive) error { return a.AddDir("tmp", 0o1777) },
		func(a *initramfs.Archive) error { return a.AddFile("etc/eim/ca.crt", []byte("odd length."), 0o644) },
	}
	var a initramfs.Archive
	for _, i := range order {
		if err := adds[i](&a); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := a.WriteCpio(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestArchive(t *testing.T) {
	b := build(t, []int{0, 1, 2, 3, 4, 5})
	got := readCpio(t, b)
	var lines []string
	for _, m := range got {
		lines = append(lines, fmt.Sprintf("%s %o %q %d:%d", m.name, m.mode, m.data, m.rmaj, m.rmin))
		if m.mtime != 0 {
			t.Errorf("%s: mtime %d, want 0", m.name, m.mtime)
		}
	}
	wantAll := strings.Join([]string{
		`bin 40755 "" 0:0`,
		`bin/sh 120777 "/init" 0:0`,
		`dev 40755 "" 0:0`,
		`dev/console 20600 "" 5:1`,
		`etc 40755 "" 0:0`,
		`etc/eim 40755 "" 0:0`,
		`etc/eim/ca.crt 100644 "odd length." 0:0`,
		`init 100755 "#!binary" 0:0`,
		`lib 40755 "" 0:0`,
		`lib/modules 40755 "" 0:0`,
		`lib/modules/6.1 40755 "" 0:0`,
		`lib/modules/6.1/kernel 40755 "" 0:0`,
		`lib/modules/6.1/kernel/virtio_net.ko 100644 "module" 0:0`,
		`tmp 41777 "" 0:0`,
	}, "\n")
	if g := strings.Join(lines, "\n"); g != wantAll {
		t.Errorf("got\n%s\nwant\n%s", g, wantAll)
	}
}

// The same files in any order give the same bytes.
func TestReproducible(t *testing.T) {
	a := build(t, []int{0, 1, 2, 3, 4, 5})
	b := build(t, []int{5, 4, 3, 2, 1, 0})
	if !bytes.Equal(a, b) {
		t.Error("archives of the same files differ with the order they were added in")
	}
}

func TestRefusals(t *testing.T) {
	var a initramfs.Archive
	if err := a.AddFile("etc/x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.AddFile("/etc/x", nil, 0o644); err == nil {
		t.Error("a file added twice: got nil error")
	}
	if err := a.AddFile("etc/x/y", nil, 0o644); err == nil {
		t.Error("a file under a file: got nil error")
	}
	if err := a.AddFile("/", nil, 0o644); err == nil {
		t.Error("an empty name: got nil error")
	}
	if err := a.AddDir("etc", 0o700); err != nil {
		t.Errorf("a directory a file implies: %v", err)
	}
	if err := a.AddFile("../../escape", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := a.Names(); n[0] != "escape" {
		t.Errorf("names %q: .. must not leave the root", n)
	}
}

// The gzip stream decompresses to the cpio archive; cpio(1), when present,
// reads it.
func TestGzip(t *testing.T) {
	var a initramfs.Archive
	a.AddFile("init", bytes.Repeat([]byte("agent "), 1000), 0o755)
	a.AddFile("etc/os-release", []byte("NAME=EIM\n"), 0o644)
	var z, raw bytes.Buffer
	if err := a.WriteGzip(&z); err != nil {
		t.Fatal(err)
	}
	a.WriteCpio(&raw)
	r, err := gzip.NewReader(bytes.NewReader(z.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Name != "" || !r.Header.ModTime.IsZero() {
		t.Errorf("gzip header: name %q, time %v; want neither", r.Header.Name, r.Header.ModTime)
	}
	got, _ := io.ReadAll(r)
	if !bytes.Equal(got, raw.Bytes()) {
		t.Error("gzip stream is not the cpio archive")
	}
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Log("cpio(1) not installed; not cross-checked")
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(cpio, "-i", "-d", "--quiet")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(raw.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	if b, err := readFile(filepath.Join(dir, "etc/os-release")); err != nil || b != "NAME=EIM\n" {
		t.Errorf("cpio extracted etc/os-release = %q, %v", b, err)
	}
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
