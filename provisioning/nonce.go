package provisioning

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/eimhq/eim/seal"
)

// Attestation nonces: the server gives a node a fresh nonce with its
// answers, and the node's TPM quotes its PCRs over it. A nonce is made,
// not stored: 8 bytes of its issue time (unix nanoseconds), 8 random
// bytes, and an HMAC-SHA-256 of both under a key of the server's, bound to
// the project, the host and the names of the TPM keys it was wrapped for
// (16 bytes of it): 32 bytes, what a TPM's qualifying data holds. Any replica that holds the key checks it: that it is one of
// ours, for this host, and younger than nonceLife. That it is used once
// is the store's (eim.AttestationKeyStore records the issue time of the
// last nonce accepted from the host, and refuses any not after it).

// nonceLife is how long after its answer a nonce is good: a quote takes
// a TPM well under a second, and the agent asks again within seconds.
const nonceLife = 5 * time.Minute

type nonces struct {
	key []byte
	now func() time.Time
}

// newNonces derives the key from the deployment's secrets key, the same in
// every replica; without one, a random key of this process (a nonce is then
// good only at the replica that gave it: the node is asked again by
// another).
func newNonces(secrets *seal.Key, now func() time.Time) nonces {
	if secrets != nil {
		return nonces{key: secrets.Derive("eim-attestation-nonce"), now: now}
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return nonces{key: k, now: now}
}

// issue returns a fresh nonce for the host's TPM keys named keys.
func (n nonces) issue(project, hostID, keys string) []byte {
	b := make([]byte, 32)
	binary.BigEndian.PutUint64(b, uint64(n.now().UnixNano()))
	_, _ = rand.Read(b[8:16])
	copy(b[16:], n.mac(project, hostID, keys, b[:16]))
	return b
}

func (n nonces) mac(project, hostID, keys string, head []byte) []byte {
	m := hmac.New(sha256.New, n.key)
	m.Write([]byte("eim-attestation-nonce\x00" + project + "\x00" + hostID + "\x00" + keys + "\x00"))
	m.Write(head)
	return m.Sum(nil)[:16]
}

// errNonceStale is a nonce that is not (or no longer) good: the node is
// given a fresh one.
var errNonceStale = errors.New("stale nonce")

// check returns the issue time of a nonce issue gave the host for keys, or
// an error wrapping errNonceStale when b is not one, or is too old.
func (n nonces) check(project, hostID, keys string, b []byte) (int64, error) {
	if len(b) != 32 || !hmac.Equal(b[16:], n.mac(project, hostID, keys, b[:16])) {
		return 0, fmt.Errorf("%w: the quote's nonce is not one this server gave host %s for these TPM keys", errNonceStale, hostID)
	}
	at := int64(binary.BigEndian.Uint64(b))
	if age := n.now().Sub(time.Unix(0, at)); age > nonceLife || age < -time.Minute {
		return 0, fmt.Errorf("%w: the quote's nonce was given %s ago, longer than %s", errNonceStale, age.Round(time.Second), nonceLife)
	}
	return at, nil
}
