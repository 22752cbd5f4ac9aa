package coord

import (
	"slices"
	"testing"
	"time"
)

// TestSettled: members running at this process's first view are settled;
// this process, joining them, and members that join later are left out of
// the division for Settle; a process alone is settled at once; a member
// that leaves and comes back joins anew.
func TestSettled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	settle := 5 * time.Second
	s := &Shards{o: Options{Holder: "b"}, so: ShardOptions{Settle: settle}}
	check := func(at time.Duration, ms []string, want ...string) {
		t.Helper()
		if got := s.settled(ms, t0.Add(at)); !slices.Equal(got, want) {
			t.Errorf("at %s, members %v: division %v, want %v", at, ms, got, want)
		}
	}
	check(0, []string{"a", "b"}, "a")
	check(4*time.Second, []string{"a", "b", "c"}, "a")
	check(5*time.Second, []string{"a", "b", "c"}, "a", "b")
	check(9*time.Second, []string{"a", "b", "c"}, "a", "b", "c")
	check(10*time.Second, []string{"b", "c"}, "b", "c") // a died
	check(11*time.Second, []string{"a", "b", "c"}, "b", "c")
	check(16*time.Second, []string{"a", "b", "c"}, "a", "b", "c")

	alone := &Shards{o: Options{Holder: "a"}, so: ShardOptions{Settle: settle}}
	if got := alone.settled([]string{"a"}, t0); !slices.Equal(got, []string{"a"}) {
		t.Errorf("alone: division %v", got)
	}
	// Nobody settled (two started together): every member, rather than none.
	both := &Shards{o: Options{Holder: "b"}, so: ShardOptions{Settle: settle}}
	both.settled([]string{"b"}, t0)
	if got := both.settled([]string{"b", "c"}, t0.Add(time.Second)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a second member joining one alone: division %v", got)
	}
	none := &Shards{o: Options{Holder: "z"}, so: ShardOptions{Settle: 0}}
	if got := none.settled([]string{"y", "z"}, t0); !slices.Equal(got, []string{"y", "z"}) {
		t.Errorf("without Settle: division %v", got)
	}
}
