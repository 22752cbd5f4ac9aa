package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testLeases: a free lease is taken, renewed by its holder and not by
// anyone else while it is valid; released, or expired, it is taken by the
// next claimer; claims racing for a free lease give it to one of them.
func testLeases(t *testing.T, s eim.Store) {
	c := ctx(t)
	claim := func(name, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.Claim(c, name, holder, ttl)
		if err != nil {
			t.Fatalf("Claim(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	if !claim("l1", "a", time.Hour) {
		t.Fatal("a free lease: Claim got false, want true")
	}
	if claim("l1", "b", time.Hour) {
		t.Fatal("a lease held by a: b's Claim got true, want false")
	}
	if !claim("l1", "a", time.Hour) {
		t.Fatal("a renewing its lease: got false, want true")
	}
	if !claim("l2", "b", time.Hour) {
		t.Fatal("another lease: b's Claim got false, want true")
	}
	// Release by another is a no-op; by the holder it frees the lease.
	if err := s.Release(c, "l1", "b"); err != nil {
		t.Fatalf("Release by b: %v", err)
	}
	if claim("l1", "b", time.Hour) {
		t.Fatal("after b's release of a's lease: b's Claim got true, want false")
	}
	if err := s.Release(c, "l1", "a"); err != nil {
		t.Fatalf("Release by a: %v", err)
	}
	if !claim("l1", "b", time.Hour) {
		t.Fatal("after a's release: b's Claim got false, want true")
	}
	if err := s.Release(c, "nope", "a"); err != nil {
		t.Fatalf("Release of an unknown lease: %v", err)
	}

	// Expiry: b cannot take a's lease before it expires, and can after.
	const ttl = 300 * time.Millisecond
	start := time.Now()
	if !claim("l3", "a", ttl) {
		t.Fatal("l3: a's Claim got false, want true")
	}
	for !claim("l3", "b", ttl) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("an expired lease was not taken over in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(start); took < ttl-5*time.Millisecond {
		t.Fatalf("a lease of %v was taken over after %v", ttl, took)
	}
	if claim("l3", "a", time.Hour) {
		t.Fatal("the former holder's renewal took its lease back")
	}

	// Racing claimers of a free lease: exactly one wins.
	var mu sync.Mutex
	var won []string
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			h := fmt.Sprintf("h%d", i)
			ok, err := s.Claim(c, "race", h, time.Hour)
			if err != nil {
				t.Errorf("Claim(race, %s): %v", h, err)
			}
			if ok {
				mu.Lock()
				won = append(won, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("racing claims: winners %v, want exactly one", won)
	}

	for _, bad := range []struct{ name, holder string }{{"", "a"}, {"x", ""}} {
		_, err := s.Claim(c, bad.name, bad.holder, time.Second)
		wantCode(t, err, eim.EINVALID)
	}
	_, err := s.Claim(c, "x", "a", 0)
	wantCode(t, err, eim.EINVALID)
}

// testMembers: announcements are listed until they expire or their
// process leaves; a renewal keeps the start and takes new modules.
func testMembers(t *testing.T, s eim.Store) {
	c := ctx(t)
	started := eim.NewTime(time.UnixMilli(1_790_000_000_000))
	if err := s.Announce(c, eim.Member{ID: "a", Modules: []string{"api", "host"}, Started: started}, time.Hour); err != nil {
		t.Fatalf("Announce(a): %v", err)
	}
	if err := s.Announce(c, eim.Member{ID: "b", Modules: []string{"host"}}, 300*time.Millisecond); err != nil {
		t.Fatalf("Announce(b): %v", err)
	}
	if err := s.Announce(c, eim.Member{ID: "c"}, time.Hour); err != nil {
		t.Fatalf("Announce(c): %v", err)
	}
	members := func() []eim.Member {
		t.Helper()
		ms, err := s.Members(c)
		if err != nil {
			t.Fatalf("Members: %v", err)
		}
		return ms
	}
	ids := func(ms []eim.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	ms := members()
	if got, want := ids(ms), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("members: got %v, want %v", got, want)
	}
	if !ms[0].Started.Equal(started.Time) || !reflect.DeepEqual(ms[0].Modules, []string{"api", "host"}) || ms[0].Expires.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("member a: got %+v, want started %v, modules [api host], expiring in about an hour", ms[0], started)
	}
	if ms[1].Started.IsZero() || ms[1].Expires.Before(ms[1].Started.Time) {
		t.Fatalf("member b: got %+v, want a start set by the store, before its expiry", ms[1])
	}
	if ms[2].Modules == nil || len(ms[2].Modules) != 0 {
		t.Fatalf("member c: modules %#v, want empty", ms[2].Modules)
	}
	bStarted := ms[1].Started

	// b expires unless renewed: renew it once (keeping its start), then
	// let it lapse.
	time.Sleep(10 * time.Millisecond) // a renewal at a later instant
	if err := s.Announce(c, eim.Member{ID: "b", Modules: []string{"host", "telemetry"}}, 300*time.Millisecond); err != nil {
		t.Fatalf("Announce(b) again: %v", err)
	}
	ms = members()
	if len(ms) != 3 || !ms[1].Started.Equal(bStarted.Time) || !reflect.DeepEqual(ms[1].Modules, []string{"host", "telemetry"}) {
		t.Fatalf("after b's renewal: got %+v, want b started %v with modules [host telemetry]", ms, bStarted)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(members()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("member b did not expire: %v", ids(members()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, want := ids(members()), []string{"a", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after b expired: got %v, want %v", got, want)
	}
	// An expired member comes back when it announces itself again.
	if err := s.Announce(c, eim.Member{ID: "b", Modules: []string{"host"}}, time.Hour); err != nil {
		t.Fatalf("Announce(b) after expiry: %v", err)
	}
	if err := s.Leave(c, "a"); err != nil {
		t.Fatalf("Leave(a): %v", err)
	}
	if err := s.Leave(c, "nobody"); err != nil {
		t.Fatalf("Leave(nobody): %v", err)
	}
	if got, want := ids(members()), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a left: got %v, want %v", got, want)
	}
	wantCode(t, s.Announce(c, eim.Member{}, time.Second), eim.EINVALID)
	wantCode(t, s.Announce(c, eim.Member{ID: "d"}, 0), eim.EINVALID)
}
