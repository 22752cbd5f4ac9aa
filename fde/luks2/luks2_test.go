package luks2_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

// memDev is a device in memory.
type memDev struct{ b []byte }

func newMem(size int) *memDev { return &memDev{b: make([]byte, size)} }

func (m *memDev) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, errors.New("read past the end")
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, errors.New("read past the end")
	}
	return n, nil
}

func (m *memDev) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > int64(len(m.b)) {
		return 0, errors.New("write past the end")
	}
	return copy(m.b[off:], p), nil
}

// Fast KDF parameters for tests (within cryptsetup's bounds).
var (
	fastPBKDF2 = luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}
	fastArgon  = luks2.KDF{Type: luks2.KDFArgon2id, Time: 4, MemoryKiB: 1024, Threads: 1}
)

const devSize = 20 << 20

func TestFormatUnlockAddKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		kdf  luks2.KDF
	}{
		{"pbkdf2", fastPBKDF2},
		{"argon2id", fastArgon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newMem(devSize)
			vk, err := luks2.NewVolumeKey()
			if err != nil {
				t.Fatal(err)
			}
			tpmKey, recovery := []byte("secret from the TPM"), []byte("recovery-0123-4567")
			h, err := luks2.Format(dev, devSize, tpmKey, luks2.Options{KDF: tc.kdf, VolumeKey: vk, Label: "root"})
			if err != nil {
				t.Fatal(err)
			}
			if h.DataOffset != luks2.DataOffset || h.DataSize != -1 || h.Cipher != "aes-xts-plain64" || h.SectorSize != 512 || h.Label != "root" || len(h.UUID) != 36 {
				t.Fatalf("header: got %+v", h)
			}
			if got := h.DataLength(devSize); got != devSize-luks2.DataOffset {
				t.Fatalf("DataLength: got %d, want %d", got, devSize-luks2.DataOffset)
			}
			if len(h.Keyslots) != 1 || h.Keyslots[0] != (luks2.Keyslot{ID: 0, KDF: tc.kdf.Type, KeySize: 64}) {
				t.Fatalf("keyslots: got %+v", h.Keyslots)
			}
			slot, err := luks2.AddKey(dev, tpmKey, recovery, tc.kdf)
			if err != nil || slot != 1 {
				t.Fatalf("AddKey: got %d, %v; want 1", slot, err)
			}
			for _, key := range [][]byte{tpmKey, recovery} {
				got, err := luks2.Unlock(dev, key)
				if err != nil || !bytes.Equal(got, vk) {
					t.Fatalf("Unlock(%q): got %x, %v; want %x", key, got, err, vk)
				}
			}
			if _, err := luks2.Unlock(dev, []byte("wrong")); !errors.Is(err, luks2.ErrBadKey) {
				t.Fatalf("Unlock with a wrong key: got %v, want ErrBadKey", err)
			}
			if _, err := luks2.AddKey(dev, []byte("wrong"), []byte("x"), tc.kdf); !errors.Is(err, luks2.ErrBadKey) {
				t.Fatalf("AddKey with a wrong key: got %v, want ErrBadKey", err)
			}
			h, err = luks2.ReadHeader(dev)
			if err != nil || h.Seqid != 1 || len(h.Keyslots) != 2 {
				t.Fatalf("ReadHeader after AddKey: got %+v, %v; want seqid 1, two keyslots", h, err)
			}
			// The installer's way: with the volume key, no KDF run for the
			// existing keyslot.
			third := []byte("third")
			if slot, err := luks2.AddKeyVolumeKey(dev, vk, third, tc.kdf); err != nil || slot != 2 {
				t.Fatalf("AddKeyVolumeKey: got %d, %v; want 2", slot, err)
			}
			if got, err := luks2.Unlock(dev, third); err != nil || !bytes.Equal(got, vk) {
				t.Fatalf("Unlock with the third key: got %x, %v; want %x", got, err, vk)
			}
			other, _ := luks2.NewVolumeKey()
			if _, err := luks2.AddKeyVolumeKey(dev, other, third, tc.kdf); err == nil || !strings.Contains(err.Error(), "not this volume's") {
				t.Fatalf("AddKeyVolumeKey with another volume key: got %v", err)
			}
		})
	}
}

// A damaged primary header is read from the secondary; both damaged is an
// error naming the checksum.
func TestDamagedHeaders(t *testing.T) {
	dev := newMem(devSize)
	key := []byte("k")
	if _, err := luks2.Format(dev, devSize, key, luks2.Options{KDF: fastPBKDF2}); err != nil {
		t.Fatal(err)
	}
	vk, err := luks2.Unlock(dev, key)
	if err != nil {
		t.Fatal(err)
	}
	dev.b[5000] ^= 1 // the primary's JSON
	got, err := luks2.Unlock(dev, key)
	if err != nil || !bytes.Equal(got, vk) {
		t.Fatalf("Unlock with the primary damaged: got %v; want the volume key from the secondary", err)
	}
	dev.b[16384+5000] ^= 1 // the secondary's JSON
	_, err = luks2.Unlock(dev, key)
	var he *luks2.HeaderError
	if !errors.As(err, &he) || he.Field != "checksum" {
		t.Fatalf("both damaged: got %v, want a HeaderError on the checksum", err)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		key  string
		opts luks2.Options
		want string
	}{
		{"empty key", devSize, "", luks2.Options{}, "key: empty"},
		{"too small", 16 << 20, "k", luks2.Options{}, "size 16777216 bytes"},
		{"bad uuid", devSize, "k", luks2.Options{UUID: "nope"}, `uuid "nope"`},
		{"long label", devSize, "k", luks2.Options{Label: strings.Repeat("x", 48)}, "label: 48 bytes"},
		{"short volume key", devSize, "k", luks2.Options{VolumeKey: make([]byte, 32)}, "volume key: 32 bytes"},
		{"kdf type", devSize, "k", luks2.Options{KDF: luks2.KDF{Type: "scrypt"}}, `kdf type "scrypt"`},
		{"argon2 time", devSize, "k", luks2.Options{KDF: luks2.KDF{Type: luks2.KDFArgon2id, Time: 1}}, "kdf time 1"},
		{"argon2 memory", devSize, "k", luks2.Options{KDF: luks2.KDF{MemoryKiB: 8 << 20}}, "kdf memory"},
		{"pbkdf2 iterations", devSize, "k", luks2.Options{KDF: luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 10}}, "kdf iterations 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := luks2.Format(newMem(devSize), tc.size, []byte(tc.key), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := luks2.Unlock(newMem(1<<20), []byte("k")); !errors.Is(err, luks2.ErrNotLUKS2) {
		t.Fatalf("Unlock of zeros: got %v, want ErrNotLUKS2", err)
	}
}
