package secureboot

import (
	"bytes"
	"encoding/asn1"
	"sort"
)

// A few DER building blocks: Authenticode's structures have context tags
// and a CHOICE that encoding/asn1's struct tags cannot say, so they are
// assembled from tag-length-value pieces.

// DER tags used here.
const (
	tagInteger     = 0x02
	tagBitString   = 0x03
	tagOctetString = 0x04
	tagSequence    = 0x30
	tagSet         = 0x31
	tagContext0    = 0xa0 // [0] constructed
	tagContext2    = 0xa2 // [2] constructed
	tagContext0Pri = 0x80 // [0] primitive
)

// Object identifiers.
var (
	oidData            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidSignedData      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidContentType     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSHA256          = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidSPCIndirectData = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 4}
	oidSPCPEImageData  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 15}
	oidSPCSpOpusInfo   = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 12}
)

// tlv encodes one DER element of tag whose content is the concatenation
// of parts.
func tlv(tag byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := []byte{tag}
	switch {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	case n < 0x10000:
		out = append(out, 0x82, byte(n>>8), byte(n))
	case n < 0x1000000:
		out = append(out, 0x83, byte(n>>16), byte(n>>8), byte(n))
	default:
		out = append(out, 0x84, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func oid(o asn1.ObjectIdentifier) []byte {
	b, err := asn1.Marshal(o)
	if err != nil {
		panic(err) // the OIDs above are constants
	}
	return b
}

// algorithm is an AlgorithmIdentifier with NULL parameters.
func algorithm(o asn1.ObjectIdentifier) []byte {
	return tlv(tagSequence, oid(o), asn1.NullBytes)
}

// setOf encodes a DER SET OF: its elements sorted by their encoding.
func setOf(elems ...[]byte) []byte {
	s := append([][]byte(nil), elems...)
	sort.Slice(s, func(i, j int) bool { return bytes.Compare(s[i], s[j]) < 0 })
	return tlv(tagSet, s...)
}

// attribute is a PKCS#9 Attribute with one value.
func attribute(o asn1.ObjectIdentifier, value []byte) []byte {
	return tlv(tagSequence, oid(o), tlv(tagSet, value))
}
