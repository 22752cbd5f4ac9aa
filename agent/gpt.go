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

// esp is where an EFI System Partition is, as a UEFI boot entry's hard
// drive device path names it.
type esp struct {
	number      int
	start, size uint64   // in logical blocks
	guid        [16]byte // the partition's unique GUID, as GPT stores it
}

// findESP reads the EFI System Partition of the GPT of the disk at path.
func findESP(path string) (esp, error) {
	f, err := os.Open(path)
	if err != nil {
		return esp{}, err
	}
	defer f.Close()
	for _, sector := range []int64{512, 4096} {
		e, err := espAt(f, sector)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, errNoGPT) {
			return esp{}, err
		}
	}
	return esp{}, fmt.Errorf("%s has no GPT partition table", path)
}

var errNoGPT = errors.New("no GPT header")

func espIn(r io.ReaderAt, sector int64) (int, error) {
	e, err := espAt(r, sector)
	return e.number, err
}

func espAt(r io.ReaderAt, sector int64) (esp, error) {
	hdr := make([]byte, 92)
	if _, err := r.ReadAt(hdr, sector); err != nil {
		return esp{}, errNoGPT
	}
	if string(hdr[:8]) != "EFI PART" {
		return esp{}, errNoGPT
	}
	entriesLBA := int64(binary.LittleEndian.Uint64(hdr[72:80]))
	count := binary.LittleEndian.Uint32(hdr[80:84])
	size := binary.LittleEndian.Uint32(hdr[84:88])
	if size < 128 || size > 4096 || count > 1024 {
		return esp{}, fmt.Errorf("GPT header: implausible %d entries of %d bytes", count, size)
	}
	entry := make([]byte, size)
	for i := range int64(count) {
		if _, err := r.ReadAt(entry, entriesLBA*sector+i*int64(size)); err != nil {
			return esp{}, fmt.Errorf("GPT entry %d: %w", i+1, err)
		}
		if bytes.Equal(entry[:16], espType) {
			e := esp{number: int(i + 1)}
			copy(e.guid[:], entry[16:32])
			first, last := binary.LittleEndian.Uint64(entry[32:40]), binary.LittleEndian.Uint64(entry[40:48])
			if last >= first {
				e.start, e.size = first, last-first+1
			}
			return e, nil
		}
	}
	return esp{}, errors.New("no EFI System Partition in the GPT")
}
