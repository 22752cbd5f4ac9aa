package luks2

import (
	"crypto/aes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"sort"
	"strconv"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/xts"
)

// Bounds cryptsetup itself keeps to: argon2 memory at most 4 GiB, at most 4
// lanes.
const (
	maxArgon2MemoryKiB = 4 << 20
	maxArgon2Threads   = 4
)

func hashFunc(name string) func() hash.Hash {
	switch name {
	case "sha1":
		return sha1.New
	case "sha256":
		return sha256.New
	case "sha384":
		return sha512.New384
	case "sha512":
		return sha512.New
	}
	return nil
}

func hashSize(name string) int {
	if f := hashFunc(name); f != nil {
		return f().Size()
	}
	return 0
}

func pbkdf2Key(hashName string, key, salt []byte, iter, n int) ([]byte, error) {
	f := hashFunc(hashName)
	if f == nil {
		return nil, fmt.Errorf("luks2: hash %q is not supported", hashName)
	}
	out, err := pbkdf2.Key(f, string(key), salt, iter, n)
	if err != nil {
		return nil, fmt.Errorf("luks2: pbkdf2: %w", err)
	}
	return out, nil
}

// deriveKey runs the keyslot's KDF: the key that encrypts its area.
func deriveKey(k kdf, key []byte, n int) ([]byte, error) {
	salt, err := base64.StdEncoding.DecodeString(k.Salt)
	if err != nil {
		return nil, fmt.Errorf("luks2: kdf salt: %w", err)
	}
	switch k.Type {
	case "pbkdf2":
		return pbkdf2Key(k.Hash, key, salt, int(k.Iterations), n)
	case "argon2id":
		return argon2.IDKey(key, salt, k.Time, k.Memory, uint8(k.CPUs), uint32(n)), nil
	case "argon2i":
		return argon2.Key(key, salt, k.Time, k.Memory, uint8(k.CPUs), uint32(n)), nil
	}
	return nil, fmt.Errorf("luks2: kdf %q is not supported", k.Type)
}

// openKeyslot returns the key that keyslot name holds when opened with key:
// the volume key if key is right, noise if not (the digest tells).
func openKeyslot(dev io.ReaderAt, name string, ks *keyslot, key []byte) ([]byte, error) {
	ak, err := deriveKey(ks.KDF, key, ks.Area.KeySize)
	if err != nil {
		return nil, fmt.Errorf("luks2: keyslot %s: %w", name, err)
	}
	afLen := ks.KeySize * ks.AF.Stripes
	enc := make([]byte, roundUp(afLen, sectorSize))
	if _, err := dev.ReadAt(enc, int64(ks.Area.Offset)); err != nil {
		return nil, fmt.Errorf("luks2: keyslot %s: read its area: %w", name, err)
	}
	c, err := xts.NewCipher(aes.NewCipher, ak)
	if err != nil {
		return nil, fmt.Errorf("luks2: keyslot %s: %w", name, err)
	}
	for i := 0; i < len(enc); i += sectorSize {
		c.Decrypt(enc[i:i+sectorSize], enc[i:i+sectorSize], uint64(i/sectorSize))
	}
	return afMerge(enc[:afLen], ks.KeySize, ks.AF.Stripes, hashFunc(ks.AF.Hash)), nil
}

// addKeyslot writes a new keyslot holding vk, opened by key, into the first
// free ID and the first free place of the keyslots area, and adds it to h's
// metadata (the caller writes the headers). It records the ID in h.newSlot.
func addKeyslot(dev Device, h *Header, vk, key []byte, k KDF, rnd io.Reader) error {
	m := h.meta
	id := -1
	for i := 0; i < maxKeyslots; i++ {
		if m.Keyslots[strconv.Itoa(i)] == nil {
			id = i
			break
		}
	}
	if id < 0 {
		return fmt.Errorf("luks2: all %d keyslots are in use", maxKeyslots)
	}
	afLen := len(vk) * afStripes
	size := uint64(roundUp(afLen, 4096))
	off, ok := freeArea(h, size)
	if !ok {
		return fmt.Errorf("luks2: no room for a keyslot of %d bytes in the keyslots area", size)
	}

	salt := make([]byte, 32)
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return fmt.Errorf("luks2: salt: %w", err)
	}
	ks := &keyslot{
		Type:    "luks2",
		KeySize: len(vk),
		AF:      af{Type: "luks1", Stripes: afStripes, Hash: "sha256"},
		Area:    area{Type: "raw", Offset: u64(off), Size: u64(size), Encryption: cipherXTS, KeySize: 64},
		KDF:     kdf{Type: k.Type, Salt: b64(salt)},
	}
	switch k.Type {
	case KDFArgon2id:
		ks.KDF.Time, ks.KDF.Memory, ks.KDF.CPUs = k.Time, k.MemoryKiB, uint32(k.Threads)
	case KDFPBKDF2:
		ks.KDF.Hash, ks.KDF.Iterations = "sha256", k.Iterations
	}
	ak, err := deriveKey(ks.KDF, key, ks.Area.KeySize)
	if err != nil {
		return err
	}
	mat, err := afSplit(vk, afStripes, sha256.New, rnd)
	if err != nil {
		return err
	}
	enc := make([]byte, roundUp(afLen, sectorSize))
	copy(enc, mat)
	c, err := xts.NewCipher(aes.NewCipher, ak)
	if err != nil {
		return fmt.Errorf("luks2: keyslot cipher: %w", err)
	}
	for i := 0; i < len(enc); i += sectorSize {
		c.Encrypt(enc[i:i+sectorSize], enc[i:i+sectorSize], uint64(i/sectorSize))
	}
	if _, err := dev.WriteAt(enc, int64(off)); err != nil {
		return fmt.Errorf("luks2: write keyslot %d: %w", id, err)
	}
	name := strconv.Itoa(id)
	m.Keyslots[name] = ks
	// The digest that checks the volume key now covers this keyslot too.
	for _, d := range m.Digests {
		if !contains(d.Keyslots, name) && d.matches(vk) {
			d.Keyslots = append(d.Keyslots, name)
			sort.Strings(d.Keyslots)
		}
	}
	h.newSlot = id
	return nil
}

// freeArea finds the lowest offset in the keyslots area with size free
// bytes.
func freeArea(h *Header, size uint64) (uint64, bool) {
	type span struct{ off, end uint64 }
	var used []span
	for _, ks := range h.meta.Keyslots {
		used = append(used, span{uint64(ks.Area.Offset), uint64(ks.Area.Offset) + uint64(ks.Area.Size)})
	}
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	start := uint64(2 * h.HeaderSize)
	end := start + uint64(h.meta.Config.KeyslotsSize)
	off := start
	for _, u := range used {
		if u.off >= off+size {
			break
		}
		if u.end > off {
			off = u.end
		}
	}
	return off, off+size <= end
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// afSplit is the LUKS1 anti-forensic splitter: stripes-1 random blocks, and
// a last one that is the key XOR the diffusion of them all, so that the key
// cannot be recovered unless every stripe is.
func afSplit(key []byte, stripes int, h func() hash.Hash, rnd io.Reader) ([]byte, error) {
	n := len(key)
	out := make([]byte, n*stripes)
	d := make([]byte, n)
	for i := 0; i < stripes-1; i++ {
		s := out[i*n : (i+1)*n]
		if _, err := io.ReadFull(rnd, s); err != nil {
			return nil, fmt.Errorf("luks2: splitter: %w", err)
		}
		xorInto(d, s)
		diffuse(d, h)
	}
	last := out[(stripes-1)*n:]
	for j := range last {
		last[j] = d[j] ^ key[j]
	}
	return out, nil
}

func afMerge(mat []byte, n, stripes int, h func() hash.Hash) []byte {
	d := make([]byte, n)
	for i := 0; i < stripes-1; i++ {
		xorInto(d, mat[i*n:(i+1)*n])
		diffuse(d, h)
	}
	xorInto(d, mat[(stripes-1)*n:])
	return d
}

func xorInto(d, s []byte) {
	for i := range d {
		d[i] ^= s[i]
	}
}

// diffuse hashes b in place, one digest-sized chunk at a time, each chunk
// prefixed with its big-endian index.
func diffuse(b []byte, newHash func() hash.Hash) {
	h := newHash()
	ds := h.Size()
	var idx [4]byte
	for i := 0; i*ds < len(b); i++ {
		chunk := b[i*ds : min((i+1)*ds, len(b))]
		h.Reset()
		binary.BigEndian.PutUint32(idx[:], uint32(i))
		h.Write(idx[:])
		h.Write(chunk)
		copy(chunk, h.Sum(nil))
	}
}

// RemoveKeyslot removes keyslot slot from the volume on dev and wipes its
// key material (when the TPM's key is replaced after a change of PCR 7, or
// the recovery key is rotated). Tokens naming only that keyslot go with it.
// The last keyslot is refused: the volume could never be opened again.
func RemoveKeyslot(dev Device, slot int) error {
	h, err := ReadHeader(dev)
	if err != nil {
		return err
	}
	name := strconv.Itoa(slot)
	ks := h.meta.Keyslots[name]
	if ks == nil {
		return fmt.Errorf("luks2: keyslot %d: no such keyslot", slot)
	}
	if len(h.meta.Keyslots) == 1 {
		return fmt.Errorf("luks2: keyslot %d is the last one: removing it would lock the volume for good", slot)
	}
	delete(h.meta.Keyslots, name)
	for _, d := range h.meta.Digests {
		d.Keyslots = without(d.Keyslots, name)
	}
	for id, v := range h.meta.Tokens {
		obj, ok := v.(map[string]any)
		if !ok {
			continue
		}
		list, _ := obj["keyslots"].([]any)
		kept := []any{}
		for _, k := range list {
			if k != name {
				kept = append(kept, k)
			}
		}
		if len(kept) == 0 && len(list) > 0 {
			delete(h.meta.Tokens, id)
			continue
		}
		obj["keyslots"] = kept
	}
	// The header first (no longer pointing at the area), then the wipe.
	h.Seqid++
	if err := writeHeaders(dev, h, rand.Reader); err != nil {
		return err
	}
	return wipe(dev, int64(ks.Area.Offset), int64(ks.Area.Size))
}

func without(list []string, s string) []string {
	out := []string{}
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
