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
				tr.heardAt(tr.hosts[fmt.Sprintf("host-%08x", i)], now)
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
