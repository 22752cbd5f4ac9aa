package luks2_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

// needCryptsetup skips the test without Debian's cryptsetup-bin, unless
// EIM_REQUIRE_TOOLS is set (as .ci/run sets it, after installing it).
func needCryptsetup(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		if os.Getenv("EIM_REQUIRE_TOOLS") != "" {
			t.Fatal("cryptsetup not installed and EIM_REQUIRE_TOOLS is set")
		}
		t.Skip("cryptsetup not installed (Debian's cryptsetup-bin)")
	}
}

func cryptsetup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	// --disable-locks: cryptsetup's lock directory may not exist here; the
	// test owns its image.
	cmd := exec.Command("cryptsetup", append([]string{"--disable-locks", "--batch-mode"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newImage(t *testing.T, dir string) (string, *os.File) {
	t.Helper()
	img := filepath.Join(dir, "disk.img")
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(devSize); err != nil {
		t.Fatal(err)
	}
	return img, f
}

// dumpVolumeKey is the volume key as cryptsetup reads it with key.
func dumpVolumeKey(t *testing.T, img, keyFile string) []byte {
	t.Helper()
	out, err := cryptsetup(t, "luksDump", "--dump-volume-key", "--key-file", keyFile, img)
	if err != nil {
		t.Fatalf("cryptsetup luksDump --dump-volume-key: %v\n%s", err, out)
	}
	i := strings.Index(out, "MK dump:")
	if i < 0 {
		t.Fatalf("no MK dump in:\n%s", out)
	}
	hexKey := strings.Join(strings.Fields(out[i+len("MK dump:"):]), "")
	vk, err := hex.DecodeString(hexKey)
	if err != nil {
		t.Fatalf("MK dump %q: %v", hexKey, err)
	}
	return vk
}

// Go formats an image and adds a recovery key; cryptsetup reads the header
// and opens both keyslots, and finds the same volume key.
func TestCryptsetupReadsGo(t *testing.T) {
	needCryptsetup(t)
	for _, tc := range []struct {
		name string
		kdf  luks2.KDF
		dump string // what luksDump shows of the keyslot's KDF
	}{
		{"pbkdf2", fastPBKDF2, "PBKDF:      pbkdf2"},
		{"argon2id", fastArgon, "PBKDF:      argon2id"},
		// What the installer uses: 4 passes of 64 MiB on 2 lanes.
		{"argon2id-defaults", luks2.KDF{}, "Memory:     65536\n\tThreads:    2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			img, f := newImage(t, dir)
			tpmKey := writeFile(t, dir, "tpm.key", []byte{0, 1, 2, 0xff, '\n', 9}) // binary, as a TPM secret is
			recovery := writeFile(t, dir, "recovery.key", []byte("recovery-key-0123"))
			wrong := writeFile(t, dir, "wrong.key", []byte("wrong"))
			vk, _ := luks2.NewVolumeKey()
			h, err := luks2.Format(f, devSize, readFile(t, tpmKey), luks2.Options{KDF: tc.kdf, VolumeKey: vk, Label: "eim-root"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := luks2.AddKeyVolumeKey(f, vk, readFile(t, recovery), tc.kdf); err != nil {
				t.Fatal(err)
			}

			out, err := cryptsetup(t, "luksDump", img)
			if err != nil {
				t.Fatalf("cryptsetup luksDump: %v\n%s", err, out)
			}
			for _, want := range []string{
				"Version:       \t2", "UUID:          \t" + h.UUID, "Label:         \teim-root",
				"offset: 16777216 [bytes]", "cipher: aes-xts-plain64", "sector: 512 [bytes]",
				"  0: luks2", "  1: luks2", "Key:        512 bits", tc.dump, "AF stripes: 4000", "AF hash:    sha256",
				"Area offset:32768 [bytes]", "Area offset:290816 [bytes]", "Digests:\n  0: pbkdf2",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("luksDump lacks %q:\n%s", want, out)
				}
			}
			for _, kf := range []string{tpmKey, recovery} {
				if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", kf, img); err != nil {
					t.Fatalf("cryptsetup open --test-passphrase --key-file %s: %v\n%s", filepath.Base(kf), err, out)
				}
				if got := dumpVolumeKey(t, img, kf); !bytes.Equal(got, vk) {
					t.Fatalf("cryptsetup's volume key with %s: got %x, want %x", filepath.Base(kf), got, vk)
				}
			}
			if out, err := cryptsetup(t, "open", "--test-passphrase", "--key-file", wrong, img); err == nil {
				t.Fatalf("cryptsetup opened the volume with a wrong key:\n%s", out)
			}
		})
	}
}

// cryptsetup formats an image (and adds a key); Go reads the header and
// finds the volume key cryptsetup dumps with either key.
func TestGoReadsCryptsetup(t *testing.T) {
	needCryptsetup(t)
	pbkdf2 := []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	for _, tc := range []struct {
		name   string
		kdf    []string // of both keyslots
		format []string // of luksFormat only
	}{
		{"pbkdf2", pbkdf2, nil},
		{"pbkdf2-sha512", []string{"--pbkdf", "pbkdf2", "--hash", "sha512", "--pbkdf-force-iterations", "1000"}, nil},
		{"argon2id", []string{"--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "1024", "--pbkdf-parallel", "1"}, nil},
		{"argon2i", []string{"--pbkdf", "argon2i", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "2048", "--pbkdf-parallel", "2"}, nil},
		{"aes-xts-256", pbkdf2, []string{"--key-size", "256"}},
		{"sector-4096", pbkdf2, []string{"--sector-size", "4096"}},
		{"header-64k", pbkdf2, []string{"--luks2-metadata-size", "64k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			img, f := newImage(t, dir)
			key := writeFile(t, dir, "a.key", []byte("first key"))
			key2 := writeFile(t, dir, "b.key", []byte{0, 0xfe, 7})
			args := append(append([]string{"luksFormat", "--type", "luks2", "--key-file", key}, tc.kdf...), tc.format...)
			if out, err := cryptsetup(t, append(args, img)...); err != nil {
				t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
			}
			args = append([]string{"luksAddKey", "--key-file", key}, tc.kdf...)
			if out, err := cryptsetup(t, append(args, img, key2)...); err != nil {
				t.Fatalf("cryptsetup luksAddKey: %v\n%s", err, out)
			}
			want := dumpVolumeKey(t, img, key)
			for _, kf := range []string{key, key2} {
				got, err := luks2.Unlock(f, readFile(t, kf))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Unlock with %s: got %x, %v; want %x", filepath.Base(kf), got, err, want)
				}
			}
			if _, err := luks2.Unlock(f, []byte("wrong")); !errors.Is(err, luks2.ErrBadKey) {
				t.Fatalf("Unlock with a wrong key: got %v, want ErrBadKey", err)
			}
			// Go adds a key to cryptsetup's volume; cryptsetup opens with it.
			third := writeFile(t, dir, "c.key", []byte("third"))
			if _, err := luks2.AddKey(f, readFile(t, key2), readFile(t, third), fastPBKDF2); err != nil {
				t.Fatal(err)
			}
			if got := dumpVolumeKey(t, img, third); !bytes.Equal(got, want) {
				t.Fatalf("cryptsetup's volume key with Go's keyslot: got %x, want %x", got, want)
			}
			h, err := luks2.ReadHeader(f)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := cryptsetup(t, "luksDump", img)
			off := regexp.MustCompile(`offset: (\d+) \[bytes\]`).FindStringSubmatch(out)
			if off == nil || off[1] != strconv.FormatInt(h.DataOffset, 10) {
				t.Fatalf("data offset: Go %d, cryptsetup %v", h.DataOffset, off)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
