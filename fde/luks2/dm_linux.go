package luks2

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The device-mapper ioctl interface (linux/dm-ioctl.h), version 4.
const (
	dmIoctlSize  = 312 // sizeof(struct dm_ioctl)
	dmTargetSize = 40  // sizeof(struct dm_target_spec)
	dmNameLen    = 128
	dmUUIDLen    = 129

	dmDevCreate  = 3
	dmDevRemove  = 4
	dmDevSuspend = 6
	dmTableLoad  = 9

	dmSecureDataFlag = 1 << 15 // the kernel wipes its copy of the table (the key)

	dmControl = "/dev/mapper/control"
)

// dmIoctlCmd is _IOWR(0xfd, nr, struct dm_ioctl).
func dmIoctlCmd(nr uintptr) uintptr {
	return 3<<30 | dmIoctlSize<<16 | 0xfd<<8 | nr
}

// Activate maps the LUKS2 volume on the block device devPath, whose volume
// key is volumeKey (Unlock), as /dev/mapper/name through the kernel's
// dm-crypt: DM_DEV_CREATE, DM_TABLE_LOAD of one "crypt" target over the data
// segment, DM_DEV_SUSPEND to resume it, then the device node. It returns the
// node's path. No udev is needed; Deactivate undoes it.
//
// The kernel needs dm-mod, dm-crypt and the cipher: Debian's kernel builds
// dm_mod, dm_crypt, xts and ecb (which xts(aes) is made of) as modules,
// which an initramfs loads first (aesni_intel too, for speed; AES itself is
// built in). Without ecb, the table load fails with ENOENT.
func Activate(name, devPath string, volumeKey []byte) (string, error) {
	if name == "" || len(name) >= dmNameLen || strings.ContainsAny(name, "/ ") || name == "." || name == ".." || name == "control" {
		return "", fmt.Errorf("luks2: activate: name %q: want 1 to %d characters, no '/' or space", name, dmNameLen-1)
	}
	f, err := os.Open(devPath)
	if err != nil {
		return "", fmt.Errorf("luks2: activate: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("luks2: activate: %w", err)
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return "", fmt.Errorf("luks2: activate: %s is not a block device (attach an image with a loop device)", devPath)
	}
	h, err := ReadHeader(f)
	if err != nil {
		return "", err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("luks2: activate: size of %s: %w", devPath, err)
	}
	if h.Cipher != cipherXTS || len(volumeKey) != 32 && len(volumeKey) != 64 {
		return "", fmt.Errorf("luks2: activate: cipher %s with a %d-byte key: only %s with 32 or 64 bytes is supported", h.Cipher, len(volumeKey), cipherXTS)
	}
	length := h.DataLength(size)
	if length <= 0 || h.DataOffset+length > size {
		return "", fmt.Errorf("luks2: activate: %s has %d bytes, the data segment [%d, +%d) does not fit", devPath, size, h.DataOffset, length)
	}
	rdev := uint64(st.Sys().(*syscall.Stat_t).Rdev)
	dev := fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
	params := fmt.Sprintf("%s %s 0 %s %d", h.Cipher, hex.EncodeToString(volumeKey), dev, h.DataOffset/512)
	if h.SectorSize != 512 {
		// LUKS2 counts the IV in sectors of the segment's size (cryptsetup
		// maps such volumes with iv_large_sectors).
		params += fmt.Sprintf(" 2 sector_size:%d iv_large_sectors", h.SectorSize)
	}

	ctl, err := openControl()
	if err != nil {
		return "", err
	}
	defer ctl.Close()
	uuid := "CRYPT-LUKS2-" + strings.ReplaceAll(h.UUID, "-", "") + "-" + name
	if len(uuid) >= dmUUIDLen {
		uuid = uuid[:dmUUIDLen-1]
	}
	out, err := dmIoctl(ctl, dmDevCreate, name, uuid, 0, nil)
	if err != nil {
		return "", fmt.Errorf("luks2: activate %s: DM_DEV_CREATE: %w", name, err)
	}
	devt := binary.NativeEndian.Uint64(out[40:48])
	undo := func() { _, _ = dmIoctl(ctl, dmDevRemove, name, "", 0, nil) }

	table := dmTarget(0, uint64(length)/512, "crypt", params)
	if _, err := dmIoctl(ctl, dmTableLoad, name, "", dmSecureDataFlag, table); err != nil {
		undo()
		return "", fmt.Errorf("luks2: activate %s: DM_TABLE_LOAD: %w (is dm-crypt loaded?)", name, err)
	}
	clear(table)
	if _, err := dmIoctl(ctl, dmDevSuspend, name, "", dmSecureDataFlag, nil); err != nil {
		undo()
		return "", fmt.Errorf("luks2: activate %s: resume: %w", name, err)
	}
	node := filepath.Join("/dev/mapper", name)
	_ = os.MkdirAll(filepath.Dir(node), 0o755)
	_ = os.Remove(node)
	major, minor := uint32((devt&0xfff00)>>8), uint32(devt&0xff|(devt>>12)&0xfff00)
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(major, minor))); err != nil {
		undo()
		return "", fmt.Errorf("luks2: activate %s: device node: %w", name, err)
	}
	return node, nil
}

// Deactivate removes the mapping Activate made, and its device node.
func Deactivate(name string) error {
	ctl, err := openControl()
	if err != nil {
		return err
	}
	defer ctl.Close()
	if _, err := dmIoctl(ctl, dmDevRemove, name, "", 0, nil); err != nil {
		return fmt.Errorf("luks2: deactivate %s: DM_DEV_REMOVE: %w", name, err)
	}
	if err := os.Remove(filepath.Join("/dev/mapper", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("luks2: deactivate %s: %w", name, err)
	}
	return nil
}

// openControl opens /dev/mapper/control, making the node first when
// devtmpfs has not (the minor is in /proc/misc once dm-mod is loaded).
func openControl() (*os.File, error) {
	f, err := os.OpenFile(dmControl, os.O_RDWR, 0)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("luks2: device-mapper: %w", err)
	}
	minor, merr := miscMinor("device-mapper")
	if merr != nil {
		return nil, fmt.Errorf("luks2: device-mapper: %s does not exist and %v (is dm-mod loaded?)", dmControl, merr)
	}
	if err := os.MkdirAll(filepath.Dir(dmControl), 0o755); err != nil {
		return nil, fmt.Errorf("luks2: device-mapper: %w", err)
	}
	if err := unix.Mknod(dmControl, unix.S_IFCHR|0o600, int(unix.Mkdev(10, minor))); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("luks2: device-mapper: %s: %w", dmControl, err)
	}
	f, err = os.OpenFile(dmControl, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("luks2: device-mapper: %w", err)
	}
	return f, nil
}

func miscMinor(name string) (uint32, error) {
	f, err := os.Open("/proc/misc")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[1] == name {
			n, err := strconv.ParseUint(fields[0], 10, 32)
			return uint32(n), err
		}
	}
	return 0, fmt.Errorf("/proc/misc has no %s", name)
}

// dmTarget encodes one struct dm_target_spec and its parameters.
func dmTarget(start, length uint64, typ, params string) []byte {
	n := roundUp(dmTargetSize+len(params)+1, 8)
	b := make([]byte, n)
	binary.NativeEndian.PutUint64(b[0:], start)
	binary.NativeEndian.PutUint64(b[8:], length)
	binary.NativeEndian.PutUint32(b[20:], uint32(n)) // next: this spec's length
	copy(b[24:40], typ)
	copy(b[dmTargetSize:], params)
	return b
}

// dmIoctl sends one device-mapper command with struct dm_ioctl (and data
// after it) and returns the kernel's answer.
func dmIoctl(ctl *os.File, nr uintptr, name, uuid string, flags uint32, data []byte) ([]byte, error) {
	size := dmIoctlSize + len(data)
	if size < 16<<10 {
		size = 16 << 10 // room for the answer
	}
	b := make([]byte, size)
	defer clear(b)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], 4) // version 4.0.0
	ne.PutUint32(b[12:], uint32(size))
	ne.PutUint32(b[16:], dmIoctlSize) // data_start
	if data != nil {
		ne.PutUint32(b[20:], 1) // target_count
	}
	ne.PutUint32(b[28:], flags)
	copy(b[48:48+dmNameLen-1], name)
	copy(b[48+dmNameLen:48+dmNameLen+dmUUIDLen-1], uuid)
	copy(b[dmIoctlSize:], data)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, ctl.Fd(), dmIoctlCmd(nr), uintptr(unsafe.Pointer(&b[0])))
	if errno != 0 {
		return nil, errno
	}
	return append([]byte(nil), b[:dmIoctlSize]...), nil
}
