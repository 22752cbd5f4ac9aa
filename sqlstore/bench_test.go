package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
)

// Benchmarks run per engine: SQLite in a temp file, PostgreSQL when
// EIM_TEST_POSTGRES_URL is set. The 100k-host fixture is built once per
// engine per run (it takes a while) and shared by the read benchmarks.

const fleetSize = 100_000

type fleet struct {
	s      *sqlstore.Store
	ids    []string
	sites  []string
	region string
}

var (
	fleetsMu sync.Mutex
	fleets   = map[string]*fleet{}
	// fleetCleanups run in TestMain after every benchmark.
	fleetCleanups []func()
)

// closeFleets closes the shared fixtures; TestMain calls it.
func closeFleets() {
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	for i := len(fleetCleanups) - 1; i >= 0; i-- {
		fleetCleanups[i]()
	}
	fleetCleanups, fleets = nil, map[string]*fleet{}
}

// engines returns, per engine, a function opening a fresh store. With
// shared set, the store outlives the calling benchmark (closeFleets ends
// it); otherwise it ends with tb.
func engines() map[string]func(tb testing.TB, shared bool) *sqlstore.Store {
	out := map[string]func(testing.TB, bool) *sqlstore.Store{
		"sqlite": func(tb testing.TB, shared bool) *sqlstore.Store {
			dir := ""
			if shared {
				d, err := os.MkdirTemp("", "eim-bench-*")
				if err != nil {
					tb.Fatal(err)
				}
				fleetCleanups = append(fleetCleanups, func() { os.RemoveAll(d) })
				dir = d
			} else {
				dir = tb.TempDir()
			}
			return openBench(tb, shared, filepath.Join(dir, "eim.db"))
		},
	}
	if base := os.Getenv("EIM_TEST_POSTGRES_URL"); base != "" {
		out["postgres"] = func(tb testing.TB, shared bool) *sqlstore.Store {
			if !shared {
				return openBench(tb, false, sqlstore.FreshPostgresURL(tb))
			}
			u, drop, err := sqlstore.NewPostgresDB(base)
			if err != nil {
				tb.Fatal(err)
			}
			fleetCleanups = append(fleetCleanups, func() { drop() })
			return openBench(tb, true, u)
		}
	}
	return out
}

func openBench(tb testing.TB, shared bool, dsn string) *sqlstore.Store {
	s, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if shared {
		fleetCleanups = append(fleetCleanups, func() { s.Close() })
	} else {
		tb.Cleanup(func() { s.Close() })
	}
	return s
}

// getFleet returns the engine's store with fleetSize hosts over 100 sites
// in project "bench", building it on first use.
func getFleet(b *testing.B, engine string, open func(testing.TB, bool) *sqlstore.Store) *fleet {
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	if f := fleets[engine]; f != nil {
		return f
	}
	b.Logf("building %d hosts on %s", fleetSize, engine)
	s := open(b, true)
	ctx := context.Background()
	if err := s.CreateProject(ctx, &eim.Project{Name: "bench", ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	f := &fleet{s: s}
	err := s.Update(ctx, "bench", func(tx eim.Tx) error {
		region := &eim.Region{Name: "region"}
		if err := tx.Create(ctx, region); err != nil {
			return err
		}
		f.region = region.ResourceID
		for i := range 100 {
			site := &eim.Site{Name: fmt.Sprint("site", i), RegionID: region.ResourceID}
			if err := tx.Create(ctx, site); err != nil {
				return err
			}
			f.sites = append(f.sites, site.ResourceID)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	states := []eim.HostState{eim.HostStateOnboarded, eim.HostStateRegistered, eim.HostStateUntrusted}
	for start := 0; start < fleetSize; start += 5000 {
		err := s.Update(ctx, "bench", func(tx eim.Tx) error {
			for i := start; i < start+5000; i++ {
				h := benchHost(i)
				h.SiteID = f.sites[i%len(f.sites)]
				h.DesiredState = states[i%len(states)]
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
				f.ids = append(f.ids, h.ResourceID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := sqlstore.Analyze(s); err != nil {
		b.Fatal(err)
	}
	fleets[engine] = f
	return f
}

func benchHost(i int) *eim.Host {
	return &eim.Host{
		Name: fmt.Sprint("host", i), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i), SerialNumber: fmt.Sprintf("SN%08d", i),
		CPUModel: "Intel(R) Xeon(R) Gold 6338N", CPUCores: 32, MemoryBytes: 64 << 30,
		HostStatus: "Running", OnboardingStatus: "Onboarded",
		Metadata: eim.Metadata{{Key: "rack", Value: fmt.Sprint(i % 40)}},
	}
}

// BenchmarkCreateHost: one host per transaction, from 32 goroutines.
func BenchmarkCreateHost(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			s := open(b, false)
			ctx := context.Background()
			if err := s.CreateProject(ctx, &eim.Project{Name: "bench", ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			var (
				mu sync.Mutex
				n  int
			)
			b.SetParallelism(16) // 2 cores × 16 = 32 writers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					n++
					i := n
					mu.Unlock()
					if err := s.Update(ctx, "bench", func(tx eim.Tx) error { return tx.Create(ctx, benchHost(i)) }); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGetHost: one host by ID in a project-scoped read, 100k hosts.
func BenchmarkGetHost(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			f := getFleet(b, name, open)
			ctx := context.Background()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				id := f.ids[(i*7919)%len(f.ids)]
				i++
				err := f.s.View(ctx, "bench", func(tx eim.Tx) error {
					_, err := tx.Get(ctx, eim.KindHost, id)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListHostsFiltered: a page of 20 hosts of one site in one state,
// ordered by name, with the total, among 100k hosts.
func BenchmarkListHostsFiltered(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			f := getFleet(b, name, open)
			ctx := context.Background()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				site := f.sites[i%len(f.sites)]
				i++
				q := eim.Query{
					Filter:  fmt.Sprintf("desiredState=HOST_STATE_ONBOARDED AND siteId=%q", site),
					OrderBy: "name",
					Limit:   20,
				}
				err := f.s.View(ctx, "bench", func(tx eim.Tx) error {
					items, total, err := tx.List(ctx, eim.KindHost, q)
					if err == nil && (len(items) != 20 || total < 300) {
						err = fmt.Errorf("got %d items, total %d", len(items), total)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListHostsPage: a page of 100 hosts in ID order with the total
// (which needs a COUNT), among 100k hosts, per filter of the API benchmark.
func BenchmarkListHostsPage(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			f := getFleet(b, name, open)
			ctx := context.Background()
			filters := []struct{ name, filter string }{
				{"all", ""},
				{"state", "desiredState=HOST_STATE_ONBOARDED"},
				{"region", fmt.Sprintf("site.region.resourceId=%q", f.region)},
				{"site", fmt.Sprintf("siteId=%q", f.sites[7])},
			}
			for _, fl := range filters {
				b.Run(fl.name, func(b *testing.B) {
					q := eim.Query{Filter: fl.filter, Limit: 100, Offset: 200}
					for b.Loop() {
						err := f.s.View(ctx, "bench", func(tx eim.Tx) error {
							items, total, err := tx.List(ctx, eim.KindHost, q)
							if err == nil && (len(items) != 100 || total < 1000) {
								err = fmt.Errorf("got %d items, total %d", len(items), total)
							}
							return err
						})
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkGetBMCAbsent: the BMC of a host that has none (what the oob
// module asks of every host it follows): a one-row lookup whose cost is
// mostly the statement's, prepared or not.
func BenchmarkGetBMCAbsent(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			s := open(b, false)
			ctx := context.Background()
			if err := s.CreateProject(ctx, &eim.Project{Name: "bench", ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.GetBMC(ctx, "bench", "host-00000000"); eim.ErrorCode(err) != eim.ENOTFOUND {
					b.Fatalf("GetBMC: got %v, want not found", err)
				}
			}
		})
	}
}
