package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
)

// TestTransactionMetrics: reads and writes are timed by mode, a failed
// one too.
func TestTransactionMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	count := func(mode string) uint64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "eim_store_transaction_duration_seconds" {
				for _, m := range f.Metric {
					if m.Label[0].GetValue() == mode {
						return m.Histogram.GetSampleCount()
					}
				}
			}
		}
		return 0
	}
	reads, writes := count("read"), count("write")
	for range 3 {
		if err := st.View(ctx, "", func(eim.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	if err := st.Update(ctx, "", func(eim.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update: got %v, want boom", err)
	}
	if got := count("read") - reads; got != 3 {
		t.Errorf("read transactions timed: got %d, want 3", got)
	}
	if got := count("write") - writes; got != 1 {
		t.Errorf("write transactions timed: got %d, want 1", got)
	}
}
