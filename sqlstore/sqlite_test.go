package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeFleets()
	// Watchers, listeners and pools must all be gone once every store is
	// closed.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func openSQLite(t testing.TB) *sqlstore.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "eim.db"))
}

// openStore opens dsn and closes the store when t ends.
func openStore(t testing.TB, dsn string) *sqlstore.Store {
	t.Helper()
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

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eim.Store { return openSQLite(t) })
}

func TestSQLiteMemory(t *testing.T) {
	s, err := sqlstore.Open(t.Context(), ":memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), "p", func(tx eim.Tx) error { return tx.Create(t.Context(), &eim.Host{Name: "h"}) }); err != nil {
		t.Fatal(err)
	}
	// The project's creation and the host's.
	if rev, err := s.Revision(t.Context()); err != nil || rev != 2 {
		t.Fatalf("Revision: got %d, %v; want 2", rev, err)
	}
}

// Reopening a store keeps its data and does not re-run migrations.
func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eim.db")
	for i := range 2 {
		s, err := sqlstore.Open(t.Context(), "sqlite:"+path, sqlstore.Options{})
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		if i == 0 {
			if err := s.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "x"}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.FindProject(t.Context(), "p"); err != nil {
			t.Fatalf("after reopen: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// SQLite has one writer, in one process; a statement is a function call,
// so creates are not grouped.
func TestSQLiteCapabilities(t *testing.T) {
	if got := openSQLite(t).Capabilities(); got != (eim.Capabilities{}) {
		t.Fatalf("got %+v, want none", got)
	}
}
