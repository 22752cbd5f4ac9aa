package exporter_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/exporter"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkScrape: a scrape of a fleet of EIM_BENCH_HOSTS hosts (default
// 100,000) with their instances, seeded straight into a SQLite store as
// bench/seed does, over loopback HTTP with gzip as Prometheus asks:
// aggregates only (--exporter-per-host=false) and with the per-host
// series: as a scrape finds them when nothing changed since the last
// (per-host: the compressed series are reused) and when every host did
// (per-host-cold: all compressed again). "load" is the snapshot's full
// read (at start, and after the feed failed), with the host view of its
// own that it is a projection over (in a server, the process's). MB-snapshot
// includes that view (which the process shares with its other modules)
// and the compressed series once the first scrape made them.
//
//	go test -run '^$' -bench Scrape -benchtime 5x ./exporter
func BenchmarkScrape(b *testing.B) {
	n := 100_000
	if v := os.Getenv("EIM_BENCH_HOSTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("EIM_BENCH_HOSTS=%q: want a positive number", v)
		}
	}
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(b.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	seedFleet(b, st, n)
	b.Logf("seeded %d hosts with instances in %s", n, time.Since(start).Round(time.Millisecond))

	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			svc := exporter.New(exporter.Options{Store: st})
			runUntilLoaded(b, svc)()
		}
	})
	for _, c := range []struct {
		name    string
		perHost bool
		cold    bool
	}{{"aggregates", false, false}, {"per-host", true, false}, {"per-host-cold", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			svc := exporter.New(exporter.Options{Store: st, PerHost: c.perHost})
			stop := runUntilLoaded(b, svc)
			defer stop()
			srv := httptest.NewServer(svc)
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			// The first scrape compresses every host's series; the
			// following ones reuse them (nothing changed), unless cold
			// drops them before each scrape (every host changed).
			scrapeSize(b, hc, srv.URL, false)
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			var wire int64
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if c.cold {
					svc.DropCache()
				}
				wire, _ = scrapeSize(b, hc, srv.URL, false)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/scrape")
			_, text := scrapeSize(b, hc, srv.URL, true)
			b.ReportMetric(float64(wire)/1e6, "MB-gzip/scrape")
			b.ReportMetric(float64(text)/1e6, "MB-text/scrape")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB-snapshot")
		})
	}
}

// runUntilLoaded runs svc until its snapshot is loaded; the returned
// func stops it.
func runUntilLoaded(b *testing.B, svc *exporter.Service) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for !svc.Loaded() {
		select {
		case err := <-done:
			b.Fatalf("Run ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return func() {
		cancel()
		<-done
	}
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scrapeSize scrapes with gzip and returns the compressed size and, when
// asked (it costs the decompression), the uncompressed one.
func scrapeSize(b *testing.B, hc *http.Client, url string, inflate bool) (wire, text int64) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	cr := &countingReader{r: resp.Body}
	if !inflate {
		_, err := io.Copy(io.Discard, cr)
		if err != nil {
			b.Fatal(err)
		}
		return cr.n, 0
	}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		b.Fatal(err)
	}
	if text, err = io.Copy(io.Discard, zr); err != nil {
		b.Fatal(err)
	}
	return cr.n, text
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// seedFleet writes n hosts with their instances into the default
// project, 2,000 a transaction, as Day 0 leaves them (mostly running; a
// share in each other state), spread over 100 sites.
func seedFleet(b *testing.B, st eim.Store, n int) {
	ctx := context.Background()
	inv := inventory.New(st, inventory.Options{})
	const project = "bench"
	if _, err := inv.CreateProject(ctx, project, ""); err != nil {
		b.Fatal(err)
	}
	osr, err := inv.Create(ctx, project, &eim.OS{Name: "bench-os", ProfileName: "bench-os", Architecture: "x86_64",
		ImageURL: "http://127.0.0.1/bench.img", Sha256: strings.Repeat("0", 64)})
	if err != nil {
		b.Fatal(err)
	}
	region, err := inv.Create(ctx, project, &eim.Region{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var sites []string
	for i := range 100 {
		s, err := inv.Create(ctx, project, &eim.Site{Name: fmt.Sprintf("site-%03d", i), RegionID: region.Base().ResourceID})
		if err != nil {
			b.Fatal(err)
		}
		sites = append(sites, s.Base().ResourceID)
	}
	ts := uint64(time.Now().Unix())
	for from := 0; from < n; from += 2000 {
		err := st.Update(ctx, project, func(tx eim.Tx) error {
			for i := from; i < min(from+2000, n); i++ {
				name := fmt.Sprintf("node-%06d", i)
				h, err := inventory.NewRegisteredHost(inventory.HostRegistration{Name: name, SerialNumber: fmt.Sprintf("SN%08d", i),
					UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), AutoOnboard: true})
				if err != nil {
					return err
				}
				h.SiteID, h.Hostname = sites[i%len(sites)], name
				h.RegistrationStatus, h.RegistrationStatusTimestamp = "Host is Registered", ts
				h.OnboardingStatus, h.OnboardingStatusTimestamp, h.CurrentState = "Onboarded", ts+1, eim.HostStateOnboarded
				h.HostStatus = "Running"
				if i%50 == 1 {
					h.HostStatus = "No Connection"
				}
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
				in, err := inventory.NewInstance(&eim.Instance{Meta: eim.Meta{Project: project}, Kind: eim.InstanceKindMetal, Name: name,
					HostID: h.ResourceID, OSID: osr.Base().ResourceID})
				if err != nil {
					return err
				}
				switch {
				case i%100 == 2:
					in.ProvisioningStatus = "Provisioning Failed: 2/7 stream-image: sha256 mismatch"
				default:
					in.ProvisioningStatus, in.ProvisioningStatusTimestamp = "Provisioned", ts+uint64(60+i%1200)
					in.CurrentState, in.InstanceStatus, in.InstanceStatusTimestamp = eim.InstanceStateRunning, "Running", ts+uint64(120+i%1200)
				}
				if i%20 == 3 {
					in.UpdateStatus = "Downloading artifacts"
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
