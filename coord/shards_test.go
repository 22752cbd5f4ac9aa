package coord_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
)

// Rendezvous hashing spreads the shards evenly enough, and a member
// leaving moves only its own shards.
func TestOwner(t *testing.T) {
	members := []string{"eim-0", "eim-1", "eim-2", "eim-3"}
	count := map[string]int{}
	for i := range 64 {
		count[coord.Owner(members, i)]++
	}
	for _, m := range members {
		if count[m] < 6 || count[m] > 28 {
			t.Errorf("%s owns %d of 64 shards among 4 members, want about 16", m, count[m])
		}
	}
	rest := members[:3]
	for i := range 64 {
		before, after := coord.Owner(members, i), coord.Owner(rest, i)
		if before != "eim-3" && before != after {
			t.Errorf("shard %d moved from %s to %s when eim-3 left", i, before, after)
		}
	}
	if got := coord.Owner(nil, 0); got != "" {
		t.Errorf("Owner(none): got %q, want \"\"", got)
	}
	if a, b := coord.ShardOf("host-0a1b2c3d", 64), coord.ShardOf("host-0a1b2c3d", 64); a != b || a < 0 || a >= 64 {
		t.Errorf("ShardOf: got %d and %d", a, b)
	}
}

// shardTTL leaves a round of 64 claims time to finish well within a
// tick even under the race detector on a busy machine.
const shardTTL = 1500 * time.Millisecond

// member is one process dividing shards with others.
type member struct {
	id     string
	st     *flakyStore
	shards *coord.Shards
	cancel context.CancelFunc
	done   chan error

	mu        sync.Mutex
	releasing []int // shards handed over
}

// fleet is a set of members; alive lists those the others see.
type fleet struct {
	t       *testing.T
	mu      sync.Mutex
	alive   []string
	members map[string]*member
	// owners counts the owners of each shard as Gained and Lost report
	// them: never more than one.
	owners [64]atomic.Int32
}

func (f *fleet) start(open func() eim.Store, id string) *member {
	t := f.t
	m := &member{id: id, st: &flakyStore{Store: open()}, done: make(chan error, 1)}
	var err error
	m.shards, err = coord.NewShards(coord.Options{Store: m.st, Holder: id, TTL: shardTTL}, coord.ShardOptions{
		Prefix: "test/shard",
		Members: func(ctx context.Context) ([]string, error) {
			if m.st.down.Load() {
				return nil, errDown
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			return slices.Clone(f.alive), nil
		},
		Gained: func(ctx context.Context, shards []int) error {
			for _, i := range shards {
				if n := f.owners[i].Add(1); n > 1 {
					t.Errorf("%s gained shard %d, which has %d owners now", id, i, n)
				}
			}
			return nil
		},
		Releasing: func(ctx context.Context, shards []int) error {
			m.mu.Lock()
			m.releasing = append(m.releasing, shards...)
			m.mu.Unlock()
			return nil
		},
		Lost: func(shards []int) {
			for _, i := range shards {
				f.owners[i].Add(-1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	m.cancel = cancel
	go func() { m.done <- m.shards.Run(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	f.mu.Lock()
	f.alive = append(f.alive, id)
	f.members[id] = m
	f.mu.Unlock()
	return m
}

func (m *member) stop(t *testing.T) {
	m.cancel()
	if err, ok := <-m.done; ok {
		close(m.done)
		if err != nil {
			t.Errorf("Shards.Run: %v", err)
		}
	}
}

// leave takes id out of the members the others see.
func (f *fleet) leave(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive = slices.DeleteFunc(f.alive, func(s string) bool { return s == id })
}

// balanced reports whether every alive member owns exactly its shards.
func (f *fleet) balanced() bool {
	f.mu.Lock()
	alive := slices.Clone(f.alive)
	f.mu.Unlock()
	for _, id := range alive {
		m := f.members[id]
		for i := range 64 {
			if m.shards.Owns(i) != (coord.Owner(alive, i) == id) {
				return false
			}
		}
	}
	return true
}

// Members divide the shards as rendezvous hashing says, one owner per
// shard at any time; a member joining is handed its shards (Releasing
// first), and a member dying has its shards taken over within a TTL and
// a round once the others no longer see it.
func TestShards(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		f := &fleet{t: t, members: map[string]*member{}}
		a := f.start(open, "a")
		waitFor(t, func() bool { return a.shards.Owned() == 64 })
		b := f.start(open, "b")
		c := f.start(open, "c")
		waitFor(t, f.balanced)
		a.mu.Lock()
		handed := len(a.releasing)
		a.mu.Unlock()
		if want := 64 - a.shards.Owned(); handed != want {
			t.Fatalf("a handed over %d shards (Releasing), want %d", handed, want)
		}

		// c dies: its store fails, and the others stop seeing it as its
		// membership expires.
		c.st.down.Store(true)
		died := time.Now()
		f.leave("c")
		waitFor(t, func() bool { return a.shards.Owned()+b.shards.Owned() == 64 })
		if took := time.Since(died); took > shardTTL+2*shardTTL/3+300*time.Millisecond {
			t.Fatalf("c's shards were taken over in %v, want within a TTL and a round (%v)", took, shardTTL+shardTTL/3)
		}
		waitFor(t, func() bool { return c.shards.Owned() == 0 })
		waitFor(t, f.balanced)

		// b stops: its shards are released and taken at a's next round.
		b.stop(t)
		f.leave("b")
		waitFor(t, func() bool { return a.shards.Owned() == 64 })
		for i := range f.owners {
			if n := f.owners[i].Load(); n != 1 {
				t.Errorf("shard %d: %d owners, want 1", i, n)
			}
		}
	})
}

func TestShardOptionsChecked(t *testing.T) {
	st := openStore(t, t.TempDir()+"/eim.db")
	_, err := coord.NewShards(coord.Options{Store: st, Holder: "a"}, coord.ShardOptions{Prefix: "x"})
	if eim.ErrorCode(err) != eim.EINVALID {
		t.Fatalf("NewShards without Members and Gained: got %v, want code %s", err, eim.EINVALID)
	}
}

// A round whose calls to the store fail says so (Failed), the shards
// lapse, and they are taken back once the store answers; OwnsFor holds
// only while the lease surely lasts that much longer.
func TestShardsReportFailures(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		st := &flakyStore{Store: open()}
		var failed atomic.Int32
		sh, err := coord.NewShards(coord.Options{Store: st, Holder: "a", TTL: shardTTL}, coord.ShardOptions{Prefix: "test/failed",
			Members: func(context.Context) ([]string, error) {
				if st.down.Load() {
					return nil, errDown
				}
				return []string{"a"}, nil
			},
			Gained: func(context.Context, []int) error { return nil },
			Failed: func(err error) {
				if eim.ErrorCode(err) != eim.EUNAVAILABLE {
					t.Errorf("Failed with %v, want the store's unavailable", err)
				}
				failed.Add(1)
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- sh.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		waitFor(t, func() bool { return sh.Owned() == 64 })
		if !sh.OwnsFor(0, shardTTL/3) || sh.OwnsFor(0, shardTTL) {
			t.Fatalf("OwnsFor(%v) %v, OwnsFor(%v) %v just after a renewal; want true, false",
				shardTTL/3, sh.OwnsFor(0, shardTTL/3), shardTTL, sh.OwnsFor(0, shardTTL))
		}
		if n := failed.Load(); n != 0 {
			t.Fatalf("Failed called %d times while the store answered", n)
		}
		st.down.Store(true)
		waitFor(t, func() bool { return failed.Load() > 0 && sh.Owned() == 0 })
		st.down.Store(false)
		waitFor(t, func() bool { return sh.Owned() == 64 })
	})
}
