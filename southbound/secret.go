package southbound

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/eimhq/eim"
)

// clientPrefix starts every node's OAuth2 client ID.
const clientPrefix = "edgenode-"

// ClientID returns the OAuth2 client ID of the node of a host.
func ClientID(hostID string) string { return clientPrefix + hostID }

// HostIDOfClient returns the host ID in a node's client ID, and whether the
// client ID is one (a well-formed host ID after "edgenode-").
func HostIDOfClient(clientID string) (string, bool) {
	id, ok := strings.CutPrefix(clientID, clientPrefix)
	if !ok || !eim.ValidID(eim.KindHost, id) {
		return "", false
	}
	return id, true
}

// NewSecret returns a fresh client secret (32 random bytes, base64url
// without padding) and the hash the server stores (HashSecret).
func NewSecret() (secret, hash string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	return secret, HashSecret(secret)
}

// HashSecret returns the lower-case hex SHA-256 of a client secret. A single
// unsalted hash suffices: secrets are 256 random bits, not passwords.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CheckSecret reports, in constant time, whether secret hashes to hash. An
// empty hash (revoked credentials) matches nothing.
func CheckSecret(hash, secret string) bool {
	got := HashSecret(secret)
	ok := subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
	return ok && hash != ""
}
