package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func openPostgres(t testing.TB) *sqlstore.Store {
	t.Helper()
	dsn := sqlstore.FreshPostgresURL(t)
	s, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eim.Store { return openPostgres(t) })
}

// Two processes starting at once on an empty database: the advisory lock
// lets one migrate and the other find the work done.
func TestPostgresConcurrentOpen(t *testing.T) {
	dsn := sqlstore.FreshPostgresURL(t)
	errs := make(chan error, 2)
	stores := make(chan *sqlstore.Store, 2)
	for range 2 {
		go func() {
			s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
			errs <- err
			stores <- s
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Open: %v", err)
		}
		if s := <-stores; s != nil {
			s.Close()
		}
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
		for e, err := range watcher.Watch(ctx, 0) {
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
