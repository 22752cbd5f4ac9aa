package hostmgr

import (
	"fmt"
	"testing"
	"time"
)

// After a restart the whole fleet is restored due at once. The checker's
// passes, and the last-seen saves they pace, must not stay together: over
// the timeout after the first pass they come about evenly, not all at its
// end.
func TestRestoredPassesSpread(t *testing.T) {
	const (
		hosts    = 2000
		interval = 30 * time.Second
		timeout  = 3 * interval
	)
	timeoutOf := func(string) time.Duration { return timeout }
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tr := newTracker(true)
	for i := range hosts {
		tr.restore("p", fmt.Sprintf("host-%08x", i), start.Add(-time.Minute), start, true)
	}
	if out := tr.expired(start, timeoutOf); len(out) != 0 {
		t.Fatalf("%d hosts flagged at the restart", len(out))
	}
	// Each node beats every interval, at its own phase (whole seconds);
	// each second the checker runs and the saves it queued are taken.
	// saved counts them by tenth of the timeout, in the two timeouts after
	// the restart.
	var saved [2][10]int
	for s := time.Duration(0); s <= 2*timeout; s += time.Second {
		now := start.Add(s)
		for i := range hosts {
			if time.Duration(i%30)*time.Second == s%interval {
				tr.heardAt(tr.find(fmt.Sprintf("host-%08x", i)), now)
			}
		}
		if out := tr.expired(now, timeoutOf); len(out) != 0 {
			t.Fatalf("%d hosts flagged at +%v, all heartbeating", len(out), s)
		}
		n := len(tr.unsaved(hosts))
		if s > 0 {
			tenth := int((s - time.Second) * 10 / timeout)
			saved[tenth/10][tenth%10] += n
		}
	}
	// Evenly is 200 a tenth; together (the deadline of the restart, and
	// a timeout after a heartbeat of the interval after it) is 2,000 in
	// the last tenth of the first timeout and the last third of the
	// second. The first heartbeats come over the first interval, so the
	// passes of the first tenths have few to save.
	for w := range saved {
		even := 0
		for _, n := range saved[w] {
			if n > 2*hosts/10 {
				t.Fatalf("%d saves in a tenth of timeout %d after the restart, want about %d; all: %v", n, w+1, hosts/10, saved)
			}
			if n >= hosts/10/2 {
				even++
			}
		}
		if even < 7 {
			t.Fatalf("%d tenths of timeout %d after the restart with about %d saves (at least half), want 7 or more; all: %v", even, w+1, hosts/10, saved)
		}
	}
}

// A replica drops the hosts it neither owns nor hears: after their
// silence here, once what it heard of them is saved. The hosts of the
// shards it owns stay, heard or not, and so do hosts heard lately.
func TestSweepDropsIdleHostsOfOtherShards(t *testing.T) {
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tr := newTracker(false)
	var mine, others []string
	for i := 0; len(mine) < 20 || len(others) < 20; i++ {
		id := fmt.Sprintf("host-%08x", i)
		if shardOf(id)%2 == 0 {
			mine = append(mine, id)
		} else {
			others = append(others, id)
		}
	}
	owned := []int{}
	for i := 0; i < shards; i += 2 {
		owned = append(owned, i)
	}
	tr.gain(owned, nil, start, true)
	tr.setShared(true, 30*time.Second, 0) // other replicas call: a host heard is saved every 30 s
	for _, id := range append(mine[:20:20], others[:20]...) {
		tr.heardAt(tr.get("p", id), start)
	}
	idle := func(string) time.Duration { return 10 * time.Minute }
	// Heard lately, and not saved: nothing goes.
	if n := tr.sweep(start.Add(time.Minute), idle); n != 0 {
		t.Fatalf("swept %d hosts heard a minute ago", n)
	}
	// Silent for longer than idle, but what was heard is not saved yet.
	later := start.Add(11 * time.Minute)
	if n := tr.sweep(later, idle); n != 0 {
		t.Fatalf("swept %d hosts whose last times are not saved", n)
	}
	batch := tr.unsaved(100)
	if len(batch) != 40 {
		t.Fatalf("%d times to save, want 40", len(batch))
	}
	tr.saved(batch, true)
	// One host of another shard is heard again, late: it stays.
	tr.heardAt(tr.find(others[0]), later.Add(-time.Minute))
	tr.saved(tr.unsaved(100), true)
	if n := tr.sweep(later, idle); n != 19 {
		t.Fatalf("swept %d hosts, want the 19 silent ones of shards not owned", n)
	}
	for _, id := range mine[:20] {
		if tr.find(id) == nil {
			t.Fatalf("host %s of an owned shard was dropped", id)
		}
	}
	if tr.find(others[0]) == nil || len(tr.hosts) != 21 {
		t.Fatalf("after the sweep: %d hosts tracked (the one heard lately: %v), want 21", len(tr.hosts), tr.find(others[0]) != nil)
	}
	// A shard lost: its hosts go at the next sweep after their silence.
	tr.lose(owned)
	if n := tr.sweep(later.Add(20*time.Minute), idle); n != 21 {
		t.Fatalf("after losing every shard: swept %d, want 21", n)
	}
	if len(tr.hosts) != 0 || tr.due.Len() != 0 {
		t.Fatalf("after the last sweep: %d hosts, %d queued, want none", len(tr.hosts), tr.due.Len())
	}
}

// A host is keyed by the number of its ID's hex digits, an ID of another
// form by one of its own; both come back as they were in what is saved
// and flagged. A host forgotten while its time waits to be saved is not
// saved, and its entry serves another host afterwards.
func TestTrackerKeys(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tr := newTracker(true)
	ids := []string{"host-0000abcd", "host-ffffffff", "host-00000000", "legacy-host-1", "host-ABCD0000"}
	for _, id := range ids {
		tr.heardAt(tr.get("p-"+id, id), now)
	}
	if len(tr.hosts) != len(ids) {
		t.Fatalf("%d hosts tracked, want %d", len(tr.hosts), len(ids))
	}
	for _, id := range ids {
		e := tr.find(id)
		if e == nil {
			t.Fatalf("host %s not found", id)
		}
		if got := tr.idOf(e.key); got != id {
			t.Errorf("the ID of %s's key: got %s, want %s", id, got, id)
		}
		if got := e.projectName(); got != "p-"+id {
			t.Errorf("host %s's project: got %q, want %q", id, got, "p-"+id)
		}
	}
	if tr.find("host-0000abce") != nil || tr.find("legacy-host-2") != nil {
		t.Error("a host never heard is found")
	}
	tr.forget("host-ffffffff")
	got := map[string]string{}
	for _, ls := range tr.unsaved(100) {
		got[ls.HostID] = ls.Project
		if !ls.At.Equal(now) {
			t.Errorf("host %s saved at %v, want %v", ls.HostID, ls.At, now)
		}
	}
	if len(got) != len(ids)-1 || got["host-ffffffff"] != "" || got["legacy-host-1"] != "p-legacy-host-1" {
		t.Errorf("saved %v, want every host but the one forgotten", got)
	}
	// The forgotten host's entry is free again, and serves the next one.
	e := tr.get("q", "host-12345678")
	if e.seen != 0 || e.known || e.index != -1 || e.projectName() != "q" {
		t.Errorf("a new host's entry holds what another host left: %+v", e)
	}
	for _, x := range tr.expired(now.Add(time.Hour), func(string) time.Duration { return time.Minute }) {
		if x.id == "host-ffffffff" {
			t.Error("a forgotten host expired")
		}
	}
}
