package exporter

import (
	"bytes"
	"compress/gzip"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the combined checksum of two texts is the checksum of
// the two together, for lengths from 0 to past a megabyte.
func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 8, 100, 4096, 65537, 1 << 20} {
		a, b := make([]byte, r.IntN(300)), make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(len(b)))
		if want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...)); got != want {
			t.Errorf("|B| = %d: got %08x, want %08x", n, got, want)
		}
	}
}

// TestGzipSegments: segments compressed apart, written in any order and
// more than once, read back by the standard library's reader as the
// texts in that order, checksum and length verified.
func TestGzipSegments(t *testing.T) {
	c := newCompressor()
	texts := [][]byte{
		[]byte("# HELP x h\n# TYPE x gauge\n"),
		bytes.Repeat([]byte(`edge_host_status{hostID="host-1",status="Running"} 1`+"\n"), 500),
		{},
		bytes.Repeat([]byte("abcdefgh"), 20000),
	}
	segs := make([]segment, len(texts))
	for i, tx := range texts {
		segs[i] = c.compress(tx)
	}
	order := []int{1, 0, 3, 2, 1, 1}
	var out bytes.Buffer
	g := newGzipWriter(&out)
	var want []byte
	for _, i := range order {
		g.add(&segs[i])
		want = append(want, texts[i]...)
	}
	if err := g.close(); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read back %d bytes, want %d (the texts in order)", len(got), len(want))
	}
}
