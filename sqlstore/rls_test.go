package sqlstore

import (
	"testing"

	"github.com/eimhq/eim"
)

// Row-level security blocks another project's rows even when a statement
// forgets the project predicate.
func TestRowLevelSecurity(t *testing.T) {
	url := postgresURLIfSet(t)
	if url == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	s, err := Open(t.Context(), url, Options{})
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
	raw := func(project, q string, args ...any) []string {
		t.Helper()
		var names []string
		err := s.Update(t.Context(), project, func(etx eim.Tx) error {
			rows, err := etx.(*tx).tx.QueryContext(t.Context(), q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					return err
				}
				names = append(names, n)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatalf("%s in %q: %v", q, project, err)
		}
		return names
	}
	if got := raw("a", "SELECT name FROM hosts"); len(got) != 1 || got[0] != "host of a" {
		t.Fatalf("unfiltered SELECT in project a: got %v, want only a's host", got)
	}
	if got := raw("a", "SELECT project FROM events"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("unfiltered events in project a: got %v, want only a's", got)
	}
	if got := raw("a", "UPDATE hosts SET name = 'x' RETURNING name"); len(got) != 1 {
		t.Fatalf("unfiltered UPDATE in project a touched %d rows, want 1", len(got))
	}
	if got := raw("", "SELECT name FROM hosts ORDER BY name"); len(got) != 2 || got[1] != "x" {
		t.Fatalf("unscoped SELECT: got %v, want both hosts, b's unchanged", got)
	}
	// Writing a row of another project is refused by the policy.
	err = s.Update(t.Context(), "a", func(etx eim.Tx) error {
		_, err := etx.(*tx).tx.ExecContext(t.Context(), "INSERT INTO regions (id, project) VALUES ('region-00000001', 'b')")
		return err
	})
	if err == nil {
		t.Fatal("INSERT of another project's row in a scoped tx: got nil error")
	}
}
