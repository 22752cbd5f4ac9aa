package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func openPostgres(t testing.TB) *sqlstore.Store {
	t.Helper()
	return openStore(t, sqlstore.FreshPostgresURL(t))
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eim.Store { return openPostgres(t) })
}

// Replicas starting at once on an empty database (a Kubernetes install or
// rolling update): the advisory lock lets one migrate and the others wait and
// find the work done; every migration is recorded once.
func TestPostgresConcurrentOpen(t *testing.T) {
	dsn := sqlstore.FreshPostgresURL(t)
	const n = 8
	var g errgroup.Group
	stores := make([]*sqlstore.Store, n)
	for i := range n {
		g.Go(func() error {
			s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
			stores[i] = s
			return err
		})
	}
	err := g.Wait()
	for _, s := range stores {
		if s != nil {
			s.Close()
		}
	}
	if err != nil {
		t.Fatalf("Open of %d replicas at once: %v", n, err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, versions int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != versions {
		t.Errorf("schema_migrations: %d rows for %d versions, want each migration once", rows, versions)
	}
}

// A watcher is woken by another process's commits (LISTEN/NOTIFY), also
// after its listener connection was cut (reconnect, or the fallback poll).
func TestPostgresCrossProcessWatch(t *testing.T) {
	dsn := sqlstore.FreshPostgresURL(t)
	open := func() *sqlstore.Store {
		s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	watcher, writer := open(), open()
	if err := writer.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan eim.Event, 10)
	go func() {
		defer close(got)
		// Regions only: the project's creation is in the feed too.
		for e, err := range watcher.Watch(ctx, 0, eim.KindRegion) {
			if err != nil {
				return
			}
			got <- e
		}
	}()
	for i := range 2 {
		if i == 1 {
			// Cut every listener connection of this database.
			admin, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			_, err = admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'")
			admin.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		r := &eim.Region{}
		if err := writer.Update(t.Context(), "p", func(tx eim.Tx) error { return tx.Create(t.Context(), r) }); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-got:
			if e.ID != r.ResourceID {
				t.Fatalf("watched %+v, want the creation of %s", e, r.ResourceID)
			}
		case <-ctx.Done():
			t.Fatalf("round %d: no event before the deadline", i)
		}
	}
	cancel()
	for range got {
	}
}

// Writers in two processes at once (two stores on one database, each with
// its own sequencer): a watcher sees every event exactly once, in strictly
// increasing revision order, and a later read of the feed agrees with it.
func TestPostgresCrossProcessConcurrentFeed(t *testing.T) {
	dsn := sqlstore.FreshPostgresURL(t)
	var stores []*sqlstore.Store
	for range 2 {
		s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	if err := stores[0].CreateProject(t.Context(), &eim.Project{Name: "p", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	start, err := stores[0].Revision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Per store; every other transaction writes two events.
	const writers, perWriter = 8, 25
	const total = 2 * writers * (perWriter + perWriter/2)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var seen []eim.Event
	want := map[string]bool{}
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		for e, err := range stores[1].Watch(ctx, start, eim.KindRegion) {
			if err != nil {
				done <- err
				return
			}
			seen = append(seen, e)
			if len(seen) == total {
				done <- nil
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					var ids []string
					err := s.Update(t.Context(), "p", func(tx eim.Tx) error {
						ids = ids[:0]
						for j := range 1 + i%2 {
							r := &eim.Region{Name: fmt.Sprintf("s%d-w%d-%d-%d", si, w, i, j)}
							if err := tx.Create(t.Context(), r); err != nil {
								return err
							}
							ids = append(ids, r.ResourceID)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, id := range ids {
						want[id] = true
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := len(want); n != total {
		t.Fatalf("committed %d regions, want %d", n, total)
	}
	if err := <-done; err != nil {
		t.Fatalf("Watch: got %v after %d events, want all %d", err, len(seen), len(want))
	}
	got := map[string]bool{}
	for i, e := range seen {
		if i > 0 && e.Revision <= seen[i-1].Revision {
			t.Fatalf("event %d: revision %d after %d", i, e.Revision, seen[i-1].Revision)
		}
		if got[e.ID] || !want[e.ID] {
			t.Fatalf("event %+v: duplicate or unknown", e)
		}
		got[e.ID] = true
	}
	all, err := stores[0].Events(t.Context(), start, 10000, eim.KindRegion)
	if err != nil || !slices.Equal(all, seen) {
		t.Fatalf("Events after the writers: %d events, %v; want the %d watched", len(all), err, len(seen))
	}
}

// A store opens at most MaxConns pooled connections, half per pool, plus
// the listener; fewer than two are refused.
func TestPostgresMaxConns(t *testing.T) {
	dsn := sqlstore.FreshPostgresURL(t)
	if _, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{MaxConns: 1}); eim.ErrorCode(err) != eim.EINVALID {
		t.Fatalf("MaxConns 1: got %v, want EINVALID", err)
	}
	s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &eim.Project{Name: "conns", ID: "00000000-0000-4000-8000-00000000c0c0"}
	if err := s.CreateProject(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	// Sixteen concurrent scoped reads and unscoped revisions: each pool
	// queues its callers rather than opening more connections.
	var g errgroup.Group
	for i := range 16 {
		g.Go(func() error {
			if i%2 == 0 {
				_, err := s.Revision(t.Context())
				return err
			}
			return s.View(t.Context(), p.Name, func(tx eim.Tx) error {
				_, _, err := tx.List(t.Context(), eim.KindHost, eim.Query{Limit: 1})
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var n int
	u, _ := url.Parse(dsn)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	err = admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", strings.TrimPrefix(u.Path, "/")).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	// Four pooled and the listener.
	if n > 5 {
		t.Fatalf("%d connections to the database, want at most 5 (MaxConns 4 and the listener)", n)
	}
}

func TestPostgresCapabilities(t *testing.T) {
	want := eim.Capabilities{ConcurrentWriters: true, GroupedCreates: true, Replicas: true}
	if got := openPostgres(t).Capabilities(); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
