package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsImmutable is FS_IMMUTABLE_FL of the file attribute flags.
const fsImmutable = 0x00000010

// clearImmutable drops the immutable flag efivarfs may set on a variable's
// file, so that it can be replaced or deleted. Best effort.
func clearImmutable(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsImmutable == 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutable))
}
