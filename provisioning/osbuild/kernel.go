// Package osbuild builds what EIM boots: the micro-OS (a Linux kernel and
// an initramfs whose /init is the static eim-agent, with the kernel
// modules it needs, the server's CA and artifact-signing key, and a
// manifest of both files signed with that key) and a small test OS disk
// image (the same kernel, an initramfs with the agent in node mode, a boot
// loader and a root file system for what provisioning writes).
//
// Inputs come from the Debian packages installed on the build machine by
// default (linux-image-amd64 for /boot/vmlinuz-* and /lib/modules;
// syslinux, dosfstools, mtools and e2fsprogs for the test OS), and the
// micro-OS is reproducible: the same inputs give the same bytes.
package osbuild

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// DefaultModules are the kernel modules an initramfs carries when none are
// named, with their dependencies: virtual machines' NICs, disks and random
// number generator (without one, or a CPU with RDRAND, the kernel's
// generator can take minutes to be seeded, and TLS waits for it), the
// common wired NICs and disk controllers of edge hardware, and the file
// systems provisioning writes into, efivarfs (the boot entry of the
// installed disk on UEFI machines), and device-mapper's dm-crypt with
// aes-xts (full-disk encryption: the micro-OS encrypts the root, the test
// OS unlocks it; no modprobe loads the crypto templates on demand). Names
// the kernel lacks, or has built in, are skipped.
var DefaultModules = []string{
	"virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi", "virtio_rng",
	"e1000", "e1000e", "igb", "igc", "ixgbe", "r8169", "tg3",
	"ahci", "nvme", "sd_mod",
	"crc32c_generic", "crc32c_intel", "ext4", "vfat", "nls_cp437", "nls_utf8", "nls_iso8859_1",
	"efivarfs",
	"dm_mod", "dm_crypt", "ecb", "xts", "aesni_intel",
}

// Kernel is a kernel image and the modules built for it.
type Kernel struct {
	Image      string // path of the bzImage (vmlinuz)
	Release    string // "6.1.0-56-amd64"
	ModulesDir string // /lib/modules/<release>
}

// FindKernel returns the kernel at image (or, when image is "", the newest
// /boot/vmlinuz-*), its release read from its header, and its modules
// directory (modulesDir, or /lib/modules/<release>).
func FindKernel(image, modulesDir string) (*Kernel, error) {
	if image == "" {
		imgs, _ := filepath.Glob("/boot/vmlinuz-*")
		if len(imgs) == 0 {
			return nil, errors.New("no kernel in /boot (install Debian's linux-image-amd64, or name one with --kernel)")
		}
		sort.Slice(imgs, func(i, j int) bool { return versionLess(imgs[i], imgs[j]) })
		image = imgs[len(imgs)-1]
	}
	rel, err := KernelRelease(image)
	if err != nil {
		return nil, err
	}
	if modulesDir == "" {
		modulesDir = filepath.Join("/lib/modules", rel)
	}
	if _, err := os.Stat(filepath.Join(modulesDir, "modules.dep")); err != nil {
		return nil, fmt.Errorf("kernel %s: no modules.dep in %s (the modules of that kernel): %w", rel, modulesDir, err)
	}
	return &Kernel{Image: image, Release: rel, ModulesDir: modulesDir}, nil
}

// versionLess orders "vmlinuz-6.1.0-9-amd64" before "vmlinuz-6.1.0-10-amd64":
// numbers compare as numbers.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		if na >= 0 && nb >= 0 {
			if na != nb {
				return na < nb
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, s
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return -1, s
	}
	return n, s[i:]
}

// KernelRelease reads the release of an x86 bzImage from its setup header
// (the kernel_version string the header points at).
func KernelRelease(image string) (string, error) {
	f, err := os.Open(image)
	if err != nil {
		return "", fmt.Errorf("kernel: %w", err)
	}
	defer f.Close()
	hdr := make([]byte, 0x210)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return "", fmt.Errorf("kernel %s: %w", image, err)
	}
	if string(hdr[0x202:0x206]) != "HdrS" {
		return "", fmt.Errorf("kernel %s: not an x86 bzImage (no HdrS setup header)", image)
	}
	off := int64(binary.LittleEndian.Uint16(hdr[0x20e:])) + 0x200
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, off)
	v := strings.Fields(string(buf[:n]))
	if len(v) == 0 || v[0] == "" {
		return "", fmt.Errorf("kernel %s: no version string in the header", image)
	}
	return strings.TrimRight(v[0], "\x00"), nil
}

// Module is a kernel module as an initramfs carries it: uncompressed, at
// its path below the modules directory.
type Module struct {
	Path string // "kernel/drivers/net/virtio_net.ko"
	Data []byte
}

// Modules returns the named modules and all they depend on (modules.dep),
// in load order, uncompressed. Names may use - or _. A name the kernel has
// built in is skipped; an unknown one is an error when strict, else
// skipped and returned in missing.
func (k *Kernel) Modules(names []string, strict bool) (mods []Module, missing []string, err error) {
	deps, err := readDeps(filepath.Join(k.ModulesDir, "modules.dep"))
	if err != nil {
		return nil, nil, err
	}
	builtin, _ := readBuiltin(filepath.Join(k.ModulesDir, "modules.builtin"))
	byName := map[string]string{}
	for p := range deps {
		byName[moduleName(p)] = p
	}
	var order []string
	seen := map[string]bool{}
	var visit func(p string, chain []string) error
	visit = func(p string, chain []string) error {
		if seen[p] {
			return nil
		}
		if len(chain) > 64 {
			return fmt.Errorf("modules.dep: dependency chain too deep at %s", p)
		}
		seen[p] = true
		for _, d := range deps[p] {
			if err := visit(d, append(chain, p)); err != nil {
				return err
			}
		}
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		n = normalize(n)
		p, ok := byName[n]
		switch {
		case ok:
			if err := visit(p, nil); err != nil {
				return nil, nil, err
			}
		case builtin[n]:
		case strict:
			return nil, nil, fmt.Errorf("kernel %s has no module %q", k.Release, n)
		default:
			missing = append(missing, n)
		}
	}
	for _, p := range order {
		data, err := readModule(filepath.Join(k.ModulesDir, p))
		if err != nil {
			return nil, nil, err
		}
		mods = append(mods, Module{Path: stripCompression(p), Data: data})
	}
	return mods, missing, nil
}

func normalize(n string) string { return strings.ReplaceAll(strings.TrimSpace(n), "-", "_") }

// moduleName is the module name of a path in modules.dep.
func moduleName(p string) string {
	return normalize(strings.TrimSuffix(filepath.Base(stripCompression(p)), ".ko"))
}

func stripCompression(p string) string {
	for _, s := range []string{".xz", ".zst", ".gz"} {
		if strings.HasSuffix(p, ".ko"+s) {
			return strings.TrimSuffix(p, s)
		}
	}
	return p
}

// readDeps parses modules.dep: "path: dep dep …".
func readDeps(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	defer f.Close()
	deps := map[string][]string{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		mod, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		deps[strings.TrimSpace(mod)] = strings.Fields(rest)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return deps, nil
}

func readBuiltin(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out[moduleName(line)] = true
		}
	}
	return out, nil
}

// readModule reads a module file, decompressing .ko.xz, .ko.zst and .ko.gz
// (so the micro-OS needs no decompressor for modules).
func readModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kernel module: %w", err)
	}
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".xz"):
		r, err = xz.NewReader(bytes.NewReader(b))
	case strings.HasSuffix(path, ".zst"):
		var d *zstd.Decoder
		d, err = zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1))
		if err == nil {
			defer d.Close()
			r = d
		}
	case strings.HasSuffix(path, ".gz"):
		r, err = gzip.NewReader(bytes.NewReader(b))
	default:
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	return out, nil
}

// CheckStatic refuses an agent binary that is not a static x86-64 Linux
// executable: the initramfs has no dynamic loader and no libraries.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("agent %s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("agent %s: not an x86-64 executable", path)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("agent %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
