package exporter

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// A gzip answer assembled from pieces compressed beforehand.
//
// A deflate stream may be cut into pieces compressed on their own: each
// piece is a run of non-final blocks ended by a sync flush (an empty
// stored block, which leaves the stream byte-aligned), and refers back
// only into itself. Pieces so made can be written one after the other in
// any order, then one final empty block, and the decoder reads them as
// one stream. The gzip trailer's CRC-32 of the whole text is combined
// from the pieces' own (crcCombine), so a scrape reuses the pieces of the
// hosts that did not change without reading their text again.

// segment is a piece of a gzip answer: text compressed on its own.
type segment struct {
	data  []byte // deflate blocks, sync-flushed
	crc   uint32 // CRC-32 (IEEE) of the text
	n     int64  // length of the text
	shift uint32 // x^(8n) modulo the CRC polynomial: combines crc after earlier text
}

// compressor makes segments: a deflate writer and its output buffer,
// reused (the segments it returns have their own copy).
type compressor struct {
	fw  *flate.Writer
	out bytes.Buffer
}

func newCompressor() *compressor {
	fw, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
	return &compressor{fw: fw}
}

// compress makes a segment of text.
func (c *compressor) compress(text []byte) segment {
	c.out.Reset()
	c.fw.Reset(&c.out)
	c.fw.Write(text) // a bytes.Buffer does not fail
	c.fw.Flush()
	return segment{data: bytes.Clone(c.out.Bytes()), crc: crc32.ChecksumIEEE(text), n: int64(len(text)), shift: xPow8n(int64(len(text)))}
}

// gzipHeader: no name, no time, OS unknown.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// finalBlock is an empty stored block marked final (the stream is
// byte-aligned after a sync flush).
var finalBlock = []byte{0x01, 0x00, 0x00, 0xff, 0xff}

// gzipWriter writes segments as one gzip member.
type gzipWriter struct {
	w   io.Writer
	crc uint32
	n   int64
	err error
}

func newGzipWriter(w io.Writer) *gzipWriter {
	g := &gzipWriter{w: w}
	g.write(gzipHeader)
	return g
}

func (g *gzipWriter) write(b []byte) {
	if g.err == nil {
		_, g.err = g.w.Write(b)
	}
}

// add writes s after what was written.
func (g *gzipWriter) add(s *segment) {
	g.write(s.data)
	g.crc = gfMul(s.shift, g.crc) ^ s.crc
	g.n += s.n
}

// close ends the stream: the final block and the trailer.
func (g *gzipWriter) close() error {
	g.write(finalBlock)
	var t [8]byte
	binary.LittleEndian.PutUint32(t[:4], g.crc)
	binary.LittleEndian.PutUint32(t[4:], uint32(g.n))
	g.write(t[:])
	return g.err
}

// CRC-32 arithmetic: polynomials over GF(2) modulo the IEEE polynomial,
// bit-reflected as the checksum is (bit 31 is x^0). The CRC of A followed
// by B is crc(A)·x^(8|B|) + crc(B); the pre- and post-inversions of the
// checksum cancel out in that sum.
const crcPoly = 0xedb88320

// gfMul returns a·b modulo the polynomial.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a &^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) modulo the polynomial, by squaring.
func xPow8n(n int64) uint32 {
	p, base := uint32(1)<<31, uint32(1)<<(31-8) // x^0, x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = gfMul(base, p)
		}
		base = gfMul(base, base)
	}
	return p
}

// crcCombine returns the CRC-32 of A followed by B, from crc(A), crc(B)
// and |B|.
func crcCombine(crcA, crcB uint32, lenB int64) uint32 {
	return gfMul(xPow8n(lenB), crcA) ^ crcB
}
