package hostview_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "hostview tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// store wraps a real store: it counts the transactions read, can make
// the database go away (storetest.Away), and can hold a read until
// released.
type store struct {
	*storetest.Away
	views atomic.Int64
	// hold, when set, is closed by the test to let the next read go on;
	// reading is closed when that read has read.
	mu      sync.Mutex
	hold    chan struct{}
	reading chan struct{}
}

func (s *store) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	s.views.Add(1)
	err := s.Away.View(ctx, project, fn)
	s.mu.Lock()
	hold, reading := s.hold, s.reading
	s.hold, s.reading = nil, nil
	s.mu.Unlock()
	if hold != nil {
		close(reading)
		<-hold
	}
	return err
}

// holdNextRead makes the next read wait until the returned release is
// called; reading is closed once it has read.
func (s *store) holdNextRead() (reading <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold := make(chan struct{})
	s.hold, s.reading = hold, make(chan struct{})
	return s.reading, func() { close(hold) }
}

// lines is a log destination that tests can search.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (e *env) view() *hostview.View { return e.newView(e.st) }
func (e *env) newView(st eim.Store) *hostview.View {
	return hostview.New(hostview.Options{Store: st, Now: e.clock.Now})
}

// env is a store on one engine with a project of hosts.
type env struct {
	t       *testing.T
	ctx     context.Context
	dsn     string
	real    *sqlstore.Store
	st      *store
	clock   *clock
	project string
	hosts   []string
}

func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, filepath.Join(t.TempDir(), "eim.db"))) })
	t.Run("postgres", func(t *testing.T) { f(t, newEnv(t, storetest.PostgresURL(t))) })
}

func newEnv(t *testing.T, dsn string) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), dsn: dsn, clock: newClock(), project: "p"}
	e.real = e.open()
	e.st = &store{Away: &storetest.Away{Store: e.real}}
	if err := e.real.CreateProject(e.ctx, &eim.Project{Name: e.project, ID: "5b0c8f3e-1d2a-4c6b-9e7f-000000000001"}); err != nil {
		t.Fatal(err)
	}
	if err := e.real.CreateProject(e.ctx, &eim.Project{Name: "other", ID: "5b0c8f3e-1d2a-4c6b-9e7f-000000000002"}); err != nil {
		t.Fatal(err)
	}
	err := e.real.Update(e.ctx, e.project, func(tx eim.Tx) error {
		for i := range 5 {
			h := &eim.Host{Name: fmt.Sprintf("h%d", i), SiteID: "", HostStatus: "Running", NodeSecretHash: "hash", NodeCredGen: 1, DesiredState: eim.HostStateOnboarded}
			if err := tx.Create(e.ctx, h); err != nil {
				return err
			}
			e.hosts = append(e.hosts, h.ResourceID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// open opens a Store on the env's database (another process's when it is
// not the env's own).
func (e *env) open() *sqlstore.Store {
	e.t.Helper()
	st, err := sqlstore.Open(context.Background(), e.dsn, sqlstore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// run runs v until the test ends.
func (e *env) run(v *hostview.View) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	waitFor(e.t, "the view to be live", v.Live)
}

// edit changes a host through st.
func (e *env) edit(st eim.Store, id string, fn func(*eim.Host)) {
	e.t.Helper()
	err := st.Update(e.ctx, e.project, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		fn(r.(*eim.Host))
		return tx.Update(e.ctx, r)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) host(v *hostview.View, id string) *hostview.Host {
	e.t.Helper()
	h, err := v.Host(e.ctx, e.project, id)
	if err != nil {
		e.t.Fatalf("Host(%s): %v", id, err)
	}
	return h
}

// reads returns how many transactions fn read.
func (e *env) reads(fn func()) int64 {
	before := e.st.views.Load()
	fn()
	return e.st.views.Load() - before
}

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

// Once live, the view holds every host (read ahead in one scan) and
// answers from memory; before Run every call reads the store. A host is
// found only in its project.
func TestServesFromMemory(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		v := e.view()
		if n := e.reads(func() { e.host(v, e.hosts[0]); e.host(v, e.hosts[0]) }); n != 2 {
			t.Fatalf("before Run: %d reads for 2 calls, want 2", n)
		}
		e.run(v)
		waitFor(t, "the read ahead", func() bool {
			return e.reads(func() {
				for _, id := range e.hosts {
					e.host(v, id)
				}
			}) == 0
		})
		h := e.host(v, e.hosts[1])
		if h.ID() != e.hosts[1] || h.Project() != e.project || h.HostStatus() != "Running" || h.NodeSecretHash() != "hash" || h.NodeCredGen() != 1 ||
			h.Credentials() != (eim.NodeCredentials{HostID: h.ID(), Project: e.project, DesiredState: eim.HostStateOnboarded, SecretHash: "hash", Gen: 1}) {
			t.Fatalf("got %+v", h)
		}
		if _, err := v.Host(e.ctx, "other", e.hosts[1]); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("a host of another project: %v, want ENOTFOUND", err)
		}
		if _, err := v.Host(e.ctx, "", e.hosts[1]); err != nil {
			t.Fatalf("any project: %v", err)
		}
		if _, err := v.Host(e.ctx, e.project, "host-0000dead"); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("no such host: %v, want ENOTFOUND", err)
		}
	})
}

// A write of this process reaches the view before it returns, and tells
// the OnChange hooks; one of another process arrives through the feed.
// A memo does not outlive the facts it was kept on.
func TestChanges(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		v := e.view()
		var mu sync.Mutex
		var heard []string
		v.OnChange(func(_, id string, deleted bool) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, fmt.Sprintf("%s %v", id, deleted))
		})
		slot := v.NewSlot()
		e.run(v)
		id := e.hosts[0]
		before := e.host(v, id)
		before.SetMemo(slot, "computed")
		if got := e.host(v, id).Memo(slot); got != "computed" {
			t.Fatalf("memo %v, want it kept", got)
		}

		e.edit(e.real, id, func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted })
		h := e.host(v, id)
		if h.DesiredState() != eim.HostStateUntrusted || !h.Credentials().Revoked() {
			t.Fatalf("right after this process's write: %s, want UNTRUSTED", h.DesiredState())
		}
		if h.Memo(slot) != nil {
			t.Fatal("a memo outlived its host's change")
		}
		mu.Lock()
		if len(heard) == 0 || heard[0] != id+" false" {
			t.Errorf("hooks heard %v, want %s changed first", heard, id)
		}
		mu.Unlock()

		other := e.open()
		e.edit(other, e.hosts[1], func(h *eim.Host) { h.HostStatus = "No Connection" })
		waitFor(t, "another process's write", func() bool { return e.host(v, e.hosts[1]).HostStatus() == "No Connection" })

		if err := other.Update(e.ctx, e.project, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindHost, e.hosts[2]) }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the delete", func() bool {
			_, err := v.Host(e.ctx, e.project, e.hosts[2])
			return eim.ErrorCode(err) == eim.ENOTFOUND
		})
		mu.Lock()
		defer mu.Unlock()
		found := false
		for _, s := range heard {
			found = found || s == e.hosts[2]+" true"
		}
		if !found {
			t.Errorf("hooks heard %v, want %s deleted", heard, e.hosts[2])
		}
	})
}

// A read that raced a change is answered but not kept: the next call
// reads again, and sees the change.
func TestReadRacingAChange(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		id := e.hosts[3]
		// Not in the read ahead: created after the view started.
		var logs lines
		v := hostview.New(hostview.Options{Store: e.st, Now: e.clock.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		e.run(v)
		// The read ahead done: the next read is the call's.
		waitFor(t, "the read ahead", func() bool { return logs.has("host view: read ahead") })
		err := e.real.Update(e.ctx, e.project, func(tx eim.Tx) error {
			h := &eim.Host{Name: "late", HostStatus: "Running"}
			if err := tx.Create(e.ctx, h); err != nil {
				return err
			}
			id = h.ResourceID
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reading, release := e.st.holdNextRead()
		got := make(chan *hostview.Host, 1)
		go func() {
			h, err := v.Host(e.ctx, e.project, id)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		<-reading
		e.edit(e.real, id, func(h *eim.Host) { h.HostStatus = "Rebooting" })
		release()
		if h := <-got; h.HostStatus() != "Running" {
			t.Fatalf("the racing read answered %q, want what it read", h.HostStatus())
		}
		if h := e.host(v, id); h.HostStatus() != "Rebooting" {
			t.Fatalf("after the race: %q, want the change (the racing read not kept)", h.HostStatus())
		}
	})
}

// While the database is away the view serves nothing from memory; a call
// whose read fails may use what the view held when the feed was lost,
// for maxAge, unless this process changed the host meanwhile. When the
// database is back, the view resumes after the last event it handled:
// unchanged hosts are served from memory at once, changed ones read.
func TestStoreAway(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		v := e.view()
		e.run(v)
		waitFor(t, "the read ahead", func() bool { return e.reads(func() { e.host(v, e.hosts[0]) }) == 0 })

		e.st.SetAway(true)
		waitFor(t, "the view to see the outage", func() bool { return !v.Live() })
		if _, err := v.Host(e.ctx, e.project, e.hosts[0]); eim.ErrorCode(err) != eim.EUNAVAILABLE {
			t.Fatalf("while away: %v, want EUNAVAILABLE", err)
		}
		if h, ok := v.Stale(e.hosts[0], time.Minute); !ok || h.ID() != e.hosts[0] {
			t.Fatalf("Stale: %v, %v, want the host held", h, ok)
		}
		// Revoked through this process (its own connection is fine).
		e.edit(e.real, e.hosts[1], func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted })
		if _, ok := v.Stale(e.hosts[1], time.Minute); ok {
			t.Fatal("Stale served a host this process changed")
		}
		// Changed by another process while this one's feed is away.
		other := e.open()
		e.edit(other, e.hosts[4], func(h *eim.Host) { h.HostStatus = "Error" })
		e.clock.Add(2 * time.Minute)
		if _, ok := v.Stale(e.hosts[0], time.Minute); ok {
			t.Fatal("Stale served past maxAge")
		}

		e.st.SetAway(false)
		waitFor(t, "the view to be live again", v.Live)
		if n := e.reads(func() { e.host(v, e.hosts[0]) }); n != 0 {
			t.Fatalf("an unchanged host after the outage: %d reads, want 0 (kept)", n)
		}
		if h := e.host(v, e.hosts[4]); h.HostStatus() != "Error" {
			t.Fatalf("a host changed during the outage: %q, want the change", h.HostStatus())
		}
		if _, ok := v.Stale(e.hosts[0], time.Hour); ok {
			t.Fatal("Stale served while live")
		}
	})
}

// tally is a projection that keeps the records it was told of, checking
// that each old is what it was told last.
type tally struct {
	t  *testing.T
	mu sync.Mutex
	m  map[string]*hostview.Host
}

func (p *tally) put(old, h *hostview.Host) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := ""
	if old != nil {
		id = old.ID()
		if p.m[id] != old {
			p.t.Errorf("told of %s's old record %p, want the last one told %p", id, old, p.m[id])
		}
		delete(p.m, id)
	}
	if h != nil {
		p.m[h.ID()] = h
	}
}

func (p *tally) get(id string) *hostview.Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[id]
}

// A projection is told of every host read ahead, with its instance, and
// of every change after, of the host or of its instance, by this process
// or another; a deleted host leaves it.
func TestProjection(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		osr := &eim.OS{Name: "emt", ProfileName: "emt", ImageID: "1.0", OsType: "OS_TYPE_IMMUTABLE",
			ImageURL: "https://images.example/emt.raw.gz", Sha256: strings.Repeat("ab", 32), SecurityFeature: "SECURITY_FEATURE_NONE", Architecture: "x86_64"}
		in := &eim.Instance{Name: "i0", Kind: eim.InstanceKindMetal, HostID: e.hosts[0], UpdateStatusIndicator: eim.StatusIdle}
		err := e.real.Update(e.ctx, e.project, func(tx eim.Tx) error {
			if err := tx.Create(e.ctx, osr); err != nil {
				return err
			}
			in.OSID = osr.ResourceID
			return tx.Create(e.ctx, in)
		})
		if err != nil {
			t.Fatal(err)
		}
		v := e.view()
		p := &tally{t: t, m: map[string]*hostview.Host{}}
		v.Project(p.put)
		e.run(v)
		waitFor(t, "the read ahead", v.Primed)
		for _, id := range e.hosts {
			if p.get(id) == nil {
				t.Fatalf("host %s not told", id)
			}
		}
		h := p.get(e.hosts[0])
		if h.Name() != "h0" || h.Instance() == nil || h.Instance().ID() != in.ResourceID || h.Instance().OSID() != osr.ResourceID || h.Instance().UpdateStatusIndicator() != eim.StatusIdle {
			t.Fatalf("got %+v, instance %+v; want h0 with its instance", h, h.Instance())
		}
		if p.get(e.hosts[1]).Instance() != nil {
			t.Fatal("a host without an instance has one")
		}

		other := e.open()
		e.edit(other, e.hosts[1], func(h *eim.Host) { h.Name = "renamed" })
		waitFor(t, "another process's change", func() bool { return p.get(e.hosts[1]).Name() == "renamed" })
		e.edit(e.real, e.hosts[0], func(h *eim.Host) { h.HostStatus = "No Connection" })
		waitFor(t, "this process's change", func() bool { return p.get(e.hosts[0]).HostStatus() == "No Connection" })
		if got := p.get(e.hosts[0]); got.Instance() == nil || got.Instance().ID() != in.ResourceID {
			t.Fatalf("the host's change lost its instance: %+v", got.Instance())
		}
		err = other.Update(e.ctx, e.project, func(tx eim.Tx) error {
			r, err := tx.Get(e.ctx, eim.KindInstance, in.ResourceID)
			if err != nil {
				return err
			}
			r.(*eim.Instance).UpdateStatusIndicator = eim.StatusInProgress
			return tx.Update(e.ctx, r)
		})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the instance's change", func() bool {
			in := p.get(e.hosts[0]).Instance()
			return in != nil && in.UpdateStatusIndicator() == eim.StatusInProgress
		})
		if err := other.Update(e.ctx, e.project, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindInstance, in.ResourceID) }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the instance's delete", func() bool { return p.get(e.hosts[0]).Instance() == nil })
		if err := other.Update(e.ctx, e.project, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindHost, e.hosts[2]) }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the host's delete", func() bool { return p.get(e.hosts[2]) == nil })
		// What the projection holds is what the view serves.
		if got := e.host(v, e.hosts[1]); got != p.get(e.hosts[1]) {
			t.Fatal("the view serves another record than its projection holds")
		}
	})
}

// With Evict and no projection the view reads no host ahead: a host is
// read at its first call and served from memory after, and one no call
// looks up is dropped, and read again at its next call.
func TestOnDemand(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		v := hostview.New(hostview.Options{Store: e.st, Now: e.clock.Now, Evict: 200 * time.Millisecond})
		e.run(v)
		if n := v.Len(); n != 0 {
			t.Fatalf("%d hosts held before any call, want 0", n)
		}
		if n := e.reads(func() { e.host(v, e.hosts[0]) }); n != 1 {
			t.Fatalf("the first call: %d reads, want 1", n)
		}
		if n := e.reads(func() { e.host(v, e.hosts[0]) }); n != 0 {
			t.Fatalf("the next call: %d reads, want 0", n)
		}
		if n := v.Len(); n != 1 {
			t.Fatalf("%d hosts held, want 1", n)
		}
		// A change reaches a held host as before.
		e.edit(e.open(), e.hosts[0], func(h *eim.Host) { h.HostStatus = "No Connection" })
		waitFor(t, "another process's write", func() bool { return e.host(v, e.hosts[0]).HostStatus() == "No Connection" })
		waitFor(t, "the idle host's eviction", func() bool { return v.Len() == 0 })
		if n := e.reads(func() { e.host(v, e.hosts[0]) }); n != 1 {
			t.Fatalf("a call after the eviction: %d reads, want 1", n)
		}
	})
}
