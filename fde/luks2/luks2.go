// Package luks2 writes and opens LUKS2 encrypted volumes in pure Go, so that
// the micro-OS can encrypt the disk it installs and the installed test OS can
// unlock it, without cryptsetup on the node and without cgo. What it writes
// is what cryptsetup 2.x reads (and the reverse): the binary headers, primary
// and secondary, with their SHA-256 checksums; the JSON metadata; keyslots of
// type luks2 (argon2id or PBKDF2-SHA256, the LUKS1 anti-forensic splitter
// with SHA-256, the key material encrypted with aes-xts-plain64); a PBKDF2
// digest of the volume key; one data segment of aes-xts-plain64 with a 512-bit
// key and 512-byte sectors.
//
// The layout of a volume Format writes is cryptsetup's default: two 16 KiB
// headers (4 KiB binary + 12 KiB JSON), the keyslots area up to 16 MiB, the
// data from 16 MiB to the end of the device. Each keyslot takes 258048 bytes
// (a 64-byte key in 4000 stripes).
//
// The API:
//
//	NewVolumeKey() ([]byte, error)                      // 64 random bytes
//	Format(dev Device, size int64, key []byte, opts Options) (*Header, error)
//	AddKey(dev Device, key, newKey []byte, kdf KDF) (slot int, err error)
//	AddKeyVolumeKey(dev Device, volumeKey, newKey []byte, kdf KDF) (slot int, err error)
//	RemoveKeyslot(dev Device, slot int) error
//	Unlock(dev io.ReaderAt, key []byte) (volumeKey []byte, err error)
//	AddToken(dev Device, typ string, keyslots []int, data []byte) (id int, err error)
//	AddTokenFields(dev Device, typ string, keyslots []int, fields map[string]any) (id int, err error)
//	RemoveToken(dev Device, id int) error                 // Header.Tokens, Header.Token(typ)
//	ReadHeader(dev io.ReaderAt) (*Header, error)
//	Activate(name, devPath string, volumeKey []byte) (mapperPath string, err error)  // Linux
//	Deactivate(name string) error                                                      // Linux
//
// Errors: ErrNotLUKS2 (no LUKS2 header on the device), ErrBadKey (no keyslot
// opens with the key), *HeaderError (a header that is damaged or not one this
// package can use, naming the field); branch with errors.Is / errors.As.
package luks2

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// Device is what a volume is written to and read from: a block device or an
// image file (*os.File), or memory in tests.
type Device interface {
	io.ReaderAt
	io.WriterAt
}

// Errors callers branch on.
var (
	// ErrNotLUKS2 means the device has no LUKS2 header at all (no magic in
	// either header location): it was never formatted, or was wiped.
	ErrNotLUKS2 = errors.New("luks2: no LUKS2 header on the device")
	// ErrBadKey means no keyslot opens with the key given.
	ErrBadKey = errors.New("luks2: no keyslot opens with this key")
)

// HeaderError is a LUKS2 header that is damaged or that this package cannot
// use; Field names what is wrong (e.g. "binary header checksum",
// "keyslots.1.kdf.memory").
type HeaderError struct {
	Field string
	Msg   string
}

func (e *HeaderError) Error() string {
	return "luks2: header: " + e.Field + ": " + e.Msg
}

func headerErr(field, format string, args ...any) error {
	return &HeaderError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Key derivation functions of a keyslot.
const (
	KDFArgon2id = "argon2id"
	KDFPBKDF2   = "pbkdf2"
)

// KDF is how a keyslot turns its key (a passphrase, or the TPM's secret)
// into the key that encrypts the keyslot's copy of the volume key. The zero
// value is argon2id with the defaults below.
type KDF struct {
	Type string // KDFArgon2id (default) or KDFPBKDF2

	// argon2id: passes (default 4, cryptsetup's minimum), memory in KiB
	// (default 65536: 64 MiB, enough to fit a node with little RAM) and
	// lanes (default 2).
	Time      uint32
	MemoryKiB uint32
	Threads   uint8

	// pbkdf2 (SHA-256): iterations (default 600000).
	Iterations uint32
}

// Defaults of the KDF.
const (
	DefaultArgon2Time      = 4
	DefaultArgon2MemoryKiB = 64 * 1024
	DefaultArgon2Threads   = 2
	DefaultPBKDF2Iter      = 600000
)

func (k KDF) withDefaults() (KDF, error) {
	switch k.Type {
	case "", KDFArgon2id:
		k.Type = KDFArgon2id
		if k.Time == 0 {
			k.Time = DefaultArgon2Time
		}
		if k.MemoryKiB == 0 {
			k.MemoryKiB = DefaultArgon2MemoryKiB
		}
		if k.Threads == 0 {
			k.Threads = DefaultArgon2Threads
		}
		// cryptsetup's bounds: it refuses keyslots outside them.
		if k.Time < 4 {
			return k, fmt.Errorf("luks2: kdf time %d: argon2id needs at least 4 passes", k.Time)
		}
		if k.MemoryKiB < 32 || k.MemoryKiB > maxArgon2MemoryKiB {
			return k, fmt.Errorf("luks2: kdf memory %d KiB: want 32 to %d", k.MemoryKiB, maxArgon2MemoryKiB)
		}
		if k.Threads > maxArgon2Threads {
			return k, fmt.Errorf("luks2: kdf threads %d: want 1 to %d", k.Threads, maxArgon2Threads)
		}
	case KDFPBKDF2:
		if k.Iterations == 0 {
			k.Iterations = DefaultPBKDF2Iter
		}
		if k.Iterations < 1000 {
			return k, fmt.Errorf("luks2: kdf iterations %d: pbkdf2 needs at least 1000", k.Iterations)
		}
	default:
		return k, fmt.Errorf("luks2: kdf type %q: want %q or %q", k.Type, KDFArgon2id, KDFPBKDF2)
	}
	return k, nil
}

// Options of Format.
type Options struct {
	KDF KDF // of keyslot 0
	// VolumeKey is the key of the data (64 bytes for aes-xts-plain64 with
	// AES-256); nil makes a random one. Give it (NewVolumeKey) to Activate
	// right after Format without deriving it again.
	VolumeKey []byte
	Label     string // at most 47 bytes
	UUID      string // empty: a random UUID (version 4)
	// Rand is the source of salts, the splitter's stripes and a random
	// volume key; nil is crypto/rand.
	Rand io.Reader
}

// Layout of the volumes Format writes (cryptsetup's defaults).
const (
	hdrSize       = 16384             // one binary header + JSON area
	jsonSize      = hdrSize - binSize // 12 KiB
	dataOffset    = 16 << 20          // where the data segment starts
	keyslotsStart = 2 * hdrSize
	keyslotsSize  = dataOffset - keyslotsStart
	volumeKeySize = 64
	afStripes     = 4000
	sectorSize    = 512
	digestIter    = 10000
	cipherXTS     = "aes-xts-plain64"
	maxKeyslots   = 32
)

// DataOffset is where Format puts the encrypted data: 16 MiB from the start
// of the device.
const DataOffset = dataOffset

// Header is what a LUKS2 header says, in the terms a caller needs.
type Header struct {
	UUID       string
	Label      string
	Seqid      uint64
	HeaderSize int64 // one binary header and its JSON area, in bytes
	// The data segment: where the encrypted data starts, its length (-1 when
	// it runs to the end of the device, cryptsetup's "dynamic"), its cipher
	// and sector size.
	DataOffset int64
	DataSize   int64
	Cipher     string
	SectorSize int
	Keyslots   []Keyslot // by ID
	Tokens     []Token   // by ID

	meta    *metadata
	newSlot int // the keyslot addKeyslot added
}

// Keyslot is one way in to the volume key.
type Keyslot struct {
	ID      int
	KDF     string // KDFArgon2id or KDFPBKDF2
	KeySize int    // of the volume key it holds
}

// DataLength is the length of the encrypted data on a device of devSize
// bytes.
func (h *Header) DataLength(devSize int64) int64 {
	if h.DataSize >= 0 {
		return h.DataSize
	}
	return devSize - h.DataOffset
}

// NewVolumeKey returns a random 64-byte volume key (aes-xts-plain64 with
// AES-256).
func NewVolumeKey() ([]byte, error) {
	k := make([]byte, volumeKeySize)
	if _, err := io.ReadFull(rand.Reader, k); err != nil {
		return nil, fmt.Errorf("luks2: volume key: %w", err)
	}
	return k, nil
}

// Format writes a new LUKS2 header to dev, a device of size bytes, with
// keyslot 0 opened by key, and wipes the keyslots area (what an earlier
// volume left there). It does not touch the data area: the data reads as
// noise until written through the mapping.
func Format(dev Device, size int64, key []byte, opts Options) (*Header, error) {
	if len(key) == 0 {
		return nil, errors.New("luks2: key: empty")
	}
	if size <= dataOffset {
		return nil, fmt.Errorf("luks2: size %d bytes: the device must be larger than the %d bytes of headers and keyslots", size, dataOffset)
	}
	if len(opts.Label) > 47 {
		return nil, fmt.Errorf("luks2: label: %d bytes, at most 47", len(opts.Label))
	}
	kdf, err := opts.KDF.withDefaults()
	if err != nil {
		return nil, err
	}
	rnd := opts.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	vk := opts.VolumeKey
	if vk == nil {
		vk = make([]byte, volumeKeySize)
		if _, err := io.ReadFull(rnd, vk); err != nil {
			return nil, fmt.Errorf("luks2: volume key: %w", err)
		}
	} else if len(vk) != volumeKeySize {
		return nil, fmt.Errorf("luks2: volume key: %d bytes, want %d (aes-xts-plain64, AES-256)", len(vk), volumeKeySize)
	}
	id := opts.UUID
	if id == "" {
		if id, err = newUUID(rnd); err != nil {
			return nil, err
		}
	} else if !validUUID(id) {
		return nil, fmt.Errorf("luks2: uuid %q: want the form 01234567-89ab-cdef-0123-456789abcdef", id)
	}

	dsalt := make([]byte, 32)
	if _, err := io.ReadFull(rnd, dsalt); err != nil {
		return nil, fmt.Errorf("luks2: salt: %w", err)
	}
	dg, err := pbkdf2Key("sha256", vk, dsalt, digestIter, 32)
	if err != nil {
		return nil, err
	}
	m := &metadata{
		Keyslots: map[string]*keyslot{},
		Tokens:   map[string]any{},
		Segments: map[string]*segment{"0": {
			Type: "crypt", Offset: dataOffset, Size: "dynamic", IVTweak: 0,
			Encryption: cipherXTS, SectorSize: sectorSize,
		}},
		Digests: map[string]*digest{"0": {
			Type: "pbkdf2", Keyslots: []string{}, Segments: []string{"0"}, Hash: "sha256",
			Iterations: digestIter, Salt: b64(dsalt), Digest: b64(dg),
		}},
		Config: config{JSONSize: jsonSize, KeyslotsSize: keyslotsSize},
	}
	h := &Header{UUID: id, Label: opts.Label, HeaderSize: hdrSize, meta: m}

	// Wipe the keyslots area first, then write the keyslot, then the headers
	// last, so that an interrupted Format leaves no header pointing at
	// half-written key material.
	if err := wipe(dev, keyslotsStart, keyslotsSize); err != nil {
		return nil, err
	}
	if err := addKeyslot(dev, h, vk, key, kdf, rnd); err != nil {
		return nil, err
	}
	if err := writeHeaders(dev, h, rnd); err != nil {
		return nil, err
	}
	return ReadHeader(dev)
}

// AddKey adds a keyslot opened by newKey (a recovery key) to the volume on
// dev, whose existing key is key, and returns the new keyslot's ID.
func AddKey(dev Device, key, newKey []byte, kdf KDF) (int, error) {
	h, kdf, err := prepareAdd(dev, newKey, kdf)
	if err != nil {
		return 0, err
	}
	vk, _, err := unlock(dev, h, key)
	if err != nil {
		return 0, err
	}
	return addKey(dev, h, vk, newKey, kdf)
}

// AddKeyVolumeKey is AddKey for a caller that holds the volume key (the
// installer, right after Format): it skips deriving an existing keyslot's
// key, and refuses a volume key the volume's digest does not match.
func AddKeyVolumeKey(dev Device, volumeKey, newKey []byte, kdf KDF) (int, error) {
	h, kdf, err := prepareAdd(dev, newKey, kdf)
	if err != nil {
		return 0, err
	}
	ok := false
	for _, d := range h.meta.Digests {
		ok = ok || d.matches(volumeKey)
	}
	if !ok {
		return 0, errors.New("luks2: volume key: not this volume's (its digest does not match)")
	}
	return addKey(dev, h, volumeKey, newKey, kdf)
}

func prepareAdd(dev Device, newKey []byte, kdf KDF) (*Header, KDF, error) {
	if len(newKey) == 0 {
		return nil, kdf, errors.New("luks2: new key: empty")
	}
	kdf, err := kdf.withDefaults()
	if err != nil {
		return nil, kdf, err
	}
	h, err := ReadHeader(dev)
	return h, kdf, err
}

// addKey writes a keyslot holding vk for newKey, then both headers with
// the next seqid.
func addKey(dev Device, h *Header, vk, newKey []byte, kdf KDF) (int, error) {
	if err := addKeyslot(dev, h, vk, newKey, kdf, rand.Reader); err != nil {
		return 0, err
	}
	h.Seqid++
	if err := writeHeaders(dev, h, rand.Reader); err != nil {
		return 0, err
	}
	return h.newSlot, nil
}

// Unlock returns the volume key of the volume on dev, trying key on every
// keyslot (those of higher priority first). ErrBadKey: no keyslot opens.
func Unlock(dev io.ReaderAt, key []byte) ([]byte, error) {
	h, err := ReadHeader(dev)
	if err != nil {
		return nil, err
	}
	vk, _, err := unlock(dev, h, key)
	return vk, err
}

func unlock(dev io.ReaderAt, h *Header, key []byte) ([]byte, int, error) {
	if r := h.meta.Config.Requirements; r != nil && len(r.Mandatory) > 0 {
		return nil, 0, headerErr("config.requirements", "the volume requires %q, which this package does not support", r.Mandatory)
	}
	type cand struct{ id, prio int }
	var order []cand
	for name, ks := range h.meta.Keyslots {
		id, _ := strconv.Atoi(name)
		prio := 1
		if ks.Priority != nil {
			prio = *ks.Priority
		}
		if prio == 0 { // "ignore": used only when asked for by number
			continue
		}
		order = append(order, cand{id, prio})
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].prio != order[j].prio {
			return order[i].prio > order[j].prio
		}
		return order[i].id < order[j].id
	})
	for _, c := range order {
		name := strconv.Itoa(c.id)
		ks := h.meta.Keyslots[name]
		vk, err := openKeyslot(dev, name, ks, key)
		if err != nil {
			return nil, 0, err
		}
		if h.checkDigest(name, vk) {
			return vk, c.id, nil
		}
	}
	return nil, 0, ErrBadKey
}

// checkDigest reports whether vk matches a digest that covers keyslot name.
func (h *Header) checkDigest(name string, vk []byte) bool {
	for _, d := range h.meta.Digests {
		if contains(d.Keyslots, name) && d.matches(vk) {
			return true
		}
	}
	return false
}

// matches reports whether vk is the key digest d was computed from.
func (d *digest) matches(vk []byte) bool {
	salt, _ := base64.StdEncoding.DecodeString(d.Salt)
	want, _ := base64.StdEncoding.DecodeString(d.Digest)
	got, err := pbkdf2Key(d.Hash, vk, salt, int(d.Iterations), len(want))
	return err == nil && subtle.ConstantTimeCompare(got, want) == 1
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func newUUID(r io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(r, u[:]); err != nil {
		return "", fmt.Errorf("luks2: uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func wipe(dev Device, off, n int64) error {
	zero := make([]byte, 1<<20)
	for n > 0 {
		c := int64(len(zero))
		if c > n {
			c = n
		}
		if _, err := dev.WriteAt(zero[:c], off); err != nil {
			return fmt.Errorf("luks2: wipe keyslots area: %w", err)
		}
		off += c
		n -= c
	}
	return nil
}
