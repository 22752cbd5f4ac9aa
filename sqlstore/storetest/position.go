package storetest

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// testFeedPositions: a consumer without a position has none; a saved
// position is read back and never moves back; consumers are apart; a bad
// name or revision is refused.
func testFeedPositions(t *testing.T, s eim.Store) {
	c := ctx(t)
	want := func(consumer string, rev int64, ok bool) {
		t.Helper()
		got, found, err := s.FeedPosition(c, consumer)
		if err != nil {
			t.Fatalf("FeedPosition(%s): %v", consumer, err)
		}
		if got != rev || found != ok {
			t.Fatalf("FeedPosition(%s): got %d, %v, want %d, %v", consumer, got, found, rev, ok)
		}
	}
	save := func(consumer string, rev int64) {
		t.Helper()
		if err := s.SaveFeedPosition(c, consumer, rev); err != nil {
			t.Fatalf("SaveFeedPosition(%s, %d): %v", consumer, rev, err)
		}
	}
	want("reaper", 0, false)
	save("reaper", 0)
	want("reaper", 0, true)
	save("reaper", 42)
	want("reaper", 42, true)
	save("reaper", 7) // a late save of a process that lost its claim
	want("reaper", 42, true)
	save("reaper", 43)
	want("reaper", 43, true)
	want("oscatalog", 0, false)
	save("oscatalog", 5)
	want("oscatalog", 5, true)
	want("reaper", 43, true)

	for _, name := range []string{"", strings.Repeat("x", 129), "bad\xff"} {
		_, _, err := s.FeedPosition(c, name)
		wantCode(t, err, eim.EINVALID)
		wantCode(t, s.SaveFeedPosition(c, name, 1), eim.EINVALID)
	}
	wantCode(t, s.SaveFeedPosition(c, "reaper", -1), eim.EINVALID)
}
