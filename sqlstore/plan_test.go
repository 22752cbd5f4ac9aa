package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// The writer connection of a store opened on a fresh data directory must
// plan with the statistics the migrations seed, as a connection opened
// later does. Without them SQLite served a serial-number lookup ("ORDER BY
// id LIMIT 2") by walking the hosts table in id order, so registering a
// fleet slowed down with every host it added.
func TestFreshWriterPlansWithStatistics(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const q = "SELECT hosts.id FROM hosts WHERE hosts.project = ? AND hosts.serial_number = ? AND hosts.serial_number <> '' ORDER BY hosts.id LIMIT 2"
	if got := explain(t, s.db, q, "default", "SN12345"); !strings.Contains(got, "USING INDEX hosts_serial_number_idx (serial_number=?)") {
		t.Errorf("serial lookup plan on the writer = %q, want a search of hosts_serial_number_idx", got)
	}
}

// A statement is prepared once it has been seen a few times (learnAfter),
// on the side, and reused after that, by the writer and by readers alike;
// a text seen fewer times is not.
func TestBuiltStatementsAreLearnt(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const q = "SELECT COUNT(*) FROM hosts WHERE hosts.uuid = ? AND hosts.uuid <> ''"
	for _, write := range []bool{false, true} {
		db := s.rdb
		if write {
			db = s.db
		}
		if s.stmts.get(db, q) != nil {
			t.Fatalf("write %v: learnt before use", write)
		}
		run := func() {
			t.Helper()
			fn := func(tx *tx) error {
				var n int
				return tx.queryRowBuilt(ctx, q, []any{"x"}).Scan(&n)
			}
			var err error
			if write {
				err = s.Update(ctx, "", func(etx eim.Tx) error { return fn(etx.(*tx)) })
			} else {
				err = s.View(ctx, "", func(etx eim.Tx) error { return fn(etx.(*tx)) })
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for range learnAfter - 1 {
			run()
		}
		s.stmts.mu.Lock()
		early := s.stmts.pending[stmtKey{db, q}] || s.stmts.get(db, q) != nil
		s.stmts.mu.Unlock()
		if early {
			t.Fatalf("write %v: learnt after %d runs, before its %dth", write, learnAfter-1, learnAfter)
		}
		run()
		// The writer's preparation waits for the transaction that saw the
		// text to end; wait for it here.
		deadline := time.Now().Add(10 * time.Second)
		for s.stmts.get(db, q) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("write %v: not learnt after %d runs", write, learnAfter)
			}
			time.Sleep(5 * time.Millisecond)
		}
		run() // now prepared
	}
}

func TestInlineLen(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {33, 64}, {64, 64}, {65, 100}, {100, 100}} {
		if got := inlineLen(c.n); got != c.want {
			t.Errorf("inlineLen(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// The host module's scan for hosts stuck "Rebooting" (per project, oldest
// first) and counts by status read the (project, status) index, while a
// project's host list filtered by status still walks the project in id
// order and stops at its page.
func TestHostStatusPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct{ q, want string }{
		{"SELECT hosts.id FROM hosts WHERE hosts.project = ? AND hosts.host_status = ? ORDER BY hosts.host_status_timestamp, hosts.id LIMIT 500", "USING INDEX hosts_host_status_idx (project=? AND host_status=?)"},
		{"SELECT COUNT(*) FROM hosts WHERE hosts.project = ? AND hosts.host_status = ?", "USING COVERING INDEX hosts_host_status_idx (project=? AND host_status=?)"},
		{"SELECT hosts.id FROM hosts WHERE hosts.project = ? AND hosts.host_status = ? ORDER BY hosts.id LIMIT 20", "(project=?)"},
	} {
		if got := explain(t, s.rdb, tc.q, "a", "b"); !strings.Contains(got, tc.want) {
			t.Errorf("plan of %q = %q, want %q", tc.q, got, tc.want)
		}
	}
}

// A first page of a filtered list whose count an index answers is counted
// first: no match reads no page, and matches that fit in the page are found
// through the filtering index and sorted (the page's order made
// "unindexed"), rather than by walking every host in id order.
func TestSparseFilteredPage(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "eim.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(ctx, &eim.Project{Name: "p", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	var lost []string
	err = s.Update(ctx, "p", func(tx eim.Tx) error {
		for i := range 300 {
			h := &eim.Host{Name: fmt.Sprintf("h%03d", i), HostStatus: "Running"}
			if i%100 == 7 {
				h.HostStatus = "No Connection"
			}
			if err := tx.Create(ctx, h); err != nil {
				return err
			}
			if h.HostStatus != "Running" {
				lost = append(lost, h.ResourceID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	// Statistics of a fleet (100,000 hosts over 100 projects, as
	// ANALYZE found them in the heartbeat benchmark's store), read by the
	// connections of a store opened again: a fresh store plans with the
	// migrations' estimates, and counts through the wide rows.
	for idx, stat := range map[string]string{"sqlite_autoindex_hosts_2": "100000 1001 1", "hosts_host_status_idx": "100000 1001 1001"} {
		if _, err := s.db.ExecContext(ctx, "DELETE FROM sqlite_stat1 WHERE tbl = 'hosts' AND idx = ?", idx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hosts', ?, ?)", idx, stat); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list := func(q eim.Query) ([]string, int) {
		t.Helper()
		var ids []string
		var total int
		err := s.View(ctx, "p", func(tx eim.Tx) error {
			items, n, err := tx.List(ctx, eim.KindHost, q)
			for _, it := range items {
				ids = append(ids, it.Base().ResourceID)
			}
			total = n
			return err
		})
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		return ids, total
	}
	if ids, n := list(eim.Query{Filter: `hostStatus="no connection"`, Limit: 20}); !slices.Equal(ids, lost) || n != 3 {
		t.Errorf("sparse page: %v (total %d), want %v (total 3)", ids, n, lost)
	}
	if ids, n := list(eim.Query{Filter: `hostStatus="No Connection"`, Limit: 2}); !slices.Equal(ids, lost[:2]) || n != 3 {
		t.Errorf("page of 2: %v (total %d), want %v (total 3)", ids, n, lost[:2])
	}
	if ids, n := list(eim.Query{Filter: `hostStatus="Rebooting"`, Limit: 20}); len(ids) != 0 || n != 0 {
		t.Errorf("no match: %v (total %d)", ids, n)
	}
	ids, n := list(eim.Query{Filter: `hostStatus="Running"`, OrderBy: "name desc", Limit: 3})
	if n != 297 || len(ids) != 3 {
		t.Errorf("dense page: %d ids, total %d; want 3 of 297", len(ids), n)
	}
	if got := unindexedOrder("hosts.name DESC, hosts.id"); got != "+hosts.name DESC, +hosts.id" {
		t.Errorf("unindexedOrder = %q", got)
	}

	// What decides it: the count of a status filter is read from the
	// (project, host_status) index, one on the unindexed hostname is not.
	// (Which index the sparse page then takes is the planner's choice
	// from the statistics: on the heartbeat benchmark's store, that index.)
	for _, tc := range []struct {
		filter string
		want   bool
	}{{`hostStatus="No Connection"`, true}, {`hostname="x"`, false}} {
		err := s.View(ctx, "p", func(etx eim.Tx) error {
			tx := etx.(*tx)
			c, _ := tx.codec(eim.KindHost)
			a := &args{}
			where, err := tx.where(c, eim.Query{Filter: tc.filter}, a)
			if err != nil {
				return err
			}
			got, err := s.coveredCount(ctx, tx, c, where, a.list)
			if got != tc.want {
				t.Errorf("coveredCount(%s) = %v, want %v", tc.filter, got, tc.want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Discover looks a device's UUID and serial number up across projects,
// oldest registration first: each reads its index for the value, not the
// hosts in creation order. A project's own UUID lookup reads the unique
// (project, lower(uuid)) index.
func TestDeviceLookupPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		q    string
		args []any
		want string
	}{
		{"SELECT hosts.id FROM hosts WHERE (lower(hosts.uuid) = ? AND hosts.uuid <> '') ORDER BY hosts.created_at, hosts.id LIMIT 16", []any{"u"}, "USING INDEX hosts_uuid_idx (<expr>=?)"},
		{"SELECT hosts.id FROM hosts WHERE (hosts.serial_number = ? AND hosts.serial_number <> '') ORDER BY hosts.created_at, hosts.id LIMIT 16", []any{"s"}, "USING INDEX hosts_serial_number_idx (serial_number=?)"},
		{"SELECT hosts.id FROM hosts WHERE hosts.project = ? AND (lower(hosts.uuid) = ? AND hosts.uuid <> '') ORDER BY hosts.id LIMIT 2", []any{"p", "u"}, "USING INDEX hosts_uuid_key (project=? AND <expr>=?)"},
	} {
		if got := explain(t, s.rdb, tc.q, tc.args...); !strings.Contains(got, tc.want) {
			t.Errorf("plan of %q = %q, want %q", tc.q, got, tc.want)
		}
	}
}

// explain returns SQLite's query plan of q with args, its steps joined by
// "; ".
func explain(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// A device's edge workload rows are read through the (project, host_id)
// indexes, which cover the reads, not the primary key's prefix (project):
// its status rows at each report, its targets at each GetWorkloads. With
// the primary key, each read walked every row of the project and a fleet's
// status fan-in grew with the square of its devices (BENCHMARKS.md, edge
// workloads). The plans must hold without statistics of these tables
// (PRAGMA optimize drops them while the tables are empty) and with them.
func TestEdgeWorkloadDevicePlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	queries := []struct {
		q    string
		want string
	}{
		{"SELECT name FROM edge_workload_status WHERE project = ? AND host_id = ?", "USING COVERING INDEX edge_workload_status_host (project=? AND host_id=?)"},
		{"SELECT t.name, t.revision, r.spec FROM edge_workload_targets t JOIN edge_workload_revisions r" +
			" ON r.project = t.project AND r.name = t.name AND r.revision = t.revision WHERE t.project = ? AND t.host_id = ? ORDER BY t.name",
			"USING COVERING INDEX edge_workload_targets_host (project=? AND host_id="},
		{"SELECT name, host_id, revision FROM edge_workload_targets WHERE project = ? AND host_id = ? ORDER BY name, host_id", "USING COVERING INDEX edge_workload_targets_host (project=? AND host_id=?)"},
	}
	check := func(when string, dbs ...*sql.DB) {
		t.Helper()
		for _, tc := range queries {
			for _, db := range dbs {
				if got := explain(t, db, tc.q, "p", "host-1"); !strings.Contains(got, tc.want) {
					t.Errorf("%s: plan of %q = %q, want %q", when, tc.q, got, tc.want)
				}
			}
		}
	}
	check("no statistics", s.db, s.rdb)
	// The statistics ANALYZE wrote for a project of 10,000 devices running
	// 3 workloads, loaded by the writer.
	for _, q := range []string{
		"DELETE FROM sqlite_stat1 WHERE tbl LIKE 'edge_%'",
		"INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES" +
			" ('edge_workload_targets', 'edge_workload_targets_host', '30000 30000 3 1 1')," +
			" ('edge_workload_targets', 'sqlite_autoindex_edge_workload_targets_1', '30000 30000 10000 1')," +
			" ('edge_workload_status', 'edge_workload_status_host', '30000 30000 3 1')," +
			" ('edge_workload_status', 'sqlite_autoindex_edge_workload_status_1', '30000 30000 10000 1')," +
			" ('edge_workload_revisions', 'sqlite_autoindex_edge_workload_revisions_1', '3 3 1 1')",
		"ANALYZE sqlite_schema",
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	check("a fleet's statistics", s.db)
}
