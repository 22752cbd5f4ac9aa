package luks2_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/eimhq/eim/fde/luks2"
)

// The header is read from disks the node did not necessarily write: it must
// refuse anything malformed with an error, never panic, never accept a
// header whose segment or keyslots fall outside their areas.
//
//	go test -run '^$' -fuzz FuzzReadHeader -fuzzminimizetime 100x ./fde/luks2
//	go test -run '^$' -fuzz FuzzMetadata -fuzzminimizetime 100x ./fde/luks2
//
// (-fuzzminimizetime: the inputs are 32 KiB headers, whose minimizing by
// time stalls the fuzzer for its minute each.)
//
// The corpus is in testdata/fuzz (a header cryptsetup 2.6.1 wrote, one Go
// wrote, their JSON).
func FuzzReadHeader(f *testing.F) {
	f.Add(goHeader(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkHeader(t, b)
	})
}

// FuzzMetadata fuzzes the JSON area behind a binary header with a right
// checksum, which random bytes almost never get past.
func FuzzMetadata(f *testing.F) {
	hdr := goHeader(f)
	f.Add(bytes.TrimRight(hdr[4096:16384], "\x00"))
	f.Fuzz(func(t *testing.T, js []byte) {
		checkHeader(t, wrapJSON(js))
	})
}

func checkHeader(t *testing.T, b []byte) {
	h, err := luks2.ReadHeader(bytes.NewReader(b))
	if err != nil {
		if h != nil {
			t.Fatal("a header and an error")
		}
		return
	}
	if h.DataOffset < 2*h.HeaderSize || h.SectorSize < 512 || h.DataOffset%int64(h.SectorSize) != 0 {
		t.Fatalf("accepted a bad segment: %+v", h)
	}
	if h.DataSize < -1 {
		t.Fatalf("accepted a negative data size: %+v", h)
	}
}

// goHeader is the two headers of a volume Format wrote (32 KiB).
func goHeader(tb testing.TB) []byte {
	dev := newMem(devSize)
	if _, err := luks2.Format(dev, devSize, []byte("k"), luks2.Options{KDF: fastPBKDF2}); err != nil {
		tb.Fatal(err)
	}
	if _, err := luks2.AddKey(dev, []byte("k"), []byte("r"), fastArgon); err != nil {
		tb.Fatal(err)
	}
	return dev.b[:32768]
}

// wrapJSON puts js in the JSON area of a 16 KiB primary header with a right
// checksum.
func wrapJSON(js []byte) []byte {
	b := make([]byte, 16384)
	copy(b, "LUKS\xba\xbe")
	binary.BigEndian.PutUint16(b[6:], 2)
	binary.BigEndian.PutUint64(b[8:], 16384)
	copy(b[72:], "sha256")
	copy(b[4096:16383], js)
	sum := sha256.Sum256(b)
	copy(b[448:], sum[:])
	return b
}

// The seeds themselves parse (the corpus is not all rejects).
func TestFuzzSeeds(t *testing.T) {
	hdr := goHeader(t)
	for name, b := range map[string][]byte{
		"go header":  hdr,
		"go json":    wrapJSON(bytes.TrimRight(hdr[4096:16384], "\x00")),
		"secondary":  append(make([]byte, 16384), hdr[16384:]...),
		"bad json":   wrapJSON([]byte(`{"keyslots":`)),
		"no segment": wrapJSON([]byte(`{"keyslots":{},"tokens":{},"segments":{},"digests":{},"config":{"json_size":"12288","keyslots_size":"16744448"}}`)),
	} {
		h, err := luks2.ReadHeader(bytes.NewReader(b))
		bad := name == "bad json" || name == "no segment"
		if bad != (err != nil) {
			t.Errorf("%s: got %+v, %v", name, h, err)
		}
	}
}
