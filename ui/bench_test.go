package ui_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// BenchmarkPages renders UI pages server-side (the handler called in
// process: template, queries, SQLite) over a fleet of EIM_BENCH_HOSTS
// hosts (default 100,000) with their instances, seeded straight into the
// store as bench/seed leaves a fleet after Day 0, with a share in each
// other state. It reports p50 and p99 per page and the page's weight
// with its script and style sheet.
//
//	go test -run '^$' -bench Pages -benchtime 200x ./ui
//
// EIM_BENCH_DB=FILE keeps the seeded database there and reuses it on the
// next run (seeding 100,000 hosts takes a minute or two).
func BenchmarkPages(b *testing.B) {
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
		start := time.Now()
		seedFleet(b, e, n)
		b.Logf("seeded %d hosts with instances in %s", n, time.Since(start).Round(time.Millisecond))
		// Measure as a server started on the fleet would: the store opened
		// afresh (its statistics gathered at open).
		e.close()
		e = newEnvAt(b, proj, path)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	e.live()
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("the fleet summary loaded %d hosts in %s, %.1f MB of heap", n, took.Round(time.Millisecond), float64(after.HeapAlloc-before.HeapAlloc)/1e6)
	assets := len(e.get(tokAdmin, "/ui/static/app.js").Body.Bytes()) + len(e.get(tokAdmin, "/ui/static/app.css").Body.Bytes())
	for _, pg := range []struct{ name, path string }{
		{"hosts/site-filter", "/ui/p/acme/hosts?filter=" + url.QueryEscape(`site.name="site-042"`)},
		{"hosts/failed", "/ui/p/acme/hosts?state=failed"},
		{"hosts/provisioned-tab", "/ui/p/acme/hosts?tab=provisioned"},
		{"hosts/sorted-desc-page-20", "/ui/p/acme/hosts?sort=serial&dir=desc&offset=1000"},
		{"hosts/search", "/ui/p/acme/hosts?q=node-04213"},
		{"hosts/search-broad", "/ui/p/acme/hosts?q=node-01"},
		{"hosts/region-subtree", "/ui/p/acme/hosts?region=REGION"},
		{"overview", "/ui/p/acme/"},
		{"locations", "/ui/p/acme/locations"},
	} {
		if strings.Contains(pg.path, "REGION") {
			rs, err := e.inv.List(context.Background(), proj, eim.KindRegion, inventory.ListQuery{Filter: `name="bench"`})
			if err != nil || len(rs.Items) != 1 {
				b.Fatalf("the bench region: %v", err)
			}
			pg.path = strings.Replace(pg.path, "REGION", rs.Items[0].Base().ResourceID, 1)
		}
		b.Run(pg.name, func(b *testing.B) {
			var took []time.Duration
			size := 0
			cpu0 := cpuTime()
			for b.Loop() {
				t0 := time.Now()
				w := e.get(tokAdmin, pg.path)
				took = append(took, time.Since(t0))
				if w.Code != 200 {
					b.Fatalf("%s: %d %.500s", pg.path, w.Code, w.Body.String())
				}
				size = w.Body.Len()
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(took)), "cpu-ms/op")
			slices.Sort(took)
			pct := func(p float64) float64 {
				return float64(took[min(len(took)-1, int(float64(len(took))*p))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(size+assets)/1024, "KB-with-assets")
		})
	}
}

// seedFleet writes n hosts with their instances, 2,000 a transaction,
// spread over 100 sites of one region: mostly running, 2 % "No
// Connection", 1 % failed provisioning, 1 % provisioning, 5 % updating.
func seedFleet(b testing.TB, e *env, n int) {
	ctx := context.Background()
	osr, err := e.inv.Create(ctx, proj, &eim.OS{Name: "bench-os", ProfileName: "bench-os", Architecture: "x86_64",
		ImageURL: "http://127.0.0.1/bench.img", Sha256: strings.Repeat("0", 64)})
	if err != nil {
		b.Fatal(err)
	}
	region, err := e.inv.Create(ctx, proj, &eim.Region{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var sites []string
	for i := range 100 {
		s, err := e.inv.Create(ctx, proj, &eim.Site{Name: fmt.Sprintf("site-%03d", i), RegionID: region.Base().ResourceID})
		if err != nil {
			b.Fatal(err)
		}
		sites = append(sites, s.Base().ResourceID)
	}
	ts := uint64(time.Now().Unix())
	st := e.inv.Store()
	for from := 0; from < n; from += 2000 {
		err := st.Update(ctx, proj, func(tx eim.Tx) error {
			for i := from; i < min(from+2000, n); i++ {
				name := fmt.Sprintf("node-%06d", i)
				h, err := inventory.NewRegisteredHost(inventory.HostRegistration{Name: name, SerialNumber: fmt.Sprintf("SN%08d", i),
					UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), AutoOnboard: true})
				if err != nil {
					return err
				}
				h.SiteID, h.Hostname = sites[i%len(sites)], name
				h.RegistrationStatus, h.RegistrationStatusIndicator, h.RegistrationStatusTimestamp = "Host is Registered", eim.StatusIdle, ts
				h.OnboardingStatus, h.OnboardingStatusIndicator, h.OnboardingStatusTimestamp, h.CurrentState = "Onboarded", eim.StatusIdle, ts+1, eim.HostStateOnboarded
				h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = "Running", eim.StatusIdle, ts+uint64(i%3600)
				if i%50 == 1 {
					h.HostStatus, h.HostStatusIndicator = "No Connection", eim.StatusError
				}
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
				in, err := inventory.NewInstance(&eim.Instance{Meta: eim.Meta{Project: proj}, Kind: eim.InstanceKindMetal, Name: name,
					HostID: h.ResourceID, OSID: osr.Base().ResourceID})
				if err != nil {
					return err
				}
				switch {
				case i%100 == 2:
					in.ProvisioningStatus, in.ProvisioningStatusIndicator = "Provisioning Failed: 2/7 stream-image: sha256 mismatch", eim.StatusError
				case i%100 == 3:
					in.ProvisioningStatus, in.ProvisioningStatusIndicator = "Provisioning In Progress: 3/7 stream-image", eim.StatusInProgress
				default:
					in.ProvisioningStatus, in.ProvisioningStatusIndicator, in.ProvisioningStatusTimestamp = "Provisioned", eim.StatusIdle, ts+uint64(60+i%1200)
					in.CurrentState, in.InstanceStatus, in.InstanceStatusTimestamp = eim.InstanceStateRunning, "Running", ts+uint64(120+i%1200)
				}
				if i%20 == 5 {
					in.UpdateStatus, in.UpdateStatusIndicator = "Downloading artifacts", eim.StatusInProgress
				}
				if err := tx.Create(ctx, in); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system time: a page's cost when
// other work shares the machine's cores (wall times then include waits
// for a core).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
