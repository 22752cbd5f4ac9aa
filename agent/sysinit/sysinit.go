//go:build linux

package sysinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MountKernelFS mounts /proc, /sys, securityfs (the TPM's event log,
// which measured boot reports), /dev (devtmpfs: the kernel makes the
// device nodes, no udev needed), /run and /tmp. One already mounted is
// left as it is.
func MountKernelFS() error {
	mounts := []struct {
		src, dir, fstype string
		flags            uintptr
		data             string
		optional         bool // a kernel built without it is fine
	}{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", false},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", false},
		{"securityfs", "/sys/kernel/security", "securityfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", true},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755", false},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755", false},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777", false},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			if m.optional {
				continue
			}
			return err
		}
		if err := unix.Mount(m.src, m.dir, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			if m.optional {
				continue
			}
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dir, err)
		}
	}
	return nil
}

// MountEFIVars mounts efivarfs on a UEFI machine (after the modules are
// loaded: Debian builds it as one): provisioning adds the boot entry of the
// installed disk to the firmware's variables. On a BIOS machine it does
// nothing.
func MountEFIVars() error {
	const dir = "/sys/firmware/efi/efivars"
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	err := unix.Mount("efivarfs", dir, "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount efivarfs: %w", err)
	}
	return nil
}

// Consoles returns a writer to every console the kernel prints to
// (/proc/consoles: the serial line and the screen, with "console=ttyS0
// console=tty0"), so that what init prints shows wherever the operator
// looks. Errors of one console (no hardware behind it) are ignored.
func Consoles() io.Writer {
	f, err := os.Open("/proc/consoles")
	if err != nil {
		return os.Stderr
	}
	defer f.Close()
	var ws consoles
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 || strings.ContainsAny(fields[0], "/.") {
			continue
		}
		c, err := os.OpenFile("/dev/"+fields[0], os.O_WRONLY|unix.O_NOCTTY, 0)
		if err == nil {
			ws = append(ws, c)
		}
	}
	if len(ws) == 0 {
		return os.Stderr
	}
	return ws
}

type consoles []*os.File

func (cs consoles) Write(p []byte) (int, error) {
	for _, c := range cs {
		_, _ = c.Write(p)
	}
	return len(p), nil
}

// LoadModules loads the modules (paths relative to dir) in order. A module
// already loaded or built in is fine; one that does not load (a CPU
// without the instructions an optimised driver needs, hardware the driver
// refuses) is logged, not fatal: the machine may not need it. It returns
// how many loaded.
func LoadModules(dir string, modules []string, log *slog.Logger) int {
	n := 0
	start := time.Now()
	for _, m := range modules {
		b, err := os.ReadFile(filepath.Join(dir, m))
		if err != nil {
			log.Warn("kernel module missing from the initramfs", "module", m, "err", err)
			continue
		}
		switch err := unix.InitModule(b, ""); {
		case err == nil:
			n++
		case errors.Is(err, unix.EEXIST):
		default:
			log.Debug("kernel module not loaded", "module", filepath.Base(m), "err", err)
		}
	}
	log.Info("loaded kernel modules", "loaded", n, "of", len(modules), "took", time.Since(start).Round(time.Millisecond))
	return n
}

// WaitRandom returns once the kernel's random number generator is seeded
// (TLS needs it), saying so when it has to wait: a machine without a
// hardware generator the kernel trusts (RDRAND, a TPM, virtio-rng) can
// take minutes.
func WaitRandom(log *slog.Logger) {
	b := make([]byte, 1)
	if _, err := unix.Getrandom(b, unix.GRND_NONBLOCK); err == nil {
		return
	}
	start := time.Now()
	log.Warn("waiting for the kernel's random number generator to be seeded (no hardware generator?)")
	for {
		if _, err := unix.Getrandom(b, 0); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	log.Info("random number generator seeded", "waited", time.Since(start).Round(time.Millisecond))
}

// KernelRelease is the running kernel's release (uname -r).
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Reboot unmounts the disks' file systems (or makes them read-only), syncs
// and restarts the machine. It returns only on failure.
func Reboot(log *slog.Logger) error {
	unmountDisks(log)
	unix.Sync()
	return fmt.Errorf("reboot: %w", unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART))
}

// PowerOff is Reboot's sibling for a shutdown.
func PowerOff(log *slog.Logger) error {
	unmountDisks(log)
	unix.Sync()
	return fmt.Errorf("power off: %w", unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF))
}

// unmountDisks unmounts the file systems of block devices, the last
// mounted first, so that their journals are clean after the restart.
func unmountDisks(log *slog.Logger) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) < 2 || !strings.HasPrefix(f[0], "/dev/") {
			continue
		}
		dir := unescapeMount(f[1])
		if err := unix.Unmount(dir, 0); err != nil {
			if rerr := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); rerr != nil {
				log.Warn("file system left mounted read-write", "dir", dir, "err", err)
			}
		}
	}
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
