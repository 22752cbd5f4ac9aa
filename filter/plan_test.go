package filter_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

// openSQLiteStore returns an in-memory SQLite database with sqlstore's
// schema, indexes included, for looking at query plans.
func openSQLiteStore(t *testing.T) *sql.DB {
	t.Helper()
	ddl, err := os.ReadFile(filepath.Join("..", "sqlstore", "migrations", "sqlite", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(string(ddl)); err != nil {
		t.Fatalf("sqlstore's sqlite schema: %v", err)
	}
	return db
}

// queryPlan returns SQLite's EXPLAIN QUERY PLAN for q, one step a line.
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Filters over edges must let SQLite find the outer rows through the index
// of the reference column, sqlstore's (project, site_id) and the like,
// instead of scanning the table and running a subquery for every row. The
// queries are the ones sqlstore runs: the project scope AND the filter.
func TestWherePlanUsesIndex(t *testing.T) {
	db := openSQLiteStore(t)
	for _, tc := range []struct {
		kind   eim.Kind
		filter string
		want   string // a line of the plan
	}{
		{eim.KindHost, `site.resourceId="site-12345678"`, "SEARCH hosts USING COVERING INDEX hosts_site_id_idx (project=? AND site_id=?)"},
		{eim.KindHost, `site.region.resourceId="region-12345678"`, "SEARCH hosts USING COVERING INDEX hosts_site_id_idx (project=? AND site_id=?)"},
		{eim.KindHost, `site.name="berlin"`, "SEARCH hosts USING COVERING INDEX hosts_site_id_idx (project=? AND site_id=?)"},
		{eim.KindHost, `site.region.name="europe"`, "SEARCH hosts USING COVERING INDEX hosts_site_id_idx (project=? AND site_id=?)"},
		{eim.KindHost, `site.region.parentRegion.resourceId="region-12345678"`, "SEARCH hosts USING COVERING INDEX hosts_site_id_idx (project=? AND site_id=?)"},
		{eim.KindHost, `instance.desiredState=INSTANCE_STATE_RUNNING`, "SEARCH hosts USING COVERING INDEX sqlite_autoindex_hosts_2 (project=? AND id=?)"},
		{eim.KindInstance, `host.site.resourceId="site-12345678"`, "SEARCH instances USING COVERING INDEX instances_host_id_key (project=? AND host_id=?)"},
		{eim.KindSite, `region.resourceId="region-12345678"`, "SEARCH sites USING COVERING INDEX sites_region_id_idx (project=? AND region_id=?)"},
	} {
		t.Run(string(tc.kind)+":"+tc.filter, func(t *testing.T) {
			where, args, err := filter.Where(filter.SQLite, tc.kind, tc.filter, 1)
			if err != nil {
				t.Fatal(err)
			}
			table := eim.SchemaOf(tc.kind).Table
			q := "SELECT COUNT(*) FROM " + table + " WHERE " + table + ".project = ? AND (" + where + ")"
			plan := queryPlan(t, db, q, append([]any{"p1"}, args...)...)
			if !strings.Contains(plan, tc.want+"\n") {
				t.Errorf("got plan\n%swant a line %q\nfor %s", plan, tc.want, q)
			}
			if strings.Contains(plan, "SCAN "+table+"\n") || strings.Contains(plan, "CORRELATED") {
				t.Errorf("got plan\n%swant no SCAN %s and no correlated subquery\nfor %s", plan, table, q)
			}
		})
	}
}

// Under NOT and OR no index can find the rows, but the subquery must still
// run once, not once per row.
func TestWherePlanUncorrelated(t *testing.T) {
	db := openSQLiteStore(t)
	for _, f := range []string{
		`NOT site.name="berlin"`,
		`site.name!="berlin"`,
		`site.region.name="europe" OR name="edge"`,
		`NOT site.region.resourceId="region-12345678"`,
		`NOT instance.os.name="ubuntu"`,
		`NOT has(instance)`,
	} {
		t.Run(f, func(t *testing.T) {
			where, args, err := filter.Where(filter.SQLite, eim.KindHost, f, 1)
			if err != nil {
				t.Fatal(err)
			}
			q := "SELECT COUNT(*) FROM hosts WHERE hosts.project = ? AND (" + where + ")"
			plan := queryPlan(t, db, q, append([]any{"p1"}, args...)...)
			if strings.Contains(plan, "CORRELATED") || !strings.Contains(plan, "LIST SUBQUERY") {
				t.Errorf("got plan\n%swant LIST SUBQUERY and no correlated subquery\nfor %s", plan, q)
			}
		})
	}
}
