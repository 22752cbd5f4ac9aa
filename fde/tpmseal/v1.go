package tpmseal

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// The blob, version 1 (big-endian):
//
//	"ETS" 0x01
//	u8 n, then n × (u8 PCR, 32-byte SHA-256 value at sealing), PCRs ascending
//	u16 length, TPM2B_PUBLIC of the sealed object
//	u16 length, TPM2B_PRIVATE of the sealed object
var blobMagic = []byte("ETS\x01")

const maxPart = 4096

type blob struct {
	pcrs      []int
	values    [][]byte
	pub, priv []byte
}

func encodeBlob(pcrs []int, values [][]byte, pub, priv []byte) []byte {
	b := append([]byte(nil), blobMagic...)
	b = append(b, byte(len(pcrs)))
	for i, p := range pcrs {
		b = append(b, byte(p))
		b = append(b, values[i]...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(pub)))
	b = append(b, pub...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(priv)))
	return append(b, priv...)
}

func decodeBlob(b []byte) (*blob, error) {
	if len(b) < len(blobMagic)+1 || string(b[:len(blobMagic)]) != string(blobMagic) {
		return nil, fmt.Errorf("%w: no version-1 header", ErrBadBlob)
	}
	b = b[len(blobMagic):]
	n := int(b[0])
	b = b[1:]
	if n == 0 || n > 24 || len(b) < n*(1+sha256.Size) {
		return nil, fmt.Errorf("%w: PCR list of %d cut short or out of range", ErrBadBlob, n)
	}
	out := &blob{}
	for i := 0; i < n; i++ {
		p := int(b[0])
		if p > 23 || i > 0 && p <= out.pcrs[i-1] {
			return nil, fmt.Errorf("%w: PCR %d out of range or order", ErrBadBlob, p)
		}
		out.pcrs = append(out.pcrs, p)
		out.values = append(out.values, b[1:1+sha256.Size])
		b = b[1+sha256.Size:]
	}
	for _, part := range []*[]byte{&out.pub, &out.priv} {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: cut short", ErrBadBlob)
		}
		l := int(binary.BigEndian.Uint16(b))
		if l == 0 || l > maxPart || len(b) < 2+l {
			return nil, fmt.Errorf("%w: part of %d bytes cut short or out of range", ErrBadBlob, l)
		}
		*part = b[2 : 2+l]
		b = b[2+l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the end", ErrBadBlob, len(b))
	}
	return out, nil
}
