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

// Expired tokens leave the cache within a minute of the next one cached,
// full or not, and the map is made anew when it has shrunk by half: a
// process holds the tokens of the nodes that call it now, not of every
// node that ever did.
func TestNodeVerifierCacheExpires(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	iss, err := NewIssuer(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := NewNodeVerifier(iss, 0, func() time.Time { return now })
	remember := func(i int, ttl time.Duration) {
		n := NodeClaims{Subject: "edgenode-host-x", HostID: fmt.Sprintf("host-%08x", i), Project: "p", Gen: 1}
		tok, exp, err := iss.MintNode(n, ttl)
		if err != nil {
			t.Fatal(err)
		}
		n.Expiry = exp
		v.Remember(tok, n)
	}
	for i := range 100 {
		remember(i, 10*time.Minute)
	}
	for i := 100; i < 110; i++ {
		remember(i, time.Hour)
	}
	now = now.Add(30 * time.Second)
	remember(110, time.Hour)
	if n := len(v.cache); n != 111 {
		t.Fatalf("half a minute later: %d cached, want all 111", n)
	}
	now = now.Add(11 * time.Minute) // the first 100 expired
	remember(111, time.Hour)
	if n := len(v.cache); n != 12 {
		t.Fatalf("after the expired went: %d cached, want the 12 valid", n)
	}
	if v.peak != 12 {
		t.Fatalf("the map was not made anew: peak %d, want 12", v.peak)
	}
}
