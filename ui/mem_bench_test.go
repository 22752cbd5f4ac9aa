package ui_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/ui"
)

// BenchmarkMemoryPerHost reports the heap in use per host (HeapInuse
// after a GC, before and after) of what a process keeps per host for the
// nodes and the UI: the host view and the UI's summary of the fleet, a
// projection over it; loaded from a store seeded as BenchmarkPages seeds
// it (EIM_BENCH_HOSTS, default 100,000; EIM_BENCH_DB to keep it).
//
//	EIM_BENCH_DB=/tmp/fleet.db go test -run '^$' -bench MemoryPerHost -benchtime 1x ./ui
func BenchmarkMemoryPerHost(b *testing.B) {
	n := 100_000
	if v := os.Getenv("EIM_BENCH_HOSTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("EIM_BENCH_HOSTS=%q: want a positive number", v)
		}
	}
	path := os.Getenv("EIM_BENCH_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "eim.db")
	}
	e := newEnvAt(b, proj, path)
	if total, err := e.inv.CountHosts(context.Background(), proj, []string{""}); err != nil || total[0] != n {
		if err == nil && total[0] != 0 {
			b.Fatalf("EIM_BENCH_DB holds %d hosts, not %d: remove it", total[0], n)
		}
		seedFleet(b, e, n)
	}
	e.close()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := sqlstore.Open(ctx, path, sqlstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := hostview.New(hostview.Options{Store: st})
		h, err := ui.New(e.inv, tokens{}, ui.Options{Store: st, Hosts: v})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { h.Run(ctx) })
		wg.Go(func() { v.Run(ctx) })
		deadline := time.Now().Add(5 * time.Minute)
		for !h.Live() {
			if time.Now().After(deadline) {
				b.Fatal("the view is not live and whole after 5 minutes")
			}
			time.Sleep(10 * time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(n), "heap-B/host")
		runtime.KeepAlive(h)
		cancel()
		wg.Wait()
		st.Close()
	}
}
