package workloads_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReconcileStored measures one whole reconcile of the targets
// loop over a stored project (EIM_BENCH_DB: a SQLite file, e.g. one kept
// by bench/workloads.sh; EIM_BENCH_PROJECT, default "default"), with
// nothing to change: the cost of a re-list, or of a wake-up, in steady
// state.
func BenchmarkReconcileStored(b *testing.B) {
	db := os.Getenv("EIM_BENCH_DB")
	if db == "" {
		b.Skip("EIM_BENCH_DB names no stored fleet")
	}
	p := os.Getenv("EIM_BENCH_PROJECT")
	if p == "" {
		p = "default"
	}
	// A copy: the environment makes a project of its own in the store.
	cp := filepath.Join(b.TempDir(), "eim.db")
	in, err := os.Open(db)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(cp)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, cp, nil)
	e.reconcile(p)
	b.ResetTimer()
	for range b.N {
		e.reconcile(p)
	}
}
