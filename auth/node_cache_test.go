package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"
)

// A full cache of verified node tokens drops the expired ones and keeps
// the rest; full of valid ones, it starts over.
func TestNodeVerifierCachePrune(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	iss, err := NewIssuer(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := NewNodeVerifier(iss, 0, func() time.Time { return now })
	v.max = 4
	mint := func(i int, ttl time.Duration) string {
		tok, _, err := iss.MintNode(NodeClaims{Subject: "edgenode-host-x", HostID: fmt.Sprintf("host-%08x", i), Project: "p", Gen: 1}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for i := range 2 {
		if _, err := v.Verify(mint(i, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 4; i++ {
		if _, err := v.Verify(mint(i, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(5 * time.Minute) // the first two expired
	if _, err := v.Verify(mint(4, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := len(v.cache); n != 3 {
		t.Fatalf("after pruning: %d tokens cached, want the 2 valid ones and the new one", n)
	}
	if _, err := v.Verify(mint(5, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(mint(6, time.Hour)); err != nil { // full of valid tokens: starts over
		t.Fatal(err)
	}
	if n := len(v.cache); n != 1 {
		t.Fatalf("a cache full of valid tokens: %d cached after the next, want 1", n)
	}
}
