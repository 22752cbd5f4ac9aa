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
	if n := v.cached(); n != 3 {
		t.Fatalf("after pruning: %d tokens cached, want the 2 valid ones and the new one", n)
	}
	if _, err := v.Verify(mint(5, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(mint(6, time.Hour)); err != nil { // full of valid tokens: starts over
		t.Fatal(err)
	}
	if n := v.cached(); n != 1 {
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
	if n := v.cached(); n != 111 {
		t.Fatalf("half a minute later: %d cached, want all 111", n)
	}
	now = now.Add(11 * time.Minute) // the first 100 expired
	remember(111, time.Hour)
	if n := v.cached(); n != 12 {
		t.Fatalf("after the expired went: %d cached, want the 12 valid", n)
	}
	if v.peak != 12 {
		t.Fatalf("the map was not made anew: peak %d, want 12", v.peak)
	}
}

// The cache gives back the claims it was given, whether they fit its
// compact shape (a node's client ID as subject, a host- ID, a project)
// or not, and expires both alike.
func TestNodeVerifierCacheRoundTrip(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	v := NewNodeVerifier(nil, 0, func() time.Time { return now })
	exp := time.Unix(now.Add(time.Hour).Unix(), 0)
	cases := []NodeClaims{
		{Subject: "edgenode-host-0000abcd", HostID: "host-0000abcd", Project: "default", Gen: 7, Expiry: exp},
		{Subject: "edgenode-host-ffffffff", HostID: "host-ffffffff", Project: "", Gen: -1, Expiry: exp},
		{Subject: "edgenode-host-00000000", HostID: "host-00000000", Project: "a project", Gen: 0, Expiry: exp.Add(time.Nanosecond)},
		{Subject: "edgenode-host-x", HostID: "host-0000abcd", Project: "p", Gen: 1, Expiry: exp},        // subject not the client ID
		{Subject: "edgenode-host-ABCD0000", HostID: "host-ABCD0000", Project: "p", Gen: 1, Expiry: exp}, // not a host- ID
		{Subject: "someone", HostID: "host-0000abcd", Project: "p", Gen: 1, Expiry: exp},
	}
	for i, n := range cases {
		tok := fmt.Sprintf("token-%d", i)
		v.Remember(tok, n)
		got, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("%+v: %v", n, err)
		}
		if !got.Expiry.Equal(n.Expiry) {
			t.Errorf("%+v: expiry %v, want %v", n, got.Expiry, n.Expiry)
		}
		got.Expiry = n.Expiry
		if got != n {
			t.Errorf("cached %+v, got %+v back", n, got)
		}
	}
	if _, ok := v.cache[keyOf("token-0")]; !ok {
		t.Error("claims of the compact shape were not cached compactly")
	}
	if n := v.cached(); n != len(cases) {
		t.Fatalf("%d cached, want %d", n, len(cases))
	}
	now = exp.Add(time.Minute)
	if _, err := v.Verify("token-0"); err == nil {
		t.Error("a cached token verified after its expiry")
	}
	if _, err := v.Verify("token-3"); err == nil {
		t.Error("a cached token of the other shape verified after its expiry")
	}
	v.Remember("token-new", NodeClaims{Subject: "edgenode-host-00000001", HostID: "host-00000001", Project: "p", Expiry: now.Add(time.Hour)})
	if n := v.cached(); n != 1 {
		t.Fatalf("after the expired went: %d cached, want the new one alone", n)
	}
}
