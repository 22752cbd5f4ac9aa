package agent

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/eimhq/eim/fde/luks2"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// Machine is the real Executor: it erases and writes the machine's disks,
// mounts partitions to write files, sets the EFI boot order and reboots.
type Machine struct {
	// SysRoot is where /sys is found ("/" or "" on a real machine).
	SysRoot string
	// Command runs an external program (mount, umount, wipefs, efibootmgr,
	// reboot …) and returns its combined output; nil runs it for real.
	Command func(ctx context.Context, name string, args ...string) ([]byte, error)
	// LookPath finds a program; nil uses exec.LookPath.
	LookPath func(name string) (string, error)
	// DevDir is where block devices are ("/dev" when "").
	DevDir string
	// OpenTPM opens the TPM 2.0 that seals the disk key of encrypt-root;
	// nil opens the kernel's (/dev/tpmrm0).
	OpenTPM func() (io.ReadWriteCloser, error)
}

var _ Executor = (*Machine)(nil)

// Run implements Executor.
func (m *Machine) Run(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
	switch s := a.GetSpec().(type) {
	case *provisioningv1.Action_EraseDisk:
		return m.erase(ctx, s.EraseDisk.GetDevice(), out)
	case *provisioningv1.Action_StreamImage:
		return m.stream(ctx, s.StreamImage, out)
	case *provisioningv1.Action_WriteFile:
		return m.writeFile(ctx, s.WriteFile, out)
	case *provisioningv1.Action_WriteAgentConfig:
		return errors.New("write-agent-config must be turned into a write-file by the Provisioner")
	case *provisioningv1.Action_SetBootOrder:
		return m.setBootOrder(ctx, s.SetBootOrder, out)
	case *provisioningv1.Action_EncryptRoot:
		return m.encryptRoot(ctx, s.EncryptRoot, out)
	case *provisioningv1.Action_Reboot:
		fmt.Fprintln(out, "rebooting")
		_, err := m.command(ctx, "reboot", "-f")
		return err
	default:
		return fmt.Errorf("action %q: unknown kind", a.GetName())
	}
}

func (m *Machine) command(ctx context.Context, name string, args ...string) ([]byte, error) {
	if m.Command != nil {
		return m.Command(ctx, name, args...)
	}
	if _, err := exec.LookPath(name); err != nil {
		// The micro-OS EIM builds holds the agent alone: what the tools
		// would do, it does with system calls.
		if f, ok := builtins[name]; ok {
			return nil, f(args)
		}
	}
	b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return b, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return b, nil
}

func (m *Machine) lookPath(name string) (string, error) {
	if m.LookPath != nil {
		return m.LookPath(name)
	}
	return exec.LookPath(name)
}

func (m *Machine) devDir() string {
	if m.DevDir == "" {
		return "/dev"
	}
	return m.DevDir
}

// device returns the device to use: dev, or the first non-removable disk
// of /sys/block when dev is "".
func (m *Machine) device(dev string) (string, error) {
	if dev != "" {
		return dev, nil
	}
	dir := filepath.Join(m.SysRoot, "sys", "block")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("find disk: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if skipDisk(n) {
			continue
		}
		if v, _ := readTrimmed(filepath.Join(dir, n, "removable")); v == "1" {
			continue
		}
		if v, _ := readTrimmed(filepath.Join(dir, n, "size")); v == "" || v == "0" {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "", fmt.Errorf("no non-removable disk in %s", dir)
	}
	return filepath.Join(m.devDir(), names[0]), nil
}

func skipDisk(name string) bool {
	for _, p := range []string{"loop", "ram", "sr", "zram", "dm-", "md", "fd", "nbd"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

const mib = 1 << 20

// erase zeroes the first and last MiB (partition tables: MBR, GPT and its
// backup) and, for block devices, wipes the remaining signatures.
func (m *Machine) erase(ctx context.Context, dev string, out io.Writer) error {
	dev, err := m.device(dev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("erase %s: %w", dev, err)
	}
	zero := make([]byte, min(size, mib))
	if _, err := f.WriteAt(zero, 0); err != nil {
		return fmt.Errorf("erase %s: %w", dev, err)
	}
	if size > mib {
		tail := size - min(size-mib, mib)
		if _, err := f.WriteAt(zero[:size-tail], tail); err != nil {
			return fmt.Errorf("erase %s: %w", dev, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("erase %s: %w", dev, err)
	}
	fmt.Fprintf(out, "zeroed the first and last MiB of %s (%d bytes)\n", dev, size)
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeDevice != 0 {
		if _, err := m.lookPath("wipefs"); err == nil {
			b, err := m.command(ctx, "wipefs", "--all", "--force", dev)
			out.Write(b)
			if err != nil {
				return err
			}
		} else {
			fmt.Fprintln(out, "wipefs not found: filesystem signatures inside partitions were left")
		}
	}
	return nil
}

// stream downloads the image, decompresses it while writing it to the
// device and checks the SHA-256 of the downloaded bytes.
func (m *Machine) stream(ctx context.Context, s *provisioningv1.StreamImage, out io.Writer) error {
	want := strings.ToLower(s.GetSha256())
	if len(want) != 64 {
		return fmt.Errorf("stream image: sha256 %q is not 64 hex digits", s.GetSha256())
	}
	if _, err := hex.DecodeString(want); err != nil {
		return fmt.Errorf("stream image: sha256 %q is not hex", s.GetSha256())
	}
	dev, err := m.device(s.GetDevice())
	if err != nil {
		return err
	}
	// The device must exist: a mistyped device name must not become a
	// file filling the micro-OS's RAM disk.
	st, err := os.Stat(dev)
	if err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	client, err := imageClient(s.GetCaCertPem())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.GetUrl(), nil)
	if err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream image: GET %s: %s", s.GetUrl(), resp.Status)
	}
	fmt.Fprintf(out, "downloading %s (%s) to %s\n", s.GetUrl(), sizeText(resp.ContentLength), dev)
	sum := sha256.New()
	progress := &progressWriter{out: out, total: resp.ContentLength, every: 5 * time.Second}
	raw := io.TeeReader(resp.Body, io.MultiWriter(sum, progress))
	r, closeDec, err := decompressor(s.GetCompression(), s.GetUrl(), bufio.NewReaderSize(raw, 1<<20))
	if err != nil {
		return err
	}
	defer closeDec()
	flags := os.O_WRONLY
	if st.Mode().IsRegular() {
		flags |= os.O_TRUNC // a disk image file (tests, VMs)
	}
	f, err := os.OpenFile(dev, flags, 0)
	if err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(f, r, make([]byte, 4<<20))
	if err != nil {
		return fmt.Errorf("stream image: after %d bytes written: %w", n, err)
	}
	// Read what a decompressor left (trailing padding) so the hash covers
	// the whole download.
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("stream image: sha256 mismatch: got %s, want %s (the disk holds an unverified image)", got, want)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("stream image: %w", err)
	}
	fmt.Fprintf(out, "wrote %d bytes to %s; sha256 %s verified\n", n, dev, want)
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeDevice != 0 {
		// Make the kernel read the new partition table.
		if _, err := m.lookPath("partprobe"); err == nil {
			if b, err := m.command(ctx, "partprobe", dev); err != nil {
				out.Write(b)
			}
		} else if _, err := m.command(ctx, "blockdev", "--rereadpt", dev); err != nil {
			fmt.Fprintf(out, "re-reading the partition table: %v\n", err)
		}
	}
	return nil
}

func imageClient(caPEM string) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if caPEM != "" && !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, errors.New("stream image: ca_cert_pem holds no certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	return &http.Client{Transport: tr}, nil
}

// decompressor wraps r by compression ("" detects it from the URL suffix).
func decompressor(compression, url string, r io.Reader) (io.Reader, func(), error) {
	if compression == "" {
		u := strings.ToLower(url)
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		switch {
		case strings.HasSuffix(u, ".gz"):
			compression = "gzip"
		case strings.HasSuffix(u, ".xz"):
			compression = "xz"
		case strings.HasSuffix(u, ".zst"), strings.HasSuffix(u, ".zstd"):
			compression = "zstd"
		}
	}
	switch compression {
	case "", "none":
		return r, func() {}, nil
	case "gzip":
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("stream image: gzip: %w", err)
		}
		return z, func() { z.Close() }, nil
	case "xz":
		z, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("stream image: xz: %w", err)
		}
		return z, func() {}, nil
	case "zstd":
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("stream image: zstd: %w", err)
		}
		return z, z.Close, nil
	default:
		return nil, nil, fmt.Errorf("stream image: unknown compression %q", compression)
	}
}

func sizeText(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return fmt.Sprintf("%d bytes", n)
}

// progressWriter prints download progress at most every `every`.
type progressWriter struct {
	out   io.Writer
	total int64
	every time.Duration
	n     int64
	last  time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		if p.total > 0 {
			fmt.Fprintf(p.out, "downloaded %d of %d bytes (%d%%)\n", p.n, p.total, p.n*100/p.total)
		} else {
			fmt.Fprintf(p.out, "downloaded %d bytes\n", p.n)
		}
	}
	return len(b), nil
}

// partition returns the device of partition n of dev (0: the largest).
func (m *Machine) partition(dev string, n uint32) (string, error) {
	base := filepath.Base(dev)
	sep := ""
	if c := base[len(base)-1]; c >= '0' && c <= '9' {
		sep = "p" // nvme0n1p1, mmcblk0p1, loop0p1
	}
	if n > 0 {
		return filepath.Join(filepath.Dir(dev), base+sep+strconv.Itoa(int(n))), nil
	}
	dir := filepath.Join(m.SysRoot, "sys", "class", "block", base)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("partitions of %s: %w", dev, err)
	}
	best, bestSize := "", int64(-1)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), base) {
			continue
		}
		v, _ := readTrimmed(filepath.Join(dir, e.Name(), "size"))
		size, err := strconv.ParseInt(v, 10, 64)
		if err == nil && size > bestSize {
			best, bestSize = e.Name(), size
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s has no partitions", dev)
	}
	return filepath.Join(filepath.Dir(dev), best), nil
}

// writeFile mounts the partition, writes the file and unmounts.
func (m *Machine) writeFile(ctx context.Context, w *provisioningv1.WriteFile, out io.Writer) error {
	if !filepath.IsAbs(w.GetPath()) || filepath.Clean(w.GetPath()) != w.GetPath() {
		return fmt.Errorf("write file: path %q is not a clean absolute path", w.GetPath())
	}
	dev, err := m.device(w.GetDevice())
	if err != nil {
		return err
	}
	part, err := m.partition(dev, w.GetPartition())
	if err != nil {
		return err
	}
	mnt, err := os.MkdirTemp("", "eim-mnt-")
	if err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	defer os.Remove(mnt)
	if IsLUKS2(part) {
		// The root encrypt-root encrypted: through its mapping, unlocked
		// as the installed OS will unlock it.
		mapped, err := UnlockRoot(part, installMapping)
		if err != nil {
			return fmt.Errorf("write file: %w", err)
		}
		defer luks2.Deactivate(installMapping)
		part = mapped
	}
	if b, err := m.command(ctx, "mount", part, mnt); err != nil {
		out.Write(b)
		return fmt.Errorf("write file: %w", err)
	}
	werr := writeInto(mnt, w)
	// Unmount even when ctx ended: a mounted disk must not be left behind.
	b, uerr := m.command(context.WithoutCancel(ctx), "umount", mnt)
	if uerr != nil {
		out.Write(b)
	}
	if err := errors.Join(werr, uerr); err != nil {
		return fmt.Errorf("write file %s on %s: %w", w.GetPath(), part, err)
	}
	fmt.Fprintf(out, "wrote %d bytes to %s on %s\n", len(w.GetContent()), w.GetPath(), part)
	return nil
}

func writeInto(root string, w *provisioningv1.WriteFile) error {
	mode := os.FileMode(w.GetMode() & 0o7777)
	if mode == 0 {
		mode = 0o644
	}
	dst := filepath.Join(root, w.GetPath())
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".eim-tmp"
	if err := os.WriteFile(tmp, w.GetContent(), mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode is masked by umask
		return err
	}
	return os.Rename(tmp, dst)
}

// setBootOrder adds an EFI boot entry for the disk and makes it first:
// with efibootmgr when it is installed, else through efivarfs (the
// micro-OS EIM builds holds no other program).
func (m *Machine) setBootOrder(ctx context.Context, s *provisioningv1.SetBootOrder, out io.Writer) error {
	if _, err := os.Stat(filepath.Join(m.SysRoot, "sys", "firmware", "efi")); err != nil {
		fmt.Fprintln(out, "no EFI firmware (legacy BIOS): the boot order is the firmware's; nothing to set")
		return nil
	}
	dev, err := m.device(s.GetDevice())
	if err != nil {
		return err
	}
	label := s.GetLabel()
	if label == "" {
		label = "EIM OS"
	}
	e, err := findESP(dev)
	if err != nil {
		return fmt.Errorf("set boot order: %w", err)
	}
	const loader = `\EFI\BOOT\BOOTX64.EFI`
	if _, err := m.lookPath("efibootmgr"); err != nil {
		vars := filepath.Join(m.SysRoot, "sys", "firmware", "efi", "efivars")
		if _, err := os.Stat(vars); err != nil {
			return fmt.Errorf("set boot order: neither efibootmgr nor efivarfs (%s) to add an EFI boot entry with", vars)
		}
		if err := (efiVars{dir: vars}).addBootEntry(label, loader, e, out); err != nil {
			return fmt.Errorf("set boot order: %w", err)
		}
		return nil
	}
	// Entries of earlier provisionings of this machine go first, so the
	// firmware's list does not grow with every reinstall.
	list, err := m.command(ctx, "efibootmgr")
	if err != nil {
		out.Write(list)
		return fmt.Errorf("set boot order: %w", err)
	}
	for _, num := range bootEntries(string(list), label) {
		if b, err := m.command(ctx, "efibootmgr", "--bootnum", num, "--delete-bootnum"); err != nil {
			out.Write(b)
			return fmt.Errorf("set boot order: %w", err)
		}
		fmt.Fprintf(out, "removed the old boot entry Boot%s %q\n", num, label)
	}
	// --create adds the entry and puts it first in BootOrder.
	b, err := m.command(ctx, "efibootmgr", "--create", "--disk", dev, "--part", strconv.Itoa(e.number),
		"--label", label, "--loader", loader)
	out.Write(b)
	if err != nil {
		return fmt.Errorf("set boot order: %w", err)
	}
	return nil
}

// bootEntries returns the numbers of the entries labelled label in
// efibootmgr's listing ("Boot0003* EIM OS\tHD(…)").
func bootEntries(list, label string) []string {
	var nums []string
	for _, line := range strings.Split(list, "\n") {
		rest, ok := strings.CutPrefix(line, "Boot")
		if !ok || len(rest) < 5 {
			continue
		}
		num, name := rest[:4], strings.TrimPrefix(rest[4:], "*")
		if _, err := strconv.ParseUint(num, 16, 16); err != nil {
			continue // BootOrder, BootCurrent …
		}
		name, _, _ = strings.Cut(strings.TrimSpace(name), "\t")
		if strings.TrimSpace(name) == label {
			nums = append(nums, num)
		}
	}
	return nums
}
