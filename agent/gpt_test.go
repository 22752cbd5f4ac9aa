package agent

import (
	"bytes"
	"testing"
)

// FuzzESP: a disk's partition table comes from a downloaded image; reading
// it must not panic or loop, whatever it holds.
func FuzzESP(f *testing.F) {
	hdr := make([]byte, 2048)
	copy(hdr[512:], "EFI PART")
	hdr[512+72] = 2
	hdr[512+80] = 4
	hdr[512+84] = 128
	copy(hdr[1024+128:], espType)
	f.Add(hdr)
	f.Add([]byte("EFI PART"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := espIn(bytes.NewReader(b), 512)
		if err == nil && (n < 1 || n > 1024) {
			t.Errorf("partition %d", n)
		}
	})
}
