package luks2

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// The binary header (4096 bytes, big-endian), as the LUKS2 on-disk format
// specification lays it out.
const (
	binSize       = 4096
	offVersion    = 6
	offHdrSize    = 8
	offSeqid      = 16
	offLabel      = 24
	offCsumAlg    = 72
	offSalt       = 104
	offUUID       = 168
	offHdrOffset  = 256
	offCsum       = 448
	lenLabel      = 48
	lenCsumAlg    = 32
	lenSalt       = 64
	lenUUID       = 40
	lenCsum       = 64
	maxHeaderSize = 4 << 20
)

var (
	magicPrimary   = []byte("LUKS\xba\xbe")
	magicSecondary = []byte("SKUL\xba\xbe")
)

// The header sizes LUKS2 allows; also where a secondary header may be.
var headerSizes = []int64{16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}

// metadata is the JSON area. Numbers that may exceed 2^53 are strings in
// LUKS2 (u64).
type metadata struct {
	Keyslots map[string]*keyslot `json:"keyslots"`
	Tokens   map[string]any      `json:"tokens"`
	Segments map[string]*segment `json:"segments"`
	Digests  map[string]*digest  `json:"digests"`
	Config   config              `json:"config"`
}

type keyslot struct {
	Type     string `json:"type"`
	KeySize  int    `json:"key_size"`
	AF       af     `json:"af"`
	Area     area   `json:"area"`
	KDF      kdf    `json:"kdf"`
	Priority *int   `json:"priority,omitempty"`
}

type af struct {
	Type    string `json:"type"`
	Stripes int    `json:"stripes"`
	Hash    string `json:"hash"`
}

type area struct {
	Type       string `json:"type"`
	Offset     u64    `json:"offset"`
	Size       u64    `json:"size"`
	Encryption string `json:"encryption"`
	KeySize    int    `json:"key_size"`
}

type kdf struct {
	Type       string `json:"type"`
	Hash       string `json:"hash,omitempty"`
	Iterations uint32 `json:"iterations,omitempty"`
	Time       uint32 `json:"time,omitempty"`
	Memory     uint32 `json:"memory,omitempty"`
	CPUs       uint32 `json:"cpus,omitempty"`
	Salt       string `json:"salt"`
}

type segment struct {
	Type       string   `json:"type"`
	Offset     u64      `json:"offset"`
	Size       string   `json:"size"`
	IVTweak    u64      `json:"iv_tweak"`
	Encryption string   `json:"encryption"`
	SectorSize int      `json:"sector_size"`
	Flags      []string `json:"flags,omitempty"`
}

type digest struct {
	Type       string   `json:"type"`
	Keyslots   []string `json:"keyslots"`
	Segments   []string `json:"segments"`
	Hash       string   `json:"hash"`
	Iterations uint32   `json:"iterations"`
	Salt       string   `json:"salt"`
	Digest     string   `json:"digest"`
}

type config struct {
	JSONSize     u64           `json:"json_size"`
	KeyslotsSize u64           `json:"keyslots_size"`
	Flags        []string      `json:"flags,omitempty"`
	Requirements *requirements `json:"requirements,omitempty"`
}

type requirements struct {
	Mandatory []string `json:"mandatory,omitempty"`
}

// u64 is a LUKS2 number written as a JSON string of decimal digits.
type u64 uint64

func (n u64) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatUint(uint64(n), 10) + `"`), nil
}

func (n *u64) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a string of decimal digits")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || s == "" || s[0] == '+' {
		return fmt.Errorf("%q is not a decimal number", s)
	}
	*n = u64(v)
	return nil
}

// ReadHeader reads and checks the LUKS2 header of dev: the primary, or the
// secondary when the primary is damaged (the newer of the two when both are
// good).
func ReadHeader(dev io.ReaderAt) (*Header, error) {
	p, perr := readBinary(dev, 0, magicPrimary)
	if perr == nil {
		// The secondary sits right after the primary.
		s, serr := readBinary(dev, p.HeaderSize, magicSecondary)
		if serr == nil && s.Seqid > p.Seqid {
			return s, nil
		}
		return p, nil
	}
	for _, off := range headerSizes {
		if s, err := readBinary(dev, off, magicSecondary); err == nil {
			return s, nil
		}
	}
	return nil, perr
}

func readBinary(dev io.ReaderAt, off int64, magic []byte) (*Header, error) {
	bin := make([]byte, binSize)
	if _, err := dev.ReadAt(bin, off); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, ErrNotLUKS2
		}
		return nil, fmt.Errorf("luks2: read header at %d: %w", off, err)
	}
	if !bytes.Equal(bin[:6], magic) {
		return nil, ErrNotLUKS2
	}
	if v := binary.BigEndian.Uint16(bin[offVersion:]); v != 2 {
		return nil, headerErr("version", "%d, want 2", v)
	}
	size := int64(binary.BigEndian.Uint64(bin[offHdrSize:]))
	known := false
	for _, s := range headerSizes {
		known = known || s == size
	}
	if !known {
		return nil, headerErr("hdr_size", "%d is not a LUKS2 header size (16 KiB to 4 MiB, a power of two)", size)
	}
	if got := int64(binary.BigEndian.Uint64(bin[offHdrOffset:])); got != off {
		return nil, headerErr("hdr_offset", "%d, but the header is at %d", got, off)
	}
	if alg := cstr(bin[offCsumAlg : offCsumAlg+lenCsumAlg]); alg != "sha256" {
		return nil, headerErr("checksum_alg", "%q: only sha256 is supported", alg)
	}
	all := make([]byte, size)
	copy(all, bin)
	if _, err := dev.ReadAt(all[binSize:], off+binSize); err != nil {
		return nil, headerErr("json area", "cut short: %v", err)
	}
	want := append([]byte(nil), all[offCsum:offCsum+sha256.Size]...)
	clear(all[offCsum : offCsum+lenCsum])
	got := sha256.Sum256(all)
	if subtle.ConstantTimeCompare(got[:], want) != 1 {
		return nil, headerErr("checksum", "does not match the header (damaged or changed)")
	}
	jsonArea := all[binSize:]
	end := bytes.IndexByte(jsonArea, 0)
	if end < 0 {
		return nil, headerErr("json area", "not terminated by a NUL byte")
	}
	m := &metadata{}
	dec := json.NewDecoder(bytes.NewReader(jsonArea[:end]))
	if err := dec.Decode(m); err != nil {
		return nil, headerErr("json", "%v", err)
	}
	h := &Header{
		UUID:       cstr(bin[offUUID : offUUID+lenUUID]),
		Label:      cstr(bin[offLabel : offLabel+lenLabel]),
		Seqid:      binary.BigEndian.Uint64(bin[offSeqid:]),
		HeaderSize: size,
		meta:       m,
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return h, nil
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// validate checks the JSON metadata against the binary header and itself,
// and fills the header's summary fields.
func (h *Header) validate() error {
	m := h.meta
	if int64(m.Config.JSONSize) != h.HeaderSize-binSize {
		return headerErr("config.json_size", "%d, but the binary header says %d", m.Config.JSONSize, h.HeaderSize-binSize)
	}
	if m.Config.KeyslotsSize%4096 != 0 || m.Config.KeyslotsSize > 1<<40 {
		return headerErr("config.keyslots_size", "%d is not a multiple of 4096 (or is absurdly large)", m.Config.KeyslotsSize)
	}
	areasEnd := uint64(2*h.HeaderSize) + uint64(m.Config.KeyslotsSize)

	// The data segment: the crypt segment with the lowest number.
	var segIDs []int
	for name, s := range m.Segments {
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 || strconv.Itoa(id) != name {
			return headerErr("segments", "segment ID %q is not a number", name)
		}
		if s == nil {
			return headerErr("segments."+name, "null")
		}
		if s.Type == "crypt" {
			segIDs = append(segIDs, id)
		}
	}
	if len(segIDs) == 0 {
		return headerErr("segments", "no crypt segment")
	}
	sort.Ints(segIDs)
	sname := strconv.Itoa(segIDs[0])
	s := m.Segments[sname]
	field := "segments." + sname
	switch s.SectorSize {
	case 512, 1024, 2048, 4096:
	default:
		return headerErr(field+".sector_size", "%d: want 512, 1024, 2048 or 4096", s.SectorSize)
	}
	if uint64(s.Offset) < areasEnd || uint64(s.Offset)%uint64(s.SectorSize) != 0 || s.Offset > 1<<62 {
		return headerErr(field+".offset", "%d: must be after the keyslots area (%d) and a multiple of the sector size", s.Offset, areasEnd)
	}
	h.DataOffset = int64(s.Offset)
	h.DataSize = -1
	if s.Size != "dynamic" {
		n, err := strconv.ParseUint(s.Size, 10, 62)
		if err != nil || n%uint64(s.SectorSize) != 0 {
			return headerErr(field+".size", "%q: want \"dynamic\" or a multiple of the sector size", s.Size)
		}
		h.DataSize = int64(n)
	}
	if s.Encryption == "" {
		return headerErr(field+".encryption", "empty")
	}
	h.Cipher = s.Encryption
	h.SectorSize = s.SectorSize

	for name, ks := range m.Keyslots {
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 || id >= maxKeyslots || strconv.Itoa(id) != name {
			return headerErr("keyslots", "keyslot ID %q: want 0 to %d", name, maxKeyslots-1)
		}
		if ks == nil {
			return headerErr("keyslots."+name, "null")
		}
		if err := ks.validate("keyslots."+name, uint64(2*h.HeaderSize), areasEnd); err != nil {
			return err
		}
		h.Keyslots = append(h.Keyslots, Keyslot{ID: id, KDF: ks.KDF.Type, KeySize: ks.KeySize})
	}
	sort.Slice(h.Keyslots, func(i, j int) bool { return h.Keyslots[i].ID < h.Keyslots[j].ID })
	if err := h.parseTokens(); err != nil {
		return err
	}

	for name, d := range m.Digests {
		field := "digests." + name
		if d == nil {
			return headerErr(field, "null")
		}
		if d.Type != "pbkdf2" {
			return headerErr(field+".type", "%q: only pbkdf2 is supported", d.Type)
		}
		if hashSize(d.Hash) == 0 {
			return headerErr(field+".hash", "%q is not supported (sha1, sha256, sha384, sha512)", d.Hash)
		}
		if d.Iterations == 0 {
			return headerErr(field+".iterations", "0")
		}
		if salt, err := base64.StdEncoding.DecodeString(d.Salt); err != nil || len(salt) == 0 {
			return headerErr(field+".salt", "not base64, or empty")
		}
		if dg, err := base64.StdEncoding.DecodeString(d.Digest); err != nil || len(dg) == 0 || len(dg) > 64 {
			return headerErr(field+".digest", "not base64 of 1 to 64 bytes")
		}
		for _, k := range d.Keyslots {
			if m.Keyslots[k] == nil {
				return headerErr(field+".keyslots", "names keyslot %q, which does not exist", k)
			}
		}
		for _, sg := range d.Segments {
			if m.Segments[sg] == nil {
				return headerErr(field+".segments", "names segment %q, which does not exist", sg)
			}
		}
	}
	return nil
}

func (ks *keyslot) validate(field string, areasStart, areasEnd uint64) error {
	if ks.Type != "luks2" {
		return headerErr(field+".type", "%q: only luks2 keyslots are supported", ks.Type)
	}
	if ks.KeySize < 1 || ks.KeySize > 512 {
		return headerErr(field+".key_size", "%d: want 1 to 512", ks.KeySize)
	}
	if ks.AF.Type != "luks1" {
		return headerErr(field+".af.type", "%q: only luks1 is supported", ks.AF.Type)
	}
	if hashSize(ks.AF.Hash) == 0 {
		return headerErr(field+".af.hash", "%q is not supported (sha1, sha256, sha384, sha512)", ks.AF.Hash)
	}
	a := ks.Area
	if a.Type != "raw" {
		return headerErr(field+".area.type", "%q: only raw is supported", a.Type)
	}
	if a.Encryption != cipherXTS {
		return headerErr(field+".area.encryption", "%q: only %s is supported", a.Encryption, cipherXTS)
	}
	if a.KeySize != 32 && a.KeySize != 64 {
		return headerErr(field+".area.key_size", "%d: want 32 or 64 (aes-xts)", a.KeySize)
	}
	if uint64(a.Offset) < areasStart || uint64(a.Offset)%sectorSize != 0 ||
		uint64(a.Size) > areasEnd || uint64(a.Offset) > areasEnd-uint64(a.Size) {
		return headerErr(field+".area", "offset %d, size %d: outside the keyslots area [%d, %d) or not sector-aligned", a.Offset, a.Size, areasStart, areasEnd)
	}
	if ks.AF.Stripes < 1 || uint64(ks.AF.Stripes)*uint64(ks.KeySize) > uint64(a.Size) {
		return headerErr(field+".af.stripes", "%d stripes of %d bytes do not fit the area of %d bytes", ks.AF.Stripes, ks.KeySize, a.Size)
	}
	k := ks.KDF
	switch k.Type {
	case "pbkdf2":
		if hashSize(k.Hash) == 0 {
			return headerErr(field+".kdf.hash", "%q is not supported (sha1, sha256, sha384, sha512)", k.Hash)
		}
		if k.Iterations == 0 {
			return headerErr(field+".kdf.iterations", "0")
		}
	case "argon2i", "argon2id":
		if k.Time == 0 {
			return headerErr(field+".kdf.time", "0")
		}
		if k.Memory < 8 || k.Memory > maxArgon2MemoryKiB {
			return headerErr(field+".kdf.memory", "%d KiB: want 8 to %d", k.Memory, maxArgon2MemoryKiB)
		}
		if k.CPUs < 1 || k.CPUs > maxArgon2Threads {
			return headerErr(field+".kdf.cpus", "%d: want 1 to %d", k.CPUs, maxArgon2Threads)
		}
	default:
		return headerErr(field+".kdf.type", "%q: want pbkdf2, argon2i or argon2id", k.Type)
	}
	if salt, err := base64.StdEncoding.DecodeString(k.Salt); err != nil || len(salt) == 0 {
		return headerErr(field+".kdf.salt", "not base64, or empty")
	}
	return nil
}

// writeHeaders writes both binary headers and the JSON of h, with seqid
// h.Seqid, primary first.
func writeHeaders(dev Device, h *Header, rnd io.Reader) error {
	js, err := json.Marshal(h.meta)
	if err != nil {
		return fmt.Errorf("luks2: encode metadata: %w", err)
	}
	if int64(len(js)) >= h.HeaderSize-binSize {
		return fmt.Errorf("luks2: metadata of %d bytes does not fit the JSON area of %d bytes", len(js), h.HeaderSize-binSize)
	}
	for _, hd := range []struct {
		off   int64
		magic []byte
	}{{0, magicPrimary}, {h.HeaderSize, magicSecondary}} {
		buf := make([]byte, h.HeaderSize)
		copy(buf, hd.magic)
		binary.BigEndian.PutUint16(buf[offVersion:], 2)
		binary.BigEndian.PutUint64(buf[offHdrSize:], uint64(h.HeaderSize))
		binary.BigEndian.PutUint64(buf[offSeqid:], h.Seqid)
		copy(buf[offLabel:offLabel+lenLabel-1], h.Label)
		copy(buf[offCsumAlg:], "sha256")
		if _, err := io.ReadFull(rnd, buf[offSalt:offSalt+lenSalt]); err != nil {
			return fmt.Errorf("luks2: header salt: %w", err)
		}
		copy(buf[offUUID:offUUID+lenUUID-1], h.UUID)
		binary.BigEndian.PutUint64(buf[offHdrOffset:], uint64(hd.off))
		copy(buf[binSize:], js)
		sum := sha256.Sum256(buf)
		copy(buf[offCsum:], sum[:])
		if _, err := dev.WriteAt(buf, hd.off); err != nil {
			return fmt.Errorf("luks2: write header at %d: %w", hd.off, err)
		}
	}
	return nil
}
