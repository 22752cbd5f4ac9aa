package feed_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var regions = []eim.Kind{eim.KindRegion}

// A feed that fails (the watch cut every 7 events) and a handler that
// fails once lose nothing: every event is handled, in order, and the
// batch that failed is handled again; each resumed run starts after the
// last event handled.
func TestResumeAfterFailure(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		st := &faultyStore{Store: e.store}
		st.cutAfter.Store(7)
		var c collector
		var failed atomic.Bool
		var calls atomic.Int64
		var failedBatch []eim.Event
		r := feed.New(feed.Options{Store: st, Name: "t", Kinds: regions, MinWait: 5 * time.Millisecond, MaxWait: 20 * time.Millisecond,
			Handle: func(ctx context.Context, evs []eim.Event) error {
				if calls.Add(1) == 2 && !failed.Swap(true) {
					failedBatch = slices.Clone(evs)
					return errors.New("not now")
				}
				return c.handle(ctx, evs)
			}})
		e.start(r)
		waitFor(t, "the runner to start", r.Live)
		want := e.write(40)
		waitFor(t, "every event", func() bool { return len(c.revisions()) >= len(want) })
		if got := c.revisions(); !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v", got, want)
		}
		if !failed.Load() || !slices.ContainsFunc(c.batches, func(b []eim.Event) bool { return b[0].Revision == failedBatch[0].Revision }) {
			t.Fatalf("the failed batch %v was not handled again", failedBatch)
		}
		starts := st.watchStarts()
		if len(starts) < 2 {
			t.Fatalf("%d watches for 40 events cut every 7, want 2 or more (a resumed run catches up before it watches)", len(starts))
		}
		for _, after := range starts[1:] {
			if after != 0 && !slices.Contains(want, after) {
				t.Fatalf("a watch started after %d, not after an event handled (%v)", after, starts)
			}
		}
		if r.Position() != want[len(want)-1] {
			t.Fatalf("position %d, want %d", r.Position(), want[len(want)-1])
		}
	})
}

// A PostgreSQL that goes away (every connection cut, new ones refused)
// stops the runner's store, not the runner: once it is back, the events
// written meanwhile by another process are handled, and none is lost.
func TestResumeAcrossOutage(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.NewProxy(t, u.Host)
	e := newEnv(t, dsn)
	behind, err := sqlstore.Open(t.Context(), proxy.URL(t, dsn), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer behind.Close()
	var c collector
	r := feed.New(feed.Options{Store: behind, Name: "t", Kinds: regions, Handle: c.handle, MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond})
	stop := e.start(r)
	defer stop()
	waitFor(t, "the runner to start", r.Live)
	want := e.write(3)
	waitFor(t, "the first events", func() bool { return len(c.revisions()) == 3 })
	proxy.Cut()
	waitFor(t, "the runner to see the outage", func() bool { return !r.Live() })
	want = append(want, e.write(5)...) // through another Store: another process
	time.Sleep(300 * time.Millisecond) // a few failed restarts
	proxy.Restore()
	want = append(want, e.write(2)...)
	waitFor(t, "every event", func() bool { return len(c.revisions()) >= len(want) })
	if got := c.revisions(); !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
}

// A durable consumer's position is saved while it runs and when it
// stops; the next run of the consumer, in another process, resumes after
// it: the events written in between are handled, and none twice.
func TestDurablePosition(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		var c1 collector
		r1 := feed.New(feed.Options{Store: e.store, Name: "reaper", Kinds: regions, Handle: c1.handle, Durable: true, SaveEvery: 10 * time.Millisecond})
		stop := e.start(r1)
		waitFor(t, "the runner to start", r1.Live)
		first := e.write(4)
		waitFor(t, "the first events", func() bool { return len(c1.revisions()) == 4 })
		waitFor(t, "the position saved while running", func() bool {
			rev, ok, err := e.store.FeedPosition(e.ctx, "reaper")
			return err == nil && ok && rev == first[3]
		})
		more := e.write(2)
		waitFor(t, "the next events", func() bool { return len(c1.revisions()) == 6 })
		stop()
		if rev, ok, err := e.store.FeedPosition(e.ctx, "reaper"); err != nil || !ok || rev != more[1] {
			t.Fatalf("position after the stop: %d, %v, %v, want %d", rev, ok, err, more[1])
		}

		// Written while no process runs the consumer.
		between := e.write(3)
		other := e.open()
		var c2 collector
		r2 := feed.New(feed.Options{Store: other, Name: "reaper", Kinds: regions, Handle: c2.handle, Durable: true})
		e.start(r2)
		after := e.write(1)
		want := append(between, after...)
		waitFor(t, "the events after the position", func() bool { return len(c2.revisions()) >= len(want) })
		if got := c2.revisions(); !slices.Equal(got, want) {
			t.Fatalf("the second run handled %v, want %v", got, want)
		}

		// Another consumer has a position of its own: none, so it starts
		// at the store's revision.
		var c3 collector
		r3 := feed.New(feed.Options{Store: e.store, Name: "other", Kinds: regions, Handle: c3.handle, Durable: true})
		e.start(r3)
		waitFor(t, "the runner to start", r3.Live)
		last := e.write(1)
		waitFor(t, "its first event", func() bool { return len(c3.revisions()) == 1 })
		if got := c3.revisions(); got[0] != last[0] {
			t.Fatalf("a new consumer handled %v first, want %d", got, last[0])
		}
	})
}

// A reconciler that resumes is Live only once it has caught up with the
// events it missed: a consumer that serves from what it handled (the
// host view) is not used while it lags by more than the feed's latency.
func TestLiveOnceCaughtUp(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		var c collector
		r1 := feed.New(feed.Options{Store: e.store, Name: "view", Kinds: regions, Handle: c.handle, Durable: true})
		stop := e.start(r1)
		waitFor(t, "the runner to start", r1.Live)
		stop()
		missed := e.write(130) // more than a batch
		var mu sync.Mutex
		var liveAt []bool
		var onLive []bool
		var r2 *feed.Runner
		r2 = feed.New(feed.Options{Store: e.store, Name: "view", Kinds: regions, Durable: true,
			OnLive: func(live bool) {
				mu.Lock()
				defer mu.Unlock()
				onLive = append(onLive, live)
			},
			Handle: func(ctx context.Context, evs []eim.Event) error {
				mu.Lock()
				for range evs {
					liveAt = append(liveAt, r2.Live())
				}
				mu.Unlock()
				return c.handle(ctx, evs)
			}})
		e.start(r2)
		waitFor(t, "the runner to catch up", r2.Live)
		after := e.write(1)
		waitFor(t, "the next event", func() bool { return c.has(after[0]) })
		mu.Lock()
		defer mu.Unlock()
		if len(liveAt) != len(missed)+1 || slices.Contains(liveAt[:len(missed)], true) || !liveAt[len(missed)] {
			t.Fatalf("Live when each event was handled: %v; want false for the %d missed, then true", liveAt, len(missed))
		}
		if !slices.Equal(onLive, []bool{true}) {
			t.Fatalf("OnLive calls %v, want [true]", onLive)
		}
	})
}

// Relist is called at the start, before any event is handled, and then
// every RelistEvery; one that fails is called again after a back-off,
// well before the period.
func TestRelist(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		var mu sync.Mutex
		var log []string
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			log = append(log, s)
		}
		count := func(s string) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, x := range log {
				if x == s {
					n++
				}
			}
			return n
		}
		e.write(2) // before the start: the re-list's
		started := make(chan struct{})
		r := feed.New(feed.Options{Store: e.store, Name: "t", Kinds: regions, RelistEvery: 50 * time.Millisecond,
			Relist: func(ctx context.Context) error {
				if count("relist") == 0 {
					<-started // events written now wait for the re-list
				}
				note("relist")
				return nil
			},
			Handle: func(ctx context.Context, evs []eim.Event) error {
				for range evs {
					note("event")
				}
				return nil
			}})
		e.start(r)
		waitFor(t, "the runner to start", r.Live) // its position known, the re-list waiting
		e.write(1)
		close(started)
		waitFor(t, "three re-lists", func() bool { return count("relist") >= 3 })
		mu.Lock()
		got := slices.Clone(log)
		mu.Unlock()
		if got[0] != "relist" || count("event") != 1 {
			t.Fatalf("calls %v: want the re-list first, then the one event written after the start", got)
		}

		// A failing re-list is retried after MinWait, not RelistEvery.
		var calls atomic.Int64
		r2 := feed.New(feed.Options{Store: e.store, Name: "t2", RelistEvery: time.Hour, MinWait: 5 * time.Millisecond, MaxWait: 10 * time.Millisecond,
			Relist: func(ctx context.Context) error {
				if calls.Add(1) < 4 {
					return eim.Errorf(eim.EUNAVAILABLE, "away")
				}
				return nil
			}})
		e.start(r2)
		waitFor(t, "the re-list to succeed", func() bool { return calls.Load() >= 4 })
		time.Sleep(50 * time.Millisecond)
		if n := calls.Load(); n != 4 {
			t.Fatalf("%d re-lists, want 4 (three failures, then the hour)", n)
		}
	})
}

// A panic in a handler is logged with its stack and does not end the
// runner: the batch is handled again; a panic in Relist is retried too.
func TestPanicSurvived(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		var logs logBuffer
		var c collector
		var handlePanics, relistPanics atomic.Int64
		r := feed.New(feed.Options{Store: e.store, Name: "t", Kinds: regions, Logger: logs.logger(),
			MinWait: 5 * time.Millisecond, MaxWait: 20 * time.Millisecond,
			Relist: func(ctx context.Context) error {
				if n := relistPanics.Add(1); n == 1 {
					var none []int
					return fmt.Errorf("unreachable: %d", none[n]) // a runtime error: a real panic
				}
				return nil
			},
			Handle: func(ctx context.Context, evs []eim.Event) error {
				if handlePanics.Add(1) == 1 {
					panic("handler bug")
				}
				return c.handle(ctx, evs)
			}})
		e.start(r)
		waitFor(t, "the runner to start", r.Live)
		want := e.write(3)
		waitFor(t, "every event", func() bool { return len(c.revisions()) >= 3 })
		if got := c.revisions(); !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v", got, want)
		}
		waitFor(t, "the re-list retried", func() bool { return relistPanics.Load() >= 2 })
		out := logs.String()
		for _, s := range []string{"panic in handle", "handler bug", "panic in re-list", "index out of range", "feed_test.go"} {
			if !strings.Contains(out, s) {
				t.Errorf("log lacks %q:\n%s", s, out)
			}
		}
	})
}

// A cache's runner starts each run at the store's current revision,
// calling Reset first, and is Live only while the feed is followed;
// OnLive hears each change of Live.
func TestCache(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		st := &faultyStore{Store: e.store}
		var resets, losts atomic.Int64
		var c collector
		var failNext atomic.Bool
		r := feed.New(feed.Options{Store: st, Name: "cache", Kinds: regions, MinWait: 5 * time.Millisecond, MaxWait: 20 * time.Millisecond,
			Reset: func() { resets.Add(1) },
			OnLive: func(live bool) {
				if live {
					return
				}
				if r := resets.Load(); losts.Add(1) != r {
					t.Errorf("OnLive(false) called %d times for %d resets", losts.Load(), r)
				}
			},
			Handle: func(ctx context.Context, evs []eim.Event) error {
				if failNext.Swap(false) {
					return errors.New("lost the feed")
				}
				return c.handle(ctx, evs)
			}})
		if r.Live() {
			t.Fatal("Live before Run")
		}
		stop := e.start(r)
		waitFor(t, "the cache to be live", r.Live)
		if resets.Load() != 1 {
			t.Fatalf("%d resets at the start, want 1", resets.Load())
		}
		e.write(1)
		waitFor(t, "an event", func() bool { return len(c.revisions()) == 1 })

		// The feed fails, and the store is away for a while.
		st.revisionFails.Store(3)
		failNext.Store(true)
		skipped := e.write(1)
		waitFor(t, "the restart", func() bool { return resets.Load() == 2 && r.Live() })
		if losts.Load() != 1 {
			t.Fatalf("%d OnLive(false) calls after one failure, want 1", losts.Load())
		}
		after := e.write(1)
		waitFor(t, "the next event", func() bool { return c.has(after[0]) })
		if c.has(skipped[0]) {
			t.Fatalf("the cache was given event %d of before its restart (it starts afresh)", skipped[0])
		}
		stop()
		if r.Live() || losts.Load() != 2 {
			t.Fatalf("after Run: Live %v, %d OnLive(false) calls, want false, 2", r.Live(), losts.Load())
		}
	})
}

// After failures in a row the runner waits longer each time, doubling
// from MinWait up to MaxWait; it never gives up.
func TestBackoff(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		st := &faultyStore{Store: e.store}
		st.revisionFails.Store(6)
		min, max := 20*time.Millisecond, 80*time.Millisecond
		var c collector
		r := feed.New(feed.Options{Store: st, Name: "t", Kinds: regions, Handle: c.handle, MinWait: min, MaxWait: max})
		e.start(r)
		waitFor(t, "the runner to start", r.Live)
		st.mu.Lock()
		calls := slices.Clone(st.revisions)
		st.mu.Unlock()
		if len(calls) != 7 {
			t.Fatalf("%d Revision calls, want 7 (6 failures, then one that answers)", len(calls))
		}
		want := min
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-1]); gap < want {
				t.Errorf("pause %d: %s, want at least %s", i, gap, want)
			}
			want = min2(2*want, max)
		}
		w := e.write(1)
		waitFor(t, "an event after the failures", func() bool { return c.has(w[0]) })
	})
}

func min2(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// Events that wait while a batch is handled are handled together, up to
// MaxBatch at a time.
func TestBatches(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		release := make(chan struct{})
		var c collector
		var first atomic.Bool
		r := feed.New(feed.Options{Store: e.store, Name: "t", Kinds: regions, MaxBatch: 10,
			Handle: func(ctx context.Context, evs []eim.Event) error {
				if !first.Swap(true) {
					<-release
				}
				return c.handle(ctx, evs)
			}})
		e.start(r)
		waitFor(t, "the runner to start", r.Live)
		want := e.write(1)
		waitFor(t, "the first batch to be taken", first.Load)
		want = append(want, e.write(35)...)
		time.Sleep(50 * time.Millisecond) // the watcher takes the new events (it waits on the batches)
		close(release)
		waitFor(t, "every event", func() bool { return len(c.revisions()) >= len(want) })
		if got := c.revisions(); !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v", got, want)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		big := 0
		for _, b := range c.batches {
			if len(b) > 10 {
				t.Fatalf("a batch of %d events, want at most 10", len(b))
			}
			big = max(big, len(b))
		}
		if big < 2 {
			t.Fatalf("batches %d, all of one event: waiting events were not taken together", len(c.batches))
		}
	})
}

func TestRunOnce(t *testing.T) {
	e := newEnv(t, t.TempDir()+"/eim.db")
	r := feed.New(feed.Options{Store: e.store, Name: "t", Relist: func(context.Context) error { return nil }})
	e.start(r)
	waitFor(t, "the runner to start", r.Live)
	if err := r.Run(e.ctx); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Run: %v, want an error", err)
	}
}

// gauge returns the value of family name's series of the consumer in
// reg (a counter's too); -1 when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name, consumer string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if len(m.Label) == 1 && m.Label[0].GetValue() == consumer {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

// TestMetrics: a runner's series, labelled with its name: live while it
// follows the feed, the events it handled, its lag back at 0 once nothing
// waits; a second runner of the same name (a loop started again) shares
// them.
func TestMetrics(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		reg := prometheus.NewRegistry()
		var c collector
		r := feed.New(feed.Options{Store: e.store, Name: "view", Kinds: regions, Handle: c.handle, Metrics: reg})
		stop := e.start(r)
		waitFor(t, "the runner live", func() bool { return gauge(t, reg, "eim_feed_live", "view") == 1 })
		revs := e.write(5)
		waitFor(t, "the events handled", func() bool { return c.has(revs[4]) })
		waitFor(t, "5 events counted and no lag", func() bool {
			return gauge(t, reg, "eim_feed_events_total", "view") == 5 && gauge(t, reg, "eim_feed_lag_seconds", "view") == 0
		})
		stop()
		if got := gauge(t, reg, "eim_feed_live", "view"); got != 0 {
			t.Errorf("eim_feed_live after the stop: got %v, want 0", got)
		}
		r2 := feed.New(feed.Options{Store: e.store, Name: "view", Kinds: regions, Handle: c.handle, Metrics: reg})
		defer e.start(r2)()
		waitFor(t, "the second runner live", r2.Live) // it starts at the revision of then
		e.write(2)
		waitFor(t, "7 events counted", func() bool { return gauge(t, reg, "eim_feed_events_total", "view") == 7 })
	})
}
