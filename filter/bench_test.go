package filter_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

// benchHosts is the size of the benchmark inventory: benchHosts hosts (one
// in seven without a site) over 1,000 sites over 100 regions, and an instance
// on every other host, in project p1, under sqlstore's schema and indexes.
const benchHosts = 100_000

// openBenchDB builds the benchmark inventory on SQLite (a file in a
// temporary directory) or, when url is set, PostgreSQL (a temporary schema),
// with fresh planner statistics as sqlstore keeps them.
func openBenchDB(b *testing.B, d filter.Dialect, url string) *sql.DB {
	b.Helper()
	var (
		db     *sql.DB
		err    error
		ddl    = filepath.Join("..", "sqlstore", "migrations", "sqlite", "0001_init.sql")
		hex8   = func(x string) string { return "printf('%08x', " + x + ")" }
		series = func(from, to int) string {
			return fmt.Sprintf("WITH RECURSIVE g(n) AS (SELECT %d UNION ALL SELECT n+1 FROM g WHERE n < %d) ", from, to)
		}
		from = " FROM g"
	)
	if d == filter.Postgres {
		ddl = filepath.Join("..", "sqlstore", "migrations", "postgres", "0001_init.sql")
		hex8 = func(x string) string { return "lpad(to_hex(" + x + "), 8, '0')" }
		series = func(from, to int) string { return "" }
		from = ""
		db, err = sql.Open("pgx", url)
	} else {
		db, err = sql.Open("sqlite", filepath.Join(b.TempDir(), "bench.db"))
	}
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	if d == filter.Postgres {
		var r [6]byte
		_, _ = rand.Read(r[:])
		schema := "filter_bench_" + hex.EncodeToString(r[:])
		for _, q := range []string{"CREATE SCHEMA " + schema, "SET search_path TO " + schema} {
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		b.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	}
	schema, err := os.ReadFile(ddl)
	if err != nil {
		b.Fatal(err)
	}
	gen := func(from, to int) string {
		if d == filter.Postgres {
			return fmt.Sprintf(" FROM generate_series(%d, %d) n", from, to)
		}
		return ""
	}
	stmts := []string{
		string(schema),
		`INSERT INTO projects (name, id) VALUES ('p1', 'p1')`,
		series(1, 20) + `INSERT INTO regions (id, project, name) SELECT 'region-' || ` + hex8("n") + `, 'p1', 'region ' || n` + from + gen(1, 20),
		series(21, 100) + `INSERT INTO regions (id, project, name, parent_id) SELECT 'region-' || ` + hex8("n") + `, 'p1', 'subregion ' || n, 'region-' || ` + hex8("1 + n % 20") + from + gen(21, 100),
		series(1, 1000) + `INSERT INTO sites (id, project, name, region_id) SELECT 'site-' || ` + hex8("n") + `, 'p1', 'site ' || n, 'region-' || ` + hex8("1 + n % 100") + from + gen(1, 1000),
		series(1, benchHosts) + `INSERT INTO hosts (id, project, name, desired_state, site_id) SELECT 'host-' || ` + hex8("n") + `, 'p1', 'bench-' || n, 'HOST_STATE_ONBOARDED', CASE WHEN n % 7 = 0 THEN NULL ELSE 'site-' || ` + hex8("1 + n % 1000") + ` END` + from + gen(1, benchHosts),
		`INSERT INTO operating_systems (id, project, name) VALUES ('os-00000001', 'p1', 'ubuntu')`,
		series(1, benchHosts/2) + `INSERT INTO instances (id, project, name, desired_state, host_id, os_id) SELECT 'inst-' || ` + hex8("n") + `, 'p1', 'inst-' || n, 'INSTANCE_STATE_RUNNING', 'host-' || ` + hex8("2 * n") + `, 'os-00000001'` + from + gen(1, benchHosts/2),
		`ANALYZE`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q[:min(len(q), 200)], err)
		}
	}
	return db
}

// BenchmarkListHostsNested runs what sqlstore runs for a page of hosts with
// a filter over edges: the first 20 by ID and the total count.
func BenchmarkListHostsNested(b *testing.B) {
	filters := []string{
		`site.resourceId="site-0000002a"`,
		`site.region.resourceId="region-0000002a"`,
		`site.name="site 42"`,
		`site.region.name="subregion 42"`,
		`site.region.parentRegion.resourceId="region-00000007"`,
		`instance.name="inst-42"`,
		`NOT site.region.name="region"`,
		`site.name="site 42" OR name="bench-77"`,
		`site.name="no such site"`,
	}
	dialects := map[string]filter.Dialect{"sqlite": filter.SQLite}
	url := os.Getenv("EIM_TEST_POSTGRES_URL")
	if url != "" {
		dialects["postgres"] = filter.Postgres
	}
	for name, d := range dialects {
		b.Run(name, func(b *testing.B) {
			db := openBenchDB(b, d, url)
			for _, f := range filters {
				where, args, err := filter.Where(d, eim.KindHost, f, 1)
				if err != nil {
					b.Fatal(err)
				}
				mark := "?"
				if d == filter.Postgres {
					mark = "$1"
				}
				scope := "hosts.project = " + mark + " AND (" + where + ")"
				page := "SELECT hosts.id FROM hosts WHERE " + scope + " ORDER BY hosts.id LIMIT 20"
				count := "SELECT COUNT(*) FROM hosts WHERE " + scope
				args = append([]any{"p1"}, args...)
				b.Run(strings.ReplaceAll(f, " ", "_"), func(b *testing.B) {
					for b.Loop() {
						rows, err := db.Query(page, args...)
						if err != nil {
							b.Fatal(err)
						}
						for rows.Next() {
						}
						if err := rows.Err(); err != nil {
							b.Fatal(err)
						}
						rows.Close()
						var n int
						if err := db.QueryRow(count, args...).Scan(&n); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
