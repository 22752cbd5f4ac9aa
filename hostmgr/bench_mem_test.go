package hostmgr_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/eimhq/eim/hostview"
)

// BenchmarkHeartbeatMemory reports the heap in use per host (HeapInuse
// after a GC) of what a heartbeating all-in-one process keeps per host
// for its nodes, in two steps: the host view once it has read the fleet
// ahead with the instances (as it does under the UI's and the
// exporter's projections, here an empty one), then what the first
// heartbeats of every node add — the liveness tracker, the verified
// node tokens, telemetry's and maintenance's memos and maintenance's
// instance facts. Every host of the fleet (EIM_BENCH_HOSTS, default
// 100,000) beats until the heartbeats no longer read the store. EIM_BENCH_HEAPDIR=DIR
// writes the heap profile at the end.
//
//	go test -run '^$' -bench HeartbeatMemory -benchtime 1x ./hostmgr
func BenchmarkHeartbeatMemory(b *testing.B) {
	n := 100_000
	if v := os.Getenv("EIM_BENCH_HOSTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("EIM_BENCH_HOSTS=%q: want a positive number", v)
		}
	}
	f := newBenchFleet(b, n)
	reqs := f.requests(b)
	ctx := b.Context()
	for b.Loop() {
		var before, viewed, beaten runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st := &readCounter{Store: f.store}
		m := newBenchModules(f, st)
		m.view.Project(func(old, new *hostview.Host) {})
		stop := m.run()
		deadline := time.Now().Add(10 * time.Minute)
		for !m.view.Primed() || !m.hosts.Restored() {
			if time.Now().After(deadline) {
				b.Fatal("the view did not read the fleet in 10 minutes")
			}
			time.Sleep(10 * time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&viewed)
		// Rounds until the heartbeats no longer read the store (the
		// loops' own reads, the feed's and the checker's, go on
		// meanwhile: at most one in a hundred heartbeats).
		for round := 0; ; round++ {
			txs := st.txs.Load()
			for _, req := range reqs {
				if _, err := m.call(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			if st.txs.Load()-txs < int64(n/100) {
				break
			}
			if round == 10 {
				b.Fatal("heartbeats still read the store after 10 rounds")
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&beaten)
		if dir := os.Getenv("EIM_BENCH_HEAPDIR"); dir != "" {
			f, err := os.Create(filepath.Join(dir, "heartbeat.heap"))
			if err != nil {
				b.Fatal(err)
			}
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		if m.hosts.Tracked() != n {
			b.Fatalf("the tracker holds %d hosts, want %d", m.hosts.Tracked(), n)
		}
		per := func(a, z runtime.MemStats) float64 { return (float64(z.HeapInuse) - float64(a.HeapInuse)) / float64(n) }
		b.ReportMetric(per(before, viewed), "view-B/host")
		b.ReportMetric(per(viewed, beaten), "beats-B/host")
		b.ReportMetric(per(before, beaten), "heap-B/host")
		runtime.KeepAlive(m)
		stop()
	}
}
