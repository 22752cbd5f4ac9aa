package ui_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/exporter"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/ui"
)

// BenchmarkMemoryPerHost reports the heap in use per host (HeapInuse
// after a GC, before and after) of what a process keeps per host for the
// nodes and the UI: the host view and the UI's summary of the fleet, a
// projection over it; loaded from a store seeded as BenchmarkPages seeds
// it (EIM_BENCH_HOSTS, default 100,000; EIM_BENCH_DB to keep it);
// EIM_BENCH_HEAPDIR=DIR writes each case's heap profile there.
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
	for _, parts := range []string{"view", "view+ui", "view+ui+exporter"} {
		b.Run(parts, func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(memoryPerHost(b, e, path, parts)/float64(n), "heap-B/host")
			}
		})
	}
}

// memoryPerHost returns the heap in use that the parts (a host view, the
// UI over it, the exporter over it) take once loaded from the store at
// path.
func memoryPerHost(b *testing.B, e *env, path, parts string) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlstore.Open(ctx, path, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := hostview.New(hostview.Options{Store: st})
	var h *ui.Handler
	if strings.Contains(parts, "ui") {
		if h, err = ui.New(e.inv, tokens{}, ui.Options{Store: st, Hosts: v}); err != nil {
			b.Fatal(err)
		}
	}
	var exp *exporter.Service
	if strings.Contains(parts, "exporter") {
		exp = exporter.New(exporter.Options{Store: st, Hosts: v, PerHost: true})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { v.Run(ctx) })
	if h != nil {
		wg.Go(func() { h.Run(ctx) })
	}
	if exp != nil {
		wg.Go(func() { exp.Run(ctx) })
	}
	deadline := time.Now().Add(5 * time.Minute)
	for !loaded(v, h, exp) {
		if time.Now().After(deadline) {
			b.Fatal("not loaded after 5 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if exp != nil {
		// The compressed per-host series, as the first scrape leaves them.
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Header.Set("Accept-Encoding", "gzip")
		exp.ServeHTTP(httptest.NewRecorder(), r)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if dir := os.Getenv("EIM_BENCH_HEAPDIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(parts, "+", "-")+".heap"))
		if err != nil {
			b.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	runtime.KeepAlive(v)
	runtime.KeepAlive(h)
	runtime.KeepAlive(exp)
	return float64(after.HeapInuse) - float64(before.HeapInuse)
}

// loaded reports whether the parts have loaded the fleet.
func loaded(v *hostview.View, h *ui.Handler, exp *exporter.Service) bool {
	return v.Primed() && (h == nil || h.Live()) && (exp == nil || exp.Loaded())
}
