package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// espType is the EFI System Partition type GUID
// (C12A7328-F81F-11D2-BA4B-00A0C93EC93B) as GPT stores it.
var espType = []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}

// espPartition returns the 1-based number of the EFI System Partition in
// the GPT of the disk (or image file) at path.
func espPartition(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for _, sector := range []int64{512, 4096} {
		n, err := espIn(f, sector)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, errNoGPT) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%s has no GPT partition table", path)
}

var errNoGPT = errors.New("no GPT header")

func espIn(r io.ReaderAt, sector int64) (int, error) {
	hdr := make([]byte, 92)
	if _, err := r.ReadAt(hdr, sector); err != nil {
		return 0, errNoGPT
	}
	if string(hdr[:8]) != "EFI PART" {
		return 0, errNoGPT
	}
	entriesLBA := int64(binary.LittleEndian.Uint64(hdr[72:80]))
	count := binary.LittleEndian.Uint32(hdr[80:84])
	size := binary.LittleEndian.Uint32(hdr[84:88])
	if size < 128 || size > 4096 || count > 1024 {
		return 0, fmt.Errorf("GPT header: implausible %d entries of %d bytes", count, size)
	}
	entry := make([]byte, size)
	for i := range int64(count) {
		if _, err := r.ReadAt(entry, entriesLBA*sector+i*int64(size)); err != nil {
			return 0, fmt.Errorf("GPT entry %d: %w", i+1, err)
		}
		if bytes.Equal(entry[:16], espType) {
			return int(i + 1), nil
		}
	}
	return 0, errors.New("no EFI System Partition in the GPT")
}
