package filter_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// testDB is a real database with one table per kind, created from the
// schemas under the storage conventions package filter assumes.
type testDB struct {
	d  filter.Dialect
	db *sql.DB
}

// engines returns the databases to run a test against: SQLite always,
// PostgreSQL when EIM_TEST_POSTGRES_URL is set (in a temporary schema).
func engines(t testing.TB) []*testDB {
	t.Helper()
	dbs := []*testDB{openSQLite(t)}
	if url := os.Getenv("EIM_TEST_POSTGRES_URL"); url != "" {
		dbs = append(dbs, openPostgres(t, url))
	}
	return dbs
}

func openSQLite(t testing.TB) *testDB {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	t.Cleanup(func() { db.Close() })
	tdb := &testDB{d: filter.SQLite, db: db}
	tdb.create(t)
	return tdb
}

func openPostgres(t testing.TB, url string) *testDB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // search_path is per connection
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "filter_test_" + hex.EncodeToString(b[:])
	for _, q := range []string{"CREATE SCHEMA " + schema, "SET search_path TO " + schema} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("postgres: %s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		db.Close()
	})
	tdb := &testDB{d: filter.Postgres, db: db}
	tdb.create(t)
	return tdb
}

func (tdb *testDB) name() string {
	if tdb.d == filter.Postgres {
		return "postgres"
	}
	return "sqlite"
}

var (
	timeType = reflect.TypeFor[eim.Time]()
)

// columnType is the SQL type of a stored field, as sqlstore stores it.
func (tdb *testDB) columnType(f *eim.Field) string {
	pg := tdb.d == filter.Postgres
	switch {
	case f.Column == "id":
		return "TEXT PRIMARY KEY"
	case f.Edge != nil:
		return "TEXT"
	case f.Type == timeType:
		return "BIGINT NOT NULL DEFAULT 0"
	}
	switch f.Type.Kind() {
	case reflect.String:
		return "TEXT NOT NULL DEFAULT ''"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "BIGINT NOT NULL DEFAULT 0"
	case reflect.Bool:
		if pg {
			return "BOOLEAN NOT NULL DEFAULT FALSE"
		}
		return "INTEGER NOT NULL DEFAULT 0"
	}
	if pg {
		return "JSONB"
	}
	return "TEXT"
}

func (tdb *testDB) isJSON(f *eim.Field) bool {
	return strings.HasPrefix(tdb.columnType(f), "JSONB")
}

func (tdb *testDB) create(t testing.TB) {
	t.Helper()
	for _, k := range eim.Kinds() {
		s := eim.SchemaOf(k)
		var cols []string
		for _, f := range s.Fields {
			if f.Stored() {
				cols = append(cols, f.Column+" "+tdb.columnType(f))
			}
		}
		q := fmt.Sprintf("CREATE TABLE %s (%s)", s.Table, strings.Join(cols, ", "))
		if _, err := tdb.db.Exec(q); err != nil {
			t.Fatalf("%s: %s: %v", tdb.name(), q, err)
		}
	}
}

// row is a fixture: a kind and column values (nil is NULL).
type row struct {
	kind eim.Kind
	cols map[string]any
}

func (tdb *testDB) insert(t testing.TB, rows ...row) {
	t.Helper()
	for _, r := range rows {
		s := eim.SchemaOf(r.kind)
		var names, marks []string
		var args []any
		for _, f := range s.Fields {
			v, ok := r.cols[f.Column]
			if !ok || !f.Stored() {
				continue
			}
			names = append(names, f.Column)
			args = append(args, v)
			mark := "?"
			if tdb.d == filter.Postgres {
				mark = "$" + strconv.Itoa(len(args))
				if tdb.isJSON(f) {
					mark += "::jsonb"
				}
			}
			marks = append(marks, mark)
		}
		if len(names) != len(r.cols) {
			t.Fatalf("fixture %v has columns that %s lacks", r.cols, s.Table)
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", s.Table, strings.Join(names, ", "), strings.Join(marks, ", "))
		if _, err := tdb.db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %s: %v", tdb.name(), q, err)
		}
	}
}

// argBase is how many arguments ids passes before a filter's, as a caller
// of filter.Where might.
const argBase = 2

// ids runs SELECT id FROM <table> WHERE project = 'p1' AND <where> ORDER BY
// <order> and returns the ids. where is compiled with argBase.
func (tdb *testDB) ids(t testing.TB, k eim.Kind, where string, args []any, order string) ([]string, error) {
	t.Helper()
	s := eim.SchemaOf(k)
	mark := func(n int) string {
		if tdb.d == filter.Postgres {
			return "$" + strconv.Itoa(n)
		}
		return "?"
	}
	q := "SELECT " + s.Table + ".id FROM " + s.Table + " WHERE " + s.Table + ".project = " + mark(1) + " AND " + mark(2) + " = 'x'"
	args = append([]any{"p1", "x"}, args...)
	if where != "" {
		q += " AND " + where
	}
	if order != "" {
		q += " ORDER BY " + order
	}
	rows, err := tdb.db.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if order == "" {
		slices.Sort(out)
	}
	return out, nil
}

func ms(rfc3339 string) int64 {
	return must(eimTime(rfc3339)).UnixMilli()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func eimTime(s string) (eim.Time, error) {
	var t eim.Time
	err := t.UnmarshalJSON([]byte(`"` + s + `"`))
	return t, err
}

// fixtures is a small inventory in project p1, and a site and a host of
// project p2 with the same names as p1's, to show that nested filters
// select within the outer row's project.
func fixtures() []row {
	const p = "p1"
	return []row{
		{eim.KindRegion, map[string]any{"id": "region-00000001", "project": p, "name": "Europe", "parent_id": nil, "metadata": `[{"key":"geo","value":"eu"}]`}},
		{eim.KindRegion, map[string]any{"id": "region-00000002", "project": p, "name": "Germany", "parent_id": "region-00000001", "metadata": `[]`}},
		{eim.KindRegion, map[string]any{"id": "region-00000003", "project": p, "name": "America", "parent_id": nil, "metadata": nil}},

		{eim.KindSite, map[string]any{"id": "site-00000001", "project": p, "name": "Berlin-Factory", "region_id": "region-00000002", "metadata": `[{"key":"env","value":"prod"}]`}},
		{eim.KindSite, map[string]any{"id": "site-00000002", "project": p, "name": "Austin Store", "region_id": "region-00000003", "metadata": `null`}},
		{eim.KindSite, map[string]any{"id": "site-00000003", "project": p, "name": "Empty", "region_id": nil}},

		{eim.KindOS, map[string]any{"id": "os-00000001", "project": p, "name": "Ubuntu 22.04", "os_type": "OS_TYPE_MUTABLE"}},
		{eim.KindOS, map[string]any{"id": "os-00000002", "project": p, "name": "Edge Microvisor Toolkit", "os_type": "OS_TYPE_IMMUTABLE"}},

		{eim.KindHost, map[string]any{"id": "host-00000001", "project": p, "name": "edge-node-01", "desired_state": "HOST_STATE_ONBOARDED",
			"site_id": "site-00000001", "cpu_cores": 8, "memory_bytes": int64(16e9), "serial_number": "0012",
			"metadata": `[{"key":"role","value":"gw"},{"key":"env","value":"prod"}]`, "created_at": ms("2025-01-01T00:00:00Z")}},
		{eim.KindHost, map[string]any{"id": "host-00000002", "project": p, "name": "EDGE-node-02", "desired_state": "HOST_STATE_REGISTERED",
			"site_id": "site-00000002", "cpu_cores": 4, "memory_bytes": int64(8e9), "serial_number": "12",
			"metadata": `[{"key":"role","value":"worker"}]`, "created_at": ms("2025-07-01T12:00:00.250Z")}},
		{eim.KindHost, map[string]any{"id": "host-00000003", "project": p, "name": "lab_box-1", "desired_state": "HOST_STATE_ONBOARDED",
			"site_id": nil, "cpu_cores": 16, "metadata": `[]`}},
		{eim.KindHost, map[string]any{"id": "host-00000004", "project": p, "name": "spare", "desired_state": "",
			"site_id": nil, "cpu_cores": 0, "metadata": nil}},

		{eim.KindInstance, map[string]any{"id": "inst-00000001", "project": p, "name": "inst-a", "host_id": "host-00000001", "os_id": "os-00000001",
			"desired_state": "INSTANCE_STATE_RUNNING", "custom_config_id": `["customconfig-00000001"]`}},
		{eim.KindInstance, map[string]any{"id": "inst-00000002", "project": p, "name": "inst-b", "host_id": "host-00000002", "os_id": "os-00000002",
			"desired_state": "INSTANCE_STATE_DELETED", "custom_config_id": `[]`}},

		{eim.KindSite, map[string]any{"id": "site-0000000e", "project": "p2", "name": "Berlin-Factory", "region_id": nil}},
		{eim.KindHost, map[string]any{"id": "host-0000000e", "project": "p2", "name": "edge-node-01", "site_id": "site-0000000e"}},
	}
}
