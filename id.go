package eim

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// NewID returns a fresh resource ID of the kind: its prefix, a dash and eight
// lowercase hex digits, as the original EIM's IDs are.
func NewID(k Kind) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return string(k) + "-" + hex.EncodeToString(b[:])
}

// ValidID reports whether id is a well-formed ID of kind k.
func ValidID(k Kind, id string) bool {
	rest, ok := strings.CutPrefix(id, string(k)+"-")
	if !ok || len(rest) != 8 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckID returns an EINVALID error naming field when id is not a well-formed
// ID of kind k. A malformed ID is a client error (400); a well-formed ID that
// does not exist is ENOTFOUND (404).
func CheckID(k Kind, field, id string) error {
	if !ValidID(k, id) {
		return Errorf(EINVALID, "%s: %q is not a valid %s ID (want %s-<8 hex digits>)", field, id, k, k)
	}
	return nil
}
