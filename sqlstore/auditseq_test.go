package sqlstore

import (
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// An audit log written under the global numbering (before migration 20)
// is numbered per project by the migration, in the order of its records,
// and the webhooks' cursors follow: each points at the same record as
// before, so no event is lost or queued twice.
func TestAuditSeqMigration(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testAuditSeqMigration(t, sqliteDialect, "sqlite", filepath.Join(t.TempDir(), "eim.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		testAuditSeqMigration(t, postgresDialect, "pgx", storetest.PostgresURL(t))
	})
}

func testAuditSeqMigration(t *testing.T, d *dialect, driver, dsn string) {
	ctx := t.Context()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 20 {
			break
		}
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)"), m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	// Records of a and b interleaved: global seq 1..7.
	log := []struct{ project, resource string }{{"a", "host-1"}, {"b", "host-9"}, {"b", "host-9"}, {"a", "host-2"}, {"a", "host-1"}, {"b", "host-9"}, {"a", "host-1"}}
	for i, r := range log {
		if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO audit_log (project, at, principal, action, kind, resource_id, changes) VALUES (?, ?, 'system', 'UPDATED', 'host', ?, '{}')"), r.project, i, r.resource); err != nil {
			t.Fatal(err)
		}
	}
	// Cursors at global seqs: a's host-1 at 5 (its 3rd record), host-2 at
	// 4; b's host-9 at 3; b's deletion marker (resource b, 1) stays.
	for _, c := range []struct {
		project, resource string
		seq               int64
	}{{"a", "host-1", 5}, {"a", "host-2", 4}, {"b", "host-9", 3}, {"b", "b", 1}} {
		if _, err := db.ExecContext(ctx, d.rebind("INSERT INTO webhook_cursors (project, resource_id, seq) VALUES (?, ?, ?)"), c.project, c.resource, c.seq); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	defer s.Close()
	for i, p := range []string{"a", "b"} {
		if err := s.CreateProject(ctx, &eim.Project{Name: p, ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{"a": {"5 project", "4 host-1", "3 host-1", "2 host-2", "1 host-1"}, "b": {"4 project", "3 host-9", "2 host-9", "1 host-9"}}
	for p, w := range want {
		recs, _, err := s.Audit(ctx, p, eim.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			if r.Kind == eim.KindProject {
				got = append(got, fmt.Sprintf("%d project", r.Seq))
			} else {
				got = append(got, fmt.Sprintf("%d %s", r.Seq, r.ResourceID))
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s's log after the migration: got %v, want %v", p, got, w)
		}
	}
	for _, c := range []struct {
		project string
		want    map[string]int64
	}{{"a", map[string]int64{"host-1": 3, "host-2": 2}}, {"b", map[string]int64{"host-9": 2, "b": 1}}} {
		got, err := s.AuditCursors(ctx, c.project, slices.Collect(maps.Keys(c.want)))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s's cursors after the migration: got %v, want %v", c.project, got, c.want)
		}
	}
}
