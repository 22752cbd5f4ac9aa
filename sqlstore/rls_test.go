package sqlstore

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// Row-level security blocks another project's rows even when a statement
// forgets the project predicate, whether the store logs in as a superuser
// (the usual test setup) or as a plain role that owns the tables.
func TestRowLevelSecurity(t *testing.T) {
	if os.Getenv("EIM_TEST_POSTGRES_URL") == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	t.Run("superuser", func(t *testing.T) { checkIsolation(t, postgresURL(t)) })
	t.Run("owner", func(t *testing.T) { checkIsolation(t, ownerURL(t)) })
}

// ownerURL returns the URL of a fresh database owned by a fresh login role
// that is not a superuser (CREATEROLE lets its migration grant itself
// eim_tenant); both are dropped at the end of the test.
func ownerURL(t *testing.T) string {
	base := os.Getenv("EIM_TEST_POSTGRES_URL")
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var b [6]byte
	rand.Read(b[:])
	name := "eim_owner_" + hex.EncodeToString(b[:])
	for _, q := range []string{"CREATE ROLE " + name + " LOGIN CREATEROLE", "CREATE DATABASE " + name + " OWNER " + name} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "DROP ROLE IF EXISTS " + name} {
			if _, err := admin.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	u.User = url.User(name)
	return u.String()
}

func checkIsolation(t *testing.T, dsn string) {
	s, err := Open(t.Context(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{"a", "b"} {
		if err := s.CreateProject(t.Context(), &eim.Project{Name: p, ID: p}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(t.Context(), p, func(tx eim.Tx) error { return tx.Create(t.Context(), &eim.Host{Name: "host of " + p}) }); err != nil {
			t.Fatal(err)
		}
	}
	// query runs q as it is in etx and returns its single text column.
	query := func(etx eim.Tx, q string, args ...any) ([]string, error) {
		rows, err := etx.(*tx).q.QueryContext(t.Context(), q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return nil, err
			}
			names = append(names, n)
		}
		return names, rows.Err()
	}
	raw := func(project, q string, args ...any) []string {
		t.Helper()
		var names []string
		err := s.Update(t.Context(), project, func(etx eim.Tx) error {
			var err error
			names, err = query(etx, q, args...)
			return err
		})
		if err != nil {
			t.Fatalf("%s in %q: %v", q, project, err)
		}
		return names
	}
	if got := raw("a", "SELECT name FROM hosts"); len(got) != 1 || got[0] != "host of a" {
		t.Fatalf("unfiltered SELECT in project a: got %v, want only a's host", got)
	}
	// The project's creation and its host's.
	if got := raw("a", "SELECT project FROM events"); len(got) != 2 || got[0] != "a" || got[1] != "a" {
		t.Fatalf("unfiltered events in project a: got %v, want only a's", got)
	}
	if got := raw("a", "UPDATE hosts SET name = 'x' RETURNING name"); len(got) != 1 {
		t.Fatalf("unfiltered UPDATE in project a touched %d rows, want 1", len(got))
	}
	if got := raw("", "SELECT name FROM hosts ORDER BY name"); len(got) != 2 || got[1] != "x" {
		t.Fatalf("unscoped SELECT: got %v, want both hosts, b's unchanged", got)
	}
	// The tenant policy is a plain index condition evaluated once, not a
	// per-row test of the role.
	plan := strings.Join(raw("a", "EXPLAIN SELECT count(*) FROM hosts"), "\n")
	if strings.Contains(plan, "CURRENT_USER") || !strings.Contains(plan, "current_setting") {
		t.Errorf("plan of a scoped COUNT(*): got\n%s\nwant the policy as project = current_setting(…) without CURRENT_USER", plan)
	}
	// Scoped reads run outside a transaction on tenant connections that
	// keep their project between uses: one connection switching back and
	// forth must show each project only its own rows, and the unscoped pool
	// must never inherit a scope.
	if s.tdb != nil {
		s.tdb.SetMaxOpenConns(1)
		for _, p := range []string{"a", "b", "a", "b", "b", "a"} {
			var names []string
			err := s.View(t.Context(), p, func(etx eim.Tx) error {
				var err error
				names, err = query(etx, "SELECT name FROM hosts ORDER BY name")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := "host of " + p
			if p == "a" {
				want = "x"
			}
			if len(names) != 1 || names[0] != want {
				t.Fatalf("scoped read in %q on a reused connection: got %v, want [%s]", p, names, want)
			}
			var all int
			if err := s.View(t.Context(), "", func(etx eim.Tx) error {
				return etx.(*tx).q.QueryRowContext(t.Context(), "SELECT count(*) FROM hosts").Scan(&all)
			}); err != nil {
				t.Fatal(err)
			}
			if all != 2 {
				t.Fatalf("unscoped read after a scoped one in %q: %d hosts, want 2", p, all)
			}
		}
	}
	// Writing a row of another project is refused by the policy.
	err = s.Update(t.Context(), "a", func(etx eim.Tx) error {
		_, err := etx.(*tx).q.ExecContext(t.Context(), "INSERT INTO regions (id, project) VALUES ('region-00000001', 'b')")
		return err
	})
	if err == nil {
		t.Fatal("INSERT of another project's row in a scoped tx: got nil error")
	}
}

// Every resource table has row-level security on and the tenant policy, so
// tables added by later migrations cannot forget it.
func TestEveryTableHasTenantPolicy(t *testing.T) {
	if os.Getenv("EIM_TEST_POSTGRES_URL") == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	s, err := Open(t.Context(), postgresURL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range eim.Kinds() {
		table := eim.SchemaOf(k).Table
		var rls, policy, grant bool
		err := s.rdb.QueryRowContext(t.Context(), `SELECT c.relrowsecurity,
			EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = current_schema() AND p.tablename = c.relname AND p.policyname = 'eim_tenant_isolation'),
			has_table_privilege('eim_tenant', c.oid, 'SELECT') AND has_table_privilege('eim_tenant', c.oid, 'INSERT')
				AND has_table_privilege('eim_tenant', c.oid, 'UPDATE') AND has_table_privilege('eim_tenant', c.oid, 'DELETE')
			FROM pg_class c WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`, table).Scan(&rls, &policy, &grant)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if !rls || !policy || !grant {
			t.Errorf("%s: row security %v, tenant policy %v, tenant grants %v; want all true", table, rls, policy, grant)
		}
	}
}
