package tenant_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/tenant"
)

// BenchmarkCascade deletes a project of benchRegions regions and
// benchHosts onboarded hosts (every other one with an instance), with the
// deleter and the reaper as the server runs them, while another project
// is written to (a region created and deleted, over and over). It reports
// how long the deletion took and the latency of the other project's
// writes during it and before it (the baseline). Run it with
// -benchtime=1x; EIM_TEST_POSTGRES_URL adds PostgreSQL.
func BenchmarkCascade(b *testing.B) {
	for _, engine := range engines() {
		b.Run(engine, func(b *testing.B) {
			for range b.N {
				benchCascade(b, engine)
			}
		})
	}
}

const (
	benchRegions = 1000
	benchHosts   = 500
)

func benchCascade(b *testing.B, engine string) {
	b.StopTimer()
	dsn := filepath.Join(b.TempDir(), "eim.db")
	if engine == "postgres" {
		dsn = storetest.PostgresURL(b)
	}
	st, err := sqlstore.Open(b.Context(), dsn, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e := &env{t: b, ctx: b.Context(), store: st, inv: inventory.New(st, inventory.Options{})}
	e.project("big")
	e.project("other")
	e.fill("big", benchHosts)
	for i := range benchRegions {
		e.create("big", &eim.Region{Name: fmt.Sprintf("r%d", i)})
	}
	write := func(i int) time.Duration {
		start := time.Now()
		r := e.create("other", &eim.Region{Name: fmt.Sprintf("o%d", i)})
		if err := e.inv.Delete(e.ctx, "other", eim.KindRegion, r.Base().ResourceID); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var baseline []time.Duration
	for i := range 200 {
		baseline = append(baseline, write(i))
	}

	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, run := range []func(context.Context) error{
		inventory.NewReaper(e.inv, inventory.ReaperOptions{}).Run,
		tenant.NewDeleter(tenant.Options{Store: st, Inventory: e.inv, Logger: benchLog()}).Run,
	} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	b.StartTimer()
	start := time.Now()
	if _, err := e.inv.StartProjectDeletion(e.ctx, "big", true); err != nil {
		b.Fatal(err)
	}
	var during []time.Duration
	for i := 0; ; i++ {
		if _, err := st.FindProject(e.ctx, "big"); eim.ErrorCode(err) == eim.ENOTFOUND {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatal("not deleted within 5 minutes")
		}
		during = append(during, write(i))
	}
	took := time.Since(start)
	b.StopTimer()
	b.ReportMetric(took.Seconds(), "s/cascade")
	b.ReportMetric(ms(pct(during, 50)), "during-p50-ms")
	b.ReportMetric(ms(pct(during, 99)), "during-p99-ms")
	b.ReportMetric(ms(pct(during, 100)), "during-max-ms")
	b.ReportMetric(ms(pct(baseline, 50)), "before-p50-ms")
	b.ReportMetric(ms(pct(baseline, 99)), "before-p99-ms")
	if os.Getenv("EIM_BENCH_VERBOSE") != "" {
		b.Logf("%s: cascade %v; other project's writes during: %d", engine, took, len(during))
	}
}

// benchLog shows the deleter's phases when EIM_BENCH_VERBOSE is set.
func benchLog() *slog.Logger {
	if os.Getenv("EIM_BENCH_VERBOSE") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
