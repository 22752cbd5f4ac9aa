package sqlstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// A workload's device counts (the API's status, the exporter's series)
// are planned without nested loops on PostgreSQL when its targets and
// statuses were written since the tables' last ANALYZE, as when a workload
// was just given to a fleet: then the planner takes each side for a row or
// two, and a nested loop of one by the other took minutes at 10,000
// devices (bench/rollout.sh), holding a connection the devices' reports
// wait for.
func TestEdgeWorkloadDeviceCountsPlan(t *testing.T) {
	url := postgresURLIfSet(t)
	if url == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	ctx := t.Context()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, table := range []string{"edge_workload_targets", "edge_workload_status"} {
		if _, err := s.db.ExecContext(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	const p, n = "p", 2000
	if err := s.CreateProject(ctx, &eim.Project{Name: p, ID: p}); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	err = s.Update(ctx, p, func(tx eim.Tx) error {
		for i := range n {
			h := &eim.Host{Name: fmt.Sprint("h", i)}
			if err := tx.Create(ctx, h); err != nil {
				return err
			}
			hosts = append(hosts, h.ResourceID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &eim.EdgeWorkload{Project: p, Name: "cam", Spec: eim.EdgeWorkloadSpec{Device: hosts[0],
		Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/cam:1"}}}}}}
	if err := s.CreateEdgeWorkload(ctx, w); err != nil {
		t.Fatal(err)
	}
	var targets []eim.EdgeWorkloadTarget
	for _, h := range hosts {
		targets = append(targets, eim.EdgeWorkloadTarget{Workload: "cam", HostID: h, Revision: 1})
	}
	if err := s.SetEdgeWorkloadTargets(ctx, p, targets); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts[:n/2] {
		if err := s.RecordEdgeWorkloadStatus(ctx, p, h, 0, []eim.EdgeWorkloadStatus{{Workload: "cam", HostID: h, Revision: 1, Phase: eim.PhaseRunning}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		q    string
		args []any
	}{
		{"one workload", deviceCountsQuery(true, true), []any{p, "cam", p, "cam"}},
		{"every workload", deviceCountsQuery(false, true), nil},
	} {
		plan := pgExplain(t, s, tc.q, tc.args...)
		if strings.Contains(plan, "Nested Loop") {
			t.Errorf("%s: the plan has a nested loop:\n%s", tc.name, plan)
		}
	}
	counts, err := s.EdgeWorkloadDeviceCountsOf(ctx, p, "cam")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range counts {
		got[fmt.Sprintf("%d/%d/%s", c.Target, c.Revision, c.Phase)] += c.Devices
	}
	if len(got) != 2 || got["1/1/Running"] != n/2 || got["1/0/"] != n/2 {
		t.Errorf("counts: got %v, want %d running revision 1 and %d without a status", got, n/2, n/2)
	}
}

// pgExplain is PostgreSQL's plan of q, its ? placeholders numbered.
func pgExplain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN "+s.d.rebind(q), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// On SQLite, a workload's device counts find each row's match through the
// other table's primary key: the FULL JOIN of two subqueries it replaces
// scanned one materialized side for each row of the other, and a status
// read of a workload on 100,000 devices did not answer in 20 minutes.
func TestEdgeWorkloadDeviceCountsPlanSQLite(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "eim.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, one := range []bool{true, false} {
		q, args := deviceCountsQuery(one, false), []any(nil)
		if one {
			args = []any{"p", "cam", "p", "cam"}
		}
		rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		for _, line := range plan {
			joined := strings.Contains(line, "LEFT-JOIN") || strings.Contains(line, "USING COVERING INDEX sqlite_autoindex_edge_workload_targets_1")
			if strings.Contains(line, "MATERIALIZE") || (joined && !strings.HasPrefix(line, "SEARCH")) {
				t.Errorf("one workload %v: a side is scanned for each row of the other:\n%s", one, text)
			}
		}
		if !strings.Contains(text, "LEFT-JOIN") || !strings.Contains(text, "CORRELATED SCALAR SUBQUERY") {
			t.Errorf("one workload %v: not the statement this test knows:\n%s", one, text)
		}
	}
}
