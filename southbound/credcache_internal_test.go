package southbound

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// A page read ahead is kept only when no host changed while it was read:
// the changed host may be in it, with what it was before.
func TestPrimeFillStale(t *testing.T) {
	c := newCredCache()
	c.live = func() bool { return true }
	old := eim.NodeCredentials{HostID: "host-00000001", Project: "p", DesiredState: eim.HostStateOnboarded, SecretHash: "h", Gen: 1}
	other := eim.NodeCredentials{HostID: "host-00000002", Project: "p", DesiredState: eim.HostStateOnboarded, SecretHash: "h", Gen: 1}

	// host-00000001 is invalidated between the mark and the fill: nothing
	// of the page is kept, not even the host that did not change.
	tk := c.mark()
	c.invalidate([]eim.Event{{Kind: eim.KindHost, ID: old.HostID}})
	if c.primeFill(tk, []eim.NodeCredentials{old, other}) {
		t.Fatal("a page read while a host changed was kept")
	}
	for _, id := range []string{old.HostID, other.HostID} {
		if _, _, ok := c.get(id); ok {
			t.Fatalf("%s cached from a stale page", id)
		}
	}
	// Events of other kinds do not make a page stale.
	tk = c.mark()
	c.invalidate([]eim.Event{{Kind: eim.KindInstance, ID: "inst-00000001"}})
	if !c.primeFill(tk, []eim.NodeCredentials{old, other}) {
		t.Fatal("a page was refused for an instance's change")
	}
	if got, _, ok := c.get(other.HostID); !ok || got != other {
		t.Fatalf("after the fill: %+v %v, want %+v", got, ok, other)
	}

	// An entry already valid is newer than or as new as the page: kept.
	newer := old
	newer.Gen = 2
	c.invalidate([]eim.Event{{Kind: eim.KindHost, ID: old.HostID}})
	_, tk1, _ := c.get(old.HostID)
	c.fill(old.HostID, tk1, newer)
	if !c.primeFill(c.mark(), []eim.NodeCredentials{old}) {
		t.Fatal("page refused with no change")
	}
	if got, _, _ := c.get(old.HostID); got != newer {
		t.Fatalf("a page replaced a valid entry: %+v, want %+v", got, newer)
	}

	// After a reset (the feed lost), a page of before is not kept.
	tk = c.mark()
	c.reset(time.Now())
	c.primeFill(tk, []eim.NodeCredentials{other})
	if _, _, ok := c.get(other.HostID); ok {
		t.Fatal("a page of before a reset was kept")
	}
}

// While the store is away, node calls' failures are logged once per
// storeWarnEvery with their count, not once per call.
func TestStoreWarnIsSpaced(t *testing.T) {
	var buf strings.Builder
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	err := eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")
	for range 1000 {
		s.storeWarn("node auth: read host", "host-12345678", err)
	}
	now = now.Add(storeWarnEvery)
	s.storeWarn("node auth: read host", "host-12345678", err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines for 1,001 failed calls over one interval, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "failed_calls=1") || !strings.Contains(lines[1], "failed_calls=1000") {
		t.Errorf("the lines' counts: got\n%s\nwant 1, then the 1,000 since", buf.String())
	}
}
