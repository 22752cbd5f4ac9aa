package osbuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eimhq/eim/agent/sysinit"
	"github.com/eimhq/eim/secureboot"
)

// RootLabel is the label of the test OS's root file system, where
// provisioning writes the agent configuration and the first-boot seed.
const RootLabel = "eim-root"

// TestOSOptions configure BuildTestOS.
type TestOSOptions struct {
	Kernel *Kernel
	// Modules to carry (with their dependencies); nil: DefaultModules.
	Modules []string
	// Agent is the static eim-agent binary, /init of the test OS.
	Agent string
	// Out is the image file to write: raw, or gzip'd when it ends in .gz
	// (the agent decompresses while it streams, by the URL's suffix).
	Out string
	// SyslinuxDir holds Debian's syslinux-common files (mbr/gptmbr.bin,
	// modules/efi64/ldlinux.e64); default /usr/lib/syslinux.
	SyslinuxDir string
	// SyslinuxEFI is syslinux for UEFI (Debian's syslinux-efi); default
	// /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi.
	SyslinuxEFI string
	// SecureBootKey and SecureBootCert, when set, sign the UEFI boot
	// loader (\EFI\BOOT\BOOTX64.EFI) for Secure Boot, so that a machine
	// enforcing it boots the installed image.
	SecureBootKey  crypto.Signer
	SecureBootCert *x509.Certificate
	Logger         *slog.Logger
}

// TestOS is the image BuildTestOS wrote.
type TestOS struct {
	Path    string
	Size    int64  // bytes of the file (compressed when .gz)
	SHA256  string // of the file, as an OS profile's sha256
	RawSize int64  // bytes of the disk image
}

// Layout of the test OS disk (512-byte sectors): GPT, with syslinux's GPT
// boot code in the protective MBR (BIOS), an EFI System Partition (FAT,
// marked legacy-BIOS-bootable) holding syslinux for BIOS and for UEFI
// (\EFI\BOOT\BOOTX64.EFI), the kernel and the initramfs, then the root
// file system (ext4, labelled RootLabel), the largest partition, where
// provisioning writes, with 16 MiB free after it in its partition (where
// full-disk encryption puts the LUKS2 header, moving the file system up).
// The same image boots on BIOS and UEFI machines.
const (
	sector    = 512
	firstLBA  = 2048 // partitions start at 1 MiB
	mib       = 1 << 20
	fatVolume = "45494d42"
	// luksHeaderRoom is the size of a LUKS2 header and keyslots area
	// (luks2.DataOffset), left free at the end of the root partition.
	luksHeaderRoom = 16 * mib
)

// syslinuxCfg boots the kernel with the initramfs at once, on the serial
// line and the screen.
const syslinuxCfg = `SERIAL 0 115200
DEFAULT eim
PROMPT 0
TIMEOUT 0
LABEL eim
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0 console=tty0 quiet
`

// BuildTestOS writes a small bootable disk image for BIOS and UEFI
// machines (and QEMU's SeaBIOS and OVMF): the kernel and an initramfs whose
// /init is the agent in node mode. At boot the agent mounts the root file system,
// applies the cloud-init seed provisioning wrote there (host name, CA
// certificates, files) and runs "eim-agent node" with the configuration
// provisioning wrote (/etc/eim/agent.json), keeping its state on that
// file system. It needs Debian's dosfstools, mtools, syslinux,
// syslinux-common, syslinux-efi and e2fsprogs.
func BuildTestOS(ctx context.Context, opts TestOSOptions) (*TestOS, error) {
	if opts.Kernel == nil || opts.Agent == "" || opts.Out == "" {
		return nil, errors.New("test OS: kernel, agent and output file are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.SyslinuxDir == "" {
		opts.SyslinuxDir = "/usr/lib/syslinux"
	}
	for tool, pkg := range map[string]string{"mkfs.fat": "dosfstools", "mcopy": "mtools", "mmd": "mtools", "syslinux": "syslinux", "mke2fs": "e2fsprogs"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("test OS: %s not found (install Debian's %s)", tool, pkg)
		}
	}
	if opts.SyslinuxEFI == "" {
		opts.SyslinuxEFI = "/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi"
	}
	mbr, err := os.ReadFile(filepath.Join(opts.SyslinuxDir, "mbr", "gptmbr.bin"))
	if err != nil {
		return nil, fmt.Errorf("test OS: syslinux GPT MBR (install Debian's syslinux-common): %w", err)
	}
	if len(mbr) < 440 {
		return nil, fmt.Errorf("test OS: %d bytes of MBR code, want 440", len(mbr))
	}
	efiLoader, err := os.ReadFile(opts.SyslinuxEFI)
	if err != nil {
		return nil, fmt.Errorf("test OS: syslinux for UEFI (install Debian's syslinux-efi): %w", err)
	}
	if opts.SecureBootKey != nil {
		if efiLoader, err = secureboot.Sign(efiLoader, opts.SecureBootCert, opts.SecureBootKey); err != nil {
			return nil, fmt.Errorf("test OS: sign %s for Secure Boot: %w", opts.SyslinuxEFI, err)
		}
	}
	efiLdlinux, err := os.ReadFile(filepath.Join(opts.SyslinuxDir, "modules", "efi64", "ldlinux.e64"))
	if err != nil {
		return nil, fmt.Errorf("test OS: syslinux for UEFI (install Debian's syslinux-common): %w", err)
	}
	if err := CheckStatic(opts.Agent); err != nil {
		return nil, err
	}
	mods, _, err := modules(opts.Kernel, opts.Modules)
	if err != nil {
		return nil, err
	}
	a, _, err := baseInitramfs(opts.Kernel, opts.Agent, mods, sysinit.Config{Mode: sysinit.ModeNode, RootLabel: RootLabel}, "EIM test OS")
	if err != nil {
		return nil, err
	}
	var initrd bytes.Buffer
	if err := a.WriteGzip(&initrd); err != nil {
		return nil, fmt.Errorf("test OS initramfs: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(opts.Out), ".eim-testos-")
	if err != nil {
		return nil, fmt.Errorf("test OS: %w", err)
	}
	defer os.RemoveAll(tmp)
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "E2FSPROGS_FAKE_TIME=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("test OS: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	files := map[string][]byte{"initrd.img": initrd.Bytes(), "syslinux.cfg": []byte(syslinuxCfg),
		"BOOTX64.EFI": efiLoader, "ldlinux.e64": efiLdlinux}
	kernel, err := os.ReadFile(opts.Kernel.Image)
	if err != nil {
		return nil, fmt.Errorf("test OS kernel: %w", err)
	}
	files["vmlinuz"] = kernel
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return nil, err
		}
	}

	// The boot partition: FAT with syslinux, sized for its files.
	bootMiB := max(16, (len(kernel)+initrd.Len())/mib+4)
	if err := run("mkfs.fat", "-C", "-F", "16", "-n", "EIMBOOT", "-i", fatVolume, "-h", strconv.Itoa(firstLBA), "boot.fat", strconv.Itoa(bootMiB*1024)); err != nil {
		return nil, err
	}
	if err := run("mmd", "-i", "boot.fat", "::/EFI", "::/EFI/BOOT"); err != nil {
		return nil, err
	}
	for _, c := range [][2]string{
		{"vmlinuz", "::/vmlinuz"}, {"initrd.img", "::/initrd.img"}, {"syslinux.cfg", "::/syslinux.cfg"},
		// syslinux for UEFI reads its configuration beside itself.
		{"BOOTX64.EFI", "::/EFI/BOOT/BOOTX64.EFI"}, {"ldlinux.e64", "::/EFI/BOOT/ldlinux.e64"}, {"syslinux.cfg", "::/EFI/BOOT/syslinux.cfg"},
	} {
		if err := run("mcopy", "-i", "boot.fat", c[0], c[1]); err != nil {
			return nil, err
		}
	}
	if err := run("syslinux", "--install", "boot.fat"); err != nil {
		return nil, err
	}

	// The root file system: what provisioning writes into, and the agent's
	// state. It is the largest partition (provisioning writes into the
	// largest one when the OS profile names none).
	rootMiB := max(32, bootMiB+16)
	rootDir := filepath.Join(tmp, "root")
	for _, d := range []string{"etc/eim", sysinit.SeedDir, "var/lib/eim-agent"} {
		if err := os.MkdirAll(filepath.Join(rootDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(rootDir, "etc/os-release"), []byte("NAME=\"EIM test OS\"\nID=eim\nPRETTY_NAME=\"EIM test OS\"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := run("mke2fs", "-q", "-F", "-t", "ext4", "-L", RootLabel, "-U", "45494d00-0000-4000-8000-000000000001",
		"-E", "root_owner=0:0,hash_seed=45494d00-0000-4000-8000-000000000002", "-d", "root", "root.ext4", strconv.Itoa(rootMiB)+"M"); err != nil {
		return nil, err
	}

	boot, err := os.ReadFile(filepath.Join(tmp, "boot.fat"))
	if err != nil {
		return nil, err
	}
	root, err := os.ReadFile(filepath.Join(tmp, "root.ext4"))
	if err != nil {
		return nil, err
	}
	// The root partition leaves luksHeaderRoom free after the file
	// system: the room full-disk encryption takes for the LUKS2 header
	// when it encrypts the root in place (it moves the file system up).
	root = append(root, make([]byte, luksHeaderRoom)...)
	disk := assembleGPT(mbr, []gptPart{
		{typ: typeESP, name: "EIM boot", attrs: gptAttrLegacyBoot, data: boot},
		{typ: typeLinux, name: RootLabel, data: root},
	})
	img, err := writeImage(opts.Out, disk)
	if err != nil {
		return nil, err
	}
	log.Info("built the test OS image", "file", img.Path, "bytes", img.Size, "disk_bytes", img.RawSize, "sha256", img.SHA256)
	return img, nil
}

// writeImage writes the disk to path (gzip'd when it ends in .gz) and
// describes the file.
func writeImage(path string, disk []byte) (*TestOS, error) {
	data := disk
	if strings.HasSuffix(path, ".gz") {
		var b bytes.Buffer
		z, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if _, err := io.Copy(z, bytes.NewReader(disk)); err != nil {
			return nil, err
		}
		if err := z.Close(); err != nil {
			return nil, err
		}
		data = b.Bytes()
	}
	if err := WriteFileAtomic(path, data, 0o644); err != nil {
		return nil, fmt.Errorf("test OS: %w", err)
	}
	sum := sha256.Sum256(data)
	return &TestOS{Path: path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), RawSize: int64(len(disk))}, nil
}
