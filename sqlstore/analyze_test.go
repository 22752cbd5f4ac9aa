package sqlstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// A table loaded from empty gets planner statistics without waiting for
// autovacuum: the store analyzes it once its rows reach firstAnalyze.
func TestAnalyzeAfterGrowth(t *testing.T) {
	url := postgresURLIfSet(t)
	if url == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	s, err := Open(t.Context(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Autovacuum must not be the one doing it.
	if _, err := s.db.ExecContext(t.Context(), "ALTER TABLE regions SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	analyzed := func() int64 {
		t.Helper()
		var n int64
		err := s.db.QueryRowContext(t.Context(), "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'regions'").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	create := func(n int) {
		t.Helper()
		err := s.Update(t.Context(), "p", func(tx eim.Tx) error {
			for i := range n {
				if err := tx.Create(t.Context(), &eim.Region{Name: fmt.Sprint("r", i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	create(firstAnalyze - 1)
	if got := analyzed(); got != 0 {
		t.Fatalf("analyze_count of regions after %d creates: got %d, want 0", firstAnalyze-1, got)
	}
	create(1)
	// The statistics collector reports with a delay: poll.
	deadline := time.Now().Add(20 * time.Second)
	for analyzed() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("analyze_count of regions after %d creates: got 0, want > 0", firstAnalyze)
		}
		if _, err := s.db.ExecContext(t.Context(), "SELECT pg_stat_clear_snapshot(), pg_sleep(0.05)"); err != nil {
			t.Fatal(err)
		}
	}
}

// The tables a module's store writes with its own statements, which no
// event names, are counted by their inserted rows: a workload given to
// firstAnalyze devices analyzes its targets and the devices' versions.
func TestAnalyzeAfterGrowthModuleTables(t *testing.T) {
	url := postgresURLIfSet(t)
	if url == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	s, err := Open(t.Context(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, table := range []string{"edge_workload_targets", "edge_devices"} {
		if _, err := s.db.ExecContext(t.Context(), "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	err = s.Update(t.Context(), "p", func(tx eim.Tx) error {
		hosts = hosts[:0]
		for i := range firstAnalyze {
			h := &eim.Host{Name: fmt.Sprint("h", i)}
			if err := tx.Create(t.Context(), h); err != nil {
				return err
			}
			hosts = append(hosts, h.ResourceID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &eim.EdgeWorkload{Project: "p", Name: "cam", Spec: eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
		Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/cam:1"}}}}}}
	if err := s.CreateEdgeWorkload(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	analyzed := func(table string) int64 {
		t.Helper()
		var n int64
		if err := s.db.QueryRowContext(t.Context(), "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = $1", table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	set := func(hosts []string) {
		t.Helper()
		var ch []eim.EdgeWorkloadTarget
		for _, h := range hosts {
			ch = append(ch, eim.EdgeWorkloadTarget{Workload: "cam", HostID: h, Revision: 1})
		}
		if err := s.SetEdgeWorkloadTargets(t.Context(), "p", ch); err != nil {
			t.Fatal(err)
		}
	}
	set(hosts[:firstAnalyze-1])
	for _, table := range []string{"edge_workload_targets", "edge_devices"} {
		if got := analyzed(table); got != 0 {
			t.Fatalf("analyze_count of %s after %d targets: got %d, want 0", table, firstAnalyze-1, got)
		}
	}
	set(hosts[firstAnalyze-1:])
	deadline := time.Now().Add(20 * time.Second)
	for analyzed("edge_workload_targets") == 0 || analyzed("edge_devices") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("analyze_count after %d targets: edge_workload_targets %d, edge_devices %d; want both > 0",
				firstAnalyze, analyzed("edge_workload_targets"), analyzed("edge_devices"))
		}
		if _, err := s.db.ExecContext(t.Context(), "SELECT pg_stat_clear_snapshot(), pg_sleep(0.05)"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInsertTable(t *testing.T) {
	for _, tt := range []struct {
		q, table string
		ok       bool
	}{
		{"INSERT INTO edge_devices (project) VALUES (?)", "edge_devices", true},
		{"insert into edge_workload_status(project) VALUES (?)", "edge_workload_status", true},
		{"UPDATE edge_devices SET version = 1", "", false},
		{"INSERT INTO ", "", false},
		{"SELECT 1", "", false},
	} {
		table, ok := insertTable(tt.q)
		if table != tt.table || ok != tt.ok {
			t.Errorf("insertTable(%q): got %q %v, want %q %v", tt.q, table, ok, tt.table, tt.ok)
		}
	}
}
