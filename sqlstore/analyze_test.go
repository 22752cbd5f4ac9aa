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
