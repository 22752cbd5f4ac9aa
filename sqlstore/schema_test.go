package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim"
)

// testStores opens a fresh store per available engine.
func testStores(t *testing.T) map[string]*Store {
	t.Helper()
	out := map[string]*Store{}
	open := func(name, dsn string) {
		s, err := Open(context.Background(), dsn, Options{})
		if err != nil {
			t.Fatalf("Open %s: %v", name, err)
		}
		t.Cleanup(func() { s.Close() })
		out[name] = s
	}
	open("sqlite", filepath.Join(t.TempDir(), "eim.db"))
	if url := postgresURLIfSet(t); url != "" {
		open("postgres", url)
	}
	return out
}

// postgresURLIfSet returns a fresh database's URL, or "" without PostgreSQL.
func postgresURLIfSet(t *testing.T) string {
	if os.Getenv("EIM_TEST_POSTGRES_URL") == "" {
		return ""
	}
	return postgresURL(t)
}

// Every stored field of every kind has a column in both dialects: this
// catches drift when kinds or fields are added without a migration.
func TestEveryFieldHasAColumn(t *testing.T) {
	for name, s := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, k := range eim.Kinds() {
				sch := eim.SchemaOf(k)
				cols := tableColumns(t, s, sch.Table)
				if len(cols) == 0 {
					t.Errorf("%s: table %s is missing", k, sch.Table)
					continue
				}
				for _, f := range sch.Fields {
					if f.Stored() && !cols[f.Column] {
						t.Errorf("%s.%s: column %s.%s is missing", k, f.Name, sch.Table, f.Column)
					}
				}
			}
		})
	}
}

func tableColumns(t *testing.T, s *Store, table string) map[string]bool {
	q := "SELECT name FROM pragma_table_info(?)"
	if s.d.pg {
		q = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1"
	}
	rows, err := s.rdb.Query(q, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[c] = true
	}
	return out
}

// The order in which DeleteProject empties tables puts every referrer
// before what it refers to.
func TestDeletionOrder(t *testing.T) {
	pos := map[eim.Kind]int{}
	for i, k := range deletionOrder() {
		pos[k] = i
	}
	if len(pos) != len(eim.Kinds()) {
		t.Fatalf("deletion order has %d kinds, want %d", len(pos), len(eim.Kinds()))
	}
	for _, k := range eim.Kinds() {
		for _, f := range eim.SchemaOf(k).Fields {
			if f.Edge != nil && f.Edge.Kind != k && pos[k] > pos[f.Edge.Kind] {
				t.Errorf("%s (references %s) is deleted after it", k, f.Edge.Kind)
			}
		}
	}
}

func TestRebind(t *testing.T) {
	got := postgresDialect.rebind("a = ? AND b IN (?, ?)")
	if want := "a = $1 AND b IN ($2, $3)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// The SQLite connections run with the settings the store depends on.
func TestSQLitePragmas(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, db := range []struct {
		name string
		pool interface {
			QueryRow(string, ...any) *sql.Row
		}
		queryOnly int
	}{{"write", s.db, 0}, {"read", s.rdb, 1}} {
		for _, p := range []struct {
			pragma string
			want   any
		}{
			{"journal_mode", "wal"},
			{"synchronous", "1"},
			{"foreign_keys", "1"},
			{"busy_timeout", "10000"},
			{"query_only", fmt.Sprint(db.queryOnly)},
		} {
			var got string
			if err := db.pool.QueryRow("PRAGMA " + p.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.want {
				t.Errorf("%s connection: PRAGMA %s: got %s, want %s", db.name, p.pragma, got, p.want)
			}
		}
	}
}
