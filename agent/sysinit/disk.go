//go:build linux

package sysinit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FSLabel returns the label of the ext2/3/4 or FAT file system, or of the
// LUKS2 volume (an encrypted root), at the start of r, or "" when it is
// none of them or has none.
func FSLabel(r io.ReaderAt) string {
	b := make([]byte, 2048)
	if n, _ := r.ReadAt(b, 0); n < len(b) {
		return ""
	}
	// LUKS2: the magic, version 2, the label at 24 (48 bytes).
	if string(b[:6]) == "LUKS\xba\xbe" && binary.BigEndian.Uint16(b[6:]) == 2 {
		return cString(b[24:72])
	}
	// ext: the superblock at 1024, magic 0xEF53 at 56, s_volume_name at 120.
	if sb := b[1024:]; binary.LittleEndian.Uint16(sb[56:]) == 0xEF53 {
		return cString(sb[120:136])
	}
	// FAT: the boot sector's signature, and the label of the extended BPB
	// (at 43 for FAT12/16, 71 for FAT32).
	if b[510] == 0x55 && b[511] == 0xaa {
		if string(b[82:87]) == "FAT32" {
			return strings.TrimSpace(string(b[71:82]))
		}
		if string(b[54:57]) == "FAT" {
			return strings.TrimSpace(string(b[43:54]))
		}
	}
	return ""
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// FindByLabel waits until a block device holding a file system labelled
// label appears (drivers probe disks asynchronously) and returns its
// device node, or fails when ctx ends.
func FindByLabel(ctx context.Context, label string) (string, error) {
	for {
		if dev := findByLabel(label); dev != "" {
			return dev, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no file system labelled %q on any disk (%s)", label, strings.Join(blockDevices(), ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func findByLabel(label string) string {
	for _, name := range blockDevices() {
		dev := "/dev/" + name
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		got := FSLabel(f)
		f.Close()
		if got == label {
			return dev
		}
	}
	return ""
}

// blockDevices lists the kernel's block devices, partitions included,
// without RAM and loop devices.
func blockDevices() []string {
	ents, err := os.ReadDir("/sys/class/block")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "loop") {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Mount mounts the file system on dev at dir, trying each disk file system
// type the kernel knows (as mount(8) does without -t), and returns the
// type that worked.
func Mount(dev, dir string, flags uintptr) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	types, err := diskFilesystems()
	if err != nil {
		return "", err
	}
	var errs []error
	for _, t := range types {
		err := unix.Mount(dev, dir, t, flags, "")
		if err == nil {
			return t, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", t, err))
	}
	return "", fmt.Errorf("mount %s on %s: %w", dev, dir, errors.Join(errs...))
}

// diskFilesystems lists the file system types of /proc/filesystems that
// need a device, ext4 first (the usual root).
func diskFilesystems() ([]string, error) {
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var types []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "nodev") {
			continue
		}
		if t := strings.TrimSpace(line); t != "" {
			types = append(types, t)
		}
	}
	sort.SliceStable(types, func(i, j int) bool { return types[i] == "ext4" && types[j] != "ext4" })
	if len(types) == 0 {
		return nil, errors.New("the kernel knows no disk file system (are the modules loaded?)")
	}
	return types, nil
}

// RereadPartitions makes the kernel read the partition table of the disk
// at dev again (BLKRRPART), after an image was written to it.
func RereadPartitions(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0); err != nil {
		return fmt.Errorf("re-read the partition table of %s: %w", dev, err)
	}
	return nil
}

// Unmount unmounts dir.
func Unmount(dir string) error {
	if err := unix.Unmount(dir, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", filepath.Clean(dir), err)
	}
	return nil
}
