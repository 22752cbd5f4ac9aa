package luks2_test

import (
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

// BenchmarkUnlock is the cost of opening a keyslot with each KDF's default
// (what a node pays at every boot, and per keyslot tried): BENCHMARKS.md.
//
//	go test -run '^$' -bench Unlock -benchtime 5x -benchmem ./fde/luks2
func BenchmarkUnlock(b *testing.B) {
	for _, tc := range []struct {
		name string
		kdf  luks2.KDF
	}{
		{"argon2id-default", luks2.KDF{}},
		{"pbkdf2-default", luks2.KDF{Type: luks2.KDFPBKDF2}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dev := newMem(devSize)
			key := []byte("key")
			if _, err := luks2.Format(dev, devSize, key, luks2.Options{KDF: tc.kdf}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := luks2.Unlock(dev, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
