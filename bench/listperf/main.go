// Command listperf stores a fleet directly through the store and times the
// inventory's list of each filter shape in-process (no HTTP), and the count
// alone, to see where list latency goes. Not a benchmark of record: see
// bench/run.sh.
//
//	go run ./bench/listperf [-db postgres://…] [-hosts 100000] [-n 200] [-explain]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

func main() {
	dsn := flag.String("db", "", "database (default: a SQLite file in a temp dir)")
	n := flag.Int("hosts", 100000, "hosts")
	reps := flag.Int("n", 200, "requests per shape")
	plan := flag.Bool("explain", false, "print SQLite's query plans of the page and count statements first")
	flag.Parse()
	ctx := context.Background()
	if *dsn == "" {
		dir, _ := os.MkdirTemp("", "listperf")
		defer os.RemoveAll(dir)
		*dsn = filepath.Join(dir, "eim.db")
	}
	st, err := sqlstore.Open(ctx, *dsn, sqlstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	inv := inventory.New(st, inventory.Options{})
	proj := fmt.Sprintf("lp%d", time.Now().Unix()%100000)
	if _, err := inv.CreateProject(ctx, proj, ""); err != nil {
		log.Fatal(err)
	}
	reg, err := inv.Create(ctx, proj, &eim.Region{Name: "r"})
	if err != nil {
		log.Fatal(err)
	}
	var sites []string
	for i := range 100 {
		s, err := inv.Create(ctx, proj, &eim.Site{Name: fmt.Sprintf("s%d", i), RegionID: reg.Base().ResourceID})
		if err != nil {
			log.Fatal(err)
		}
		sites = append(sites, s.Base().ResourceID)
	}
	t0 := time.Now()
	for i := 0; i < *n; i += 1000 {
		err := st.Update(ctx, proj, func(tx eim.Tx) error {
			for j := i; j < i+1000 && j < *n; j++ {
				h := &eim.Host{Name: fmt.Sprintf("bench-%d", j), SiteID: sites[j%100], DesiredState: eim.HostStateOnboarded,
					UUID: fmt.Sprintf("6f1b2c3d-0000-4000-8000-%012d", j)}
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("stored %d hosts in %s", *n, time.Since(t0))
	if *plan && !strings.HasPrefix(*dsn, "postgres") {
		explain(*dsn, "SELECT id FROM hosts WHERE project = ? ORDER BY id LIMIT 100 OFFSET 900",
			"SELECT count(*) FROM hosts WHERE project = ?")
	}
	shapes := []struct{ name, filter string }{
		{"no filter", ""},
		{"site", fmt.Sprintf("site.resourceId=%q", sites[0])},
		{"region nested", fmt.Sprintf("site.region.resourceId=%q", reg.Base().ResourceID)},
		{"state all", "desiredState=HOST_STATE_ONBOARDED"},
		{"state+site", fmt.Sprintf("desiredState=HOST_STATE_ONBOARDED AND site.resourceId=%q", sites[1])},
		{"substring", `name="bench-1234*"`},
	}
	for _, sh := range shapes {
		var ds []time.Duration
		for i := range *reps {
			t := time.Now()
			if _, err := inv.List(ctx, proj, eim.KindHost, inventory.ListQuery{Filter: sh.filter, PageSize: 100, Offset: (i % 10) * 100}); err != nil {
				log.Fatal(err)
			}
			ds = append(ds, time.Since(t))
			if sh.name == "substring" && i > 20 {
				break
			}
		}
		sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
		var cs []time.Duration
		for range 30 {
			t := time.Now()
			err := st.View(ctx, proj, func(tx eim.Tx) error {
				_, err := tx.Count(ctx, eim.KindHost, eim.Query{Filter: sh.filter})
				return err
			})
			if err != nil {
				log.Fatal(err)
			}
			cs = append(cs, time.Since(t))
		}
		sort.Slice(cs, func(a, b int) bool { return cs[a] < cs[b] })
		fmt.Printf("%-14s p50 %6.2f ms  p99 %6.2f ms   count alone p50 %6.2f ms\n", sh.name, ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100]), ms(cs[len(cs)/2]))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
