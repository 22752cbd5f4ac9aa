package feed_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/internal/syncbuf"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "feed tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is one test's store on one engine, and a project to write in.
type env struct {
	t       *testing.T
	ctx     context.Context
	dsn     string
	store   *sqlstore.Store
	project string
	n       atomic.Int64
}

// engines runs f on SQLite and, when EIM_TEST_POSTGRES_URL is set, on a
// fresh PostgreSQL database.
func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, filepath.Join(t.TempDir(), "eim.db"))) })
	t.Run("postgres", func(t *testing.T) { f(t, newEnv(t, storetest.PostgresURL(t))) })
}

func newEnv(t *testing.T, dsn string) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), dsn: dsn, project: "p"}
	e.store = e.open()
	if err := e.store.CreateProject(e.ctx, &eim.Project{Name: e.project, ID: "2a9d3c9e-8c4f-4d5e-9a6b-000000000001"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// open opens another Store on the env's database (another process's).
func (e *env) open() *sqlstore.Store {
	e.t.Helper()
	st, err := sqlstore.Open(context.Background(), e.dsn, sqlstore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// write creates n regions, one transaction each, and returns the
// revisions of their events.
func (e *env) write(n int) []int64 {
	e.t.Helper()
	return e.writeTo(e.store, n)
}

func (e *env) writeTo(st eim.Store, n int) []int64 {
	e.t.Helper()
	var revs []int64
	for range n {
		err := st.Update(e.ctx, e.project, func(tx eim.Tx) error {
			return tx.Create(e.ctx, &eim.Region{Name: fmt.Sprintf("r%d", e.n.Add(1))})
		})
		if err != nil {
			e.t.Fatal(err)
		}
		rev, err := st.Revision(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	return revs
}

// start runs r until the test ends, and fails the test if Run returns
// early or with an error.
func (e *env) start(r *feed.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			select {
			case err := <-done:
				if e.ctx.Err() == nil { // not the test's end
					e.t.Errorf("Run returned before it was stopped: %v", err)
				}
				cancel()
				return
			default:
			}
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// collector records what a runner handled.
type collector struct {
	mu      sync.Mutex
	batches [][]eim.Event
}

func (c *collector) handle(_ context.Context, evs []eim.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, slices.Clone(evs))
	return nil
}

// revisions returns the revisions handled, in order.
func (c *collector) revisions() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int64
	for _, b := range c.batches {
		for _, ev := range b {
			out = append(out, ev.Revision)
		}
	}
	return out
}

func (c *collector) has(rev int64) bool { return slices.Contains(c.revisions(), rev) }

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// faultyStore injects failures into a real store: failing Revision
// calls, and watches cut after a number of events, as when the database
// goes away.
type faultyStore struct {
	eim.Store
	// revisionFails is how many of the next Revision calls fail.
	revisionFails atomic.Int64
	// cutAfter, when positive, ends every watch with EUNAVAILABLE after
	// that many events.
	cutAfter atomic.Int64

	mu        sync.Mutex
	revisions []time.Time // when Revision was called
	watches   []int64     // the revision each watch started after
}

var errAway = eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")

func (s *faultyStore) Revision(ctx context.Context) (int64, error) {
	s.mu.Lock()
	s.revisions = append(s.revisions, time.Now())
	s.mu.Unlock()
	if s.revisionFails.Add(-1) >= 0 {
		return 0, errAway
	}
	s.revisionFails.Store(0)
	return s.Store.Revision(ctx)
}

func (s *faultyStore) Watch(ctx context.Context, after int64, kinds ...eim.Kind) iter.Seq2[eim.Event, error] {
	s.mu.Lock()
	s.watches = append(s.watches, after)
	s.mu.Unlock()
	cut := s.cutAfter.Load()
	return func(yield func(eim.Event, error) bool) {
		n := int64(0)
		for ev, err := range s.Store.Watch(ctx, after, kinds...) {
			if err == nil && cut > 0 && n == cut {
				yield(eim.Event{}, errAway)
				return
			}
			n++
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

func (s *faultyStore) watchStarts() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.watches)
}

// logBuffer is a logger's output, safe for concurrent use.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
