package coord_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "coord tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// engines runs f on SQLite and, when configured, PostgreSQL. open opens
// another store (another process) on the same database.
func engines(t *testing.T, f func(t *testing.T, open func() eim.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		dsn := filepath.Join(t.TempDir(), "eim.db")
		// SQLite serves one process: every "process" shares its store.
		s := openStore(t, dsn)
		f(t, func() eim.Store { return s })
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresURL(t)
		f(t, func() eim.Store { return openStore(t, dsn) })
	})
}

func openStore(t *testing.T, dsn string) eim.Store {
	t.Helper()
	s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flakyStore fails every call with "unavailable" while down is set, as a
// store whose database went away does: a process that can no longer
// renew its leases (or that died, as far as the others can tell).
type flakyStore struct {
	eim.Store
	down atomic.Bool
}

var errDown = eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")

func (s *flakyStore) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, errDown
	}
	return s.Store.Claim(ctx, name, holder, ttl)
}

func (s *flakyStore) Release(ctx context.Context, name, holder string) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Release(ctx, name, holder)
}

func (s *flakyStore) Announce(ctx context.Context, m eim.Member, ttl time.Duration) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Announce(ctx, m, ttl)
}

func (s *flakyStore) Leave(ctx context.Context, id string) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Leave(ctx, id)
}

// work is a lease's work shared by several holders: it records who runs
// it and fails the test if two run it at once.
type work struct {
	t       *testing.T
	mu      sync.Mutex
	running string
	starts  map[string]int
	started chan string
}

func newWork(t *testing.T) *work {
	return &work{t: t, starts: map[string]int{}, started: make(chan string, 100)}
}

// fn returns the work as holder runs it.
func (w *work) fn(holder string) func(context.Context) error {
	return func(ctx context.Context) error {
		w.mu.Lock()
		if w.running != "" {
			w.t.Errorf("%s started the work while %s runs it", holder, w.running)
		}
		w.running = holder
		w.starts[holder]++
		w.mu.Unlock()
		w.started <- holder
		<-ctx.Done()
		w.mu.Lock()
		w.running = ""
		w.mu.Unlock()
		return nil
	}
}

// next waits for the next start of the work and returns its holder.
func (w *work) next(within time.Duration) (string, time.Duration) {
	w.t.Helper()
	start := time.Now()
	select {
	case h := <-w.started:
		return h, time.Since(start)
	case <-time.After(within):
		w.t.Fatalf("nobody started the work within %v", within)
		return "", 0
	}
}

// runner runs a Singleton and waits for it when stopped.
type runner struct {
	cancel context.CancelFunc
	done   chan error
}

func startSingleton(t *testing.T, o coord.Options, name string, fn func(context.Context) error) *runner {
	ctx, cancel := context.WithCancel(t.Context())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- coord.Singleton(ctx, o, name, fn) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runner) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Singleton: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Singleton did not return within 10 s of its context's end")
	}
}

const ttl = 600 * time.Millisecond

// Two holders of one lease: the work runs in exactly one at a time; when
// its holder stops, the other takes it over at once (the lease is
// released), and when its holder dies (stops renewing without releasing)
// the other takes over within one TTL and a renewal tick.
func TestSingletonOneAtATime(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		w := newWork(t)
		sa := &flakyStore{Store: open()}
		sb := &flakyStore{Store: open()}
		a := startSingleton(t, coord.Options{Store: sa, Holder: "a", TTL: ttl}, "job", w.fn("a"))
		first, _ := w.next(10 * time.Second)
		b := startSingleton(t, coord.Options{Store: sb, Holder: "b", TTL: ttl}, "job", w.fn("b"))
		rs := map[string]*runner{"a": a, "b": b}
		ss := map[string]*flakyStore{"a": sa, "b": sb}
		other := map[string]string{"a": "b", "b": "a"}

		// Held for several TTLs: not run twice, not handed over.
		time.Sleep(3 * ttl)
		w.mu.Lock()
		starts := w.starts[first] + w.starts[other[first]]
		w.mu.Unlock()
		if starts != 1 {
			t.Fatalf("the work started %d times while %s held the lease, want 1", starts, first)
		}

		// Stopped: the other takes over at once.
		rs[first].stop(t)
		h, took := w.next(10 * time.Second)
		if h != other[first] || took > ttl {
			t.Fatalf("after %s stopped: %s took over in %v, want %s within %v", first, h, took, other[first], ttl)
		}

		// Dies: its store calls fail from now on, it cannot renew (nor
		// release); the survivor, started again, takes over within a TTL
		// and a tick.
		second := h
		rs[first] = startSingleton(t, coord.Options{Store: ss[first], Holder: first, TTL: ttl}, "job", w.fn(first))
		ss[second].down.Store(true)
		h, took = w.next(10 * time.Second)
		if h != first || took > ttl+ttl/3+200*time.Millisecond {
			t.Fatalf("after %s died: %s took over in %v, want %s within %v", second, h, took, first, ttl+ttl/3)
		}
		// The dead one's Singleton neither ends nor fails; when its store
		// is back it waits for the lease.
		ss[second].down.Store(false)
		time.Sleep(2 * ttl)
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running != first {
			t.Fatalf("after the store came back: %q runs the work, want %s", running, first)
		}
	})
}

// Work that fails or panics is run again after a back-off while the lease
// is held; Held reports the lease.
func TestSingletonRerunsFailedWork(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		var runs atomic.Int32
		var held sync.Map
		o := coord.Options{Store: open(), Holder: "a", TTL: 300 * time.Millisecond,
			Held: func(name string, h bool) { held.Store(name, h) }}
		r := startSingleton(t, o, "flaky", func(ctx context.Context) error {
			switch runs.Add(1) {
			case 1:
				return errors.New("boom")
			case 2:
				panic("bang")
			case 3:
				return nil // returned early: run again too
			}
			<-ctx.Done()
			return ctx.Err()
		})
		waitFor(t, func() bool { return runs.Load() >= 4 })
		if h, _ := held.Load("flaky"); h != true {
			t.Fatalf("Held(flaky): got %v, want true", h)
		}
		r.stop(t)
		if h, _ := held.Load("flaky"); h != false {
			t.Fatalf("Held(flaky) after the stop: got %v, want false", h)
		}
		if n := runs.Load(); n != 4 {
			t.Fatalf("runs: got %d, want 4", n)
		}
	})
}

// A store away at the start is waited for.
func TestSingletonWaitsForTheStore(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		st := &flakyStore{Store: open()}
		st.down.Store(true)
		w := newWork(t)
		startSingleton(t, coord.Options{Store: st, Holder: "a", TTL: 300 * time.Millisecond}, "job", w.fn("a"))
		time.Sleep(500 * time.Millisecond)
		select {
		case h := <-w.started:
			t.Fatalf("%s started the work with the store away", h)
		default:
		}
		st.down.Store(false)
		w.next(10 * time.Second)
	})
}

func TestOptionsChecked(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "eim.db"))
	fn := func(context.Context) error { return nil }
	for _, tc := range []struct {
		o    coord.Options
		name string
	}{
		{coord.Options{Holder: "a"}, "x"},
		{coord.Options{Store: st}, "x"},
		{coord.Options{Store: st, Holder: "a"}, ""},
		{coord.Options{Store: st, Holder: "a", TTL: time.Microsecond}, "x"},
	} {
		if err := coord.Singleton(t.Context(), tc.o, tc.name, fn); eim.ErrorCode(err) != eim.EINVALID {
			t.Errorf("Singleton(%+v, %q): got %v, want code %s", tc.o, tc.name, err, eim.EINVALID)
		}
	}
	if err := coord.Announce(t.Context(), coord.Options{Store: st}, nil); eim.ErrorCode(err) != eim.EINVALID {
		t.Errorf("Announce without a holder: got %v, want code %s", err, eim.EINVALID)
	}
}

// Announced processes are members until they stop (and leave) or die
// (and expire); Members selects those running a module.
func TestAnnounce(t *testing.T) {
	engines(t, func(t *testing.T, open func() eim.Store) {
		st := open()
		const ttl = 400 * time.Millisecond
		announce := func(o coord.Options, modules ...string) context.CancelFunc {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- coord.Announce(ctx, o, modules) }()
			var once sync.Once
			stop := func() {
				once.Do(func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("Announce: %v", err)
					}
				})
			}
			t.Cleanup(stop)
			return stop
		}
		dying := &flakyStore{Store: open()}
		stopA := announce(coord.Options{Store: open(), Holder: "a", TTL: ttl}, "api", "host")
		announce(coord.Options{Store: open(), Holder: "b", TTL: ttl}, "host")
		announce(coord.Options{Store: dying, Holder: "c", TTL: ttl}, "host", "os")
		members := func(module string) []string {
			t.Helper()
			ids, err := coord.Members(t.Context(), st, module)
			if err != nil {
				t.Fatalf("Members(%s): %v", module, err)
			}
			return ids
		}
		waitFor(t, func() bool { return len(members("host")) == 3 })
		if got, want := members("api"), []string{"a"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("Members(api): got %v, want %v", got, want)
		}
		// Renewed past their TTL.
		time.Sleep(2 * ttl)
		if got, want := members("host"), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("Members(host) after two TTLs: got %v, want %v", got, want)
		}
		stopA()
		if got, want := members("host"), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("Members(host) after a left: got %v, want %v", got, want)
		}
		dying.down.Store(true)
		start := time.Now()
		waitFor(t, func() bool { return len(members("host")) == 1 })
		if took := time.Since(start); took > ttl+200*time.Millisecond {
			t.Fatalf("a dead member was listed for %v, want at most its TTL %v", took, ttl)
		}
		if got, want := members("os"), []string(nil); !reflect.DeepEqual(got, want) {
			t.Fatalf("Members(os): got %v, want %v", got, want)
		}
	})
}

// waitFor polls cond until it holds, for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
