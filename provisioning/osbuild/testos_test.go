//go:build linux

package osbuild

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim/agent/sysinit"
	"github.com/eimhq/eim/secureboot"
)

// The test OS image with Debian's tools, when they are installed: the root
// file system is the largest partition and carries its label.
func TestBuildTestOS(t *testing.T) {
	for _, tool := range []string{"mkfs.fat", "mcopy", "syslinux", "mke2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	for _, f := range []string{"/usr/lib/syslinux/mbr/gptmbr.bin", "/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s: syslinux-common or syslinux-efi not installed", f)
		}
	}
	k := fakeKernel(t, "6.1.0-99-test")
	out := filepath.Join(t.TempDir(), "os.img")
	img, err := BuildTestOS(context.Background(), TestOSOptions{Kernel: k, Modules: []string{"ext4"}, Agent: fakeAgent(t, false), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	disk, _ := os.ReadFile(out)
	if int64(len(disk)) != img.RawSize || img.Size != img.RawSize {
		t.Errorf("sizes: file %d, reported %d/%d", len(disk), img.Size, img.RawSize)
	}
	e := func(i int) (lba, n uint64) {
		ent := disk[2*512+128*i:]
		first, last := binary.LittleEndian.Uint64(ent[32:]), binary.LittleEndian.Uint64(ent[40:])
		return first, last - first + 1
	}
	bootLBA, bootN := e(0)
	rootLBA, rootN := e(1)
	if rootN <= bootN {
		t.Errorf("root partition (%d sectors) must be the largest (boot: %d)", rootN, bootN)
	}
	if got := sysinit.FSLabel(bytes.NewReader(disk[rootLBA*512:])); got != RootLabel {
		t.Errorf("root label %q, want %q", got, RootLabel)
	}
	// Full-disk encryption needs 16 MiB after the file system for the
	// LUKS2 header.
	sb := disk[rootLBA*512+1024:]
	fsBytes := uint64(binary.LittleEndian.Uint32(sb[4:])) << (10 + binary.LittleEndian.Uint32(sb[24:]))
	if free := rootN*512 - fsBytes; free < 16<<20 {
		t.Errorf("root partition: %d bytes free after the file system, want at least 16 MiB", free)
	}
	if got := sysinit.FSLabel(bytes.NewReader(disk[bootLBA*512:])); got != "EIMBOOT" {
		t.Errorf("boot label %q", got)
	}
}

// With the Secure Boot key, the UEFI boot loader on the image is signed
// with it (read back with mtools from the EFI System Partition).
func TestBuildTestOSSignsBootLoader(t *testing.T) {
	for _, tool := range []string{"mkfs.fat", "mcopy", "syslinux", "mke2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	for _, f := range []string{"/usr/lib/syslinux/mbr/gptmbr.bin", "/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s: syslinux-common or syslinux-efi not installed", f)
		}
	}
	sbKey, sbCert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "os.img")
	if _, err := BuildTestOS(context.Background(), TestOSOptions{Kernel: fakeKernel(t, "6.1.0-99-test"), Modules: []string{"ext4"},
		Agent: fakeAgent(t, false), Out: out, SecureBootKey: sbKey, SecureBootCert: sbCert}); err != nil {
		t.Fatal(err)
	}
	disk, _ := os.ReadFile(out)
	bootLBA := binary.LittleEndian.Uint64(disk[2*512+32:])
	cmd := exec.Command("mcopy", "-n", "-i", fmt.Sprintf("%s@@%d", out, bootLBA*512), "::/EFI/BOOT/BOOTX64.EFI", "-")
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	loader, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcopy BOOTX64.EFI: %v", err)
	}
	if err := secureboot.Verify(loader, sbCert); err != nil {
		t.Errorf("BOOTX64.EFI: %v, want signed with the key", err)
	}
	plain, _ := os.ReadFile("/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi")
	if err := secureboot.Verify(plain, sbCert); err == nil {
		t.Errorf("Debian's syslinux.efi verifies with a fresh key: the check above proves nothing")
	}
}
