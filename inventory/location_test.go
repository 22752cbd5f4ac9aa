package inventory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

func TestRegionTree(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		// A chain of 5 is allowed, a 6th level is not.
		var chain []*eim.Region
		parent := ""
		for i := range eim.MaxRegionDepth {
			r := e.region(fmt.Sprintf("r%d", i+1), parent)
			chain = append(chain, r)
			parent = r.ResourceID
		}
		_, err := e.svc.Create(e.ctx, e.proj, &eim.Region{Name: "r6", ParentID: parent})
		wantErr(t, err, eim.EPRECONDITION, "parentId: regions nest at most 5 levels deep")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.Region{Name: "x", ParentID: "region-0000beef"})
		wantErr(t, err, eim.ENOTFOUND, "parentId: region-0000beef not found")

		move := func(id, parent string) error {
			_, err := e.svc.Update(e.ctx, e.proj, &eim.Region{Meta: eim.Meta{ResourceID: id}, ParentID: parent}, []string{"parentId"})
			return err
		}
		// Cycles.
		wantErr(t, move(chain[0].ResourceID, chain[3].ResourceID), eim.EINVALID, "cycle")
		wantErr(t, move(chain[0].ResourceID, chain[0].ResourceID), eim.EINVALID, "own parent")
		// Re-parenting counts the region's descendants: a 2-level branch
		// under the 4th level would make 6.
		other := e.region("other", "")
		e.region("other-child", other.ResourceID)
		wantErr(t, move(other.ResourceID, chain[3].ResourceID), eim.EPRECONDITION, "would be 6 levels deep")
		noErr(t, move(other.ResourceID, chain[2].ResourceID))
		// Detaching is always fine.
		noErr(t, move(other.ResourceID, ""))
	})
}

func TestExpansion(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		md := func(kv ...string) eim.Metadata {
			var m eim.Metadata
			for i := 0; i < len(kv); i += 2 {
				m = append(m, eim.MetadataItem{Key: kv[i], Value: kv[i+1]})
			}
			return m
		}
		root := e.region("root", "", md("env", "prod", "geo", "eu")...)
		sub := e.region("sub", root.ResourceID, md("geo", "de", "team", "a")...)
		site := e.site("berlin", sub.ResourceID, md("team", "b")...)
		h := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: site.ResourceID, Metadata: md("env", "dev")}).(*eim.Host)
		o := e.os("ubuntu")
		la := e.create(&eim.LocalAccount{Username: "ops", SSHKey: sshKey}).(*eim.LocalAccount)
		in := e.create(&eim.Instance{HostID: h.ResourceID, OSID: o.ResourceID, LocalAccountID: la.ResourceID}).(*eim.Instance)

		asMap := func(m eim.Metadata) map[string]string {
			out := map[string]string{}
			for _, it := range m {
				out[it.Key] = it.Value
			}
			return out
		}
		eq := func(name string, got eim.Metadata, want map[string]string) {
			t.Helper()
			g := asMap(got)
			if len(g) != len(want) || len(got) != len(want) {
				t.Errorf("%s: got %v, want %v", name, got, want)
				return
			}
			for k, v := range want {
				if g[k] != v {
					t.Errorf("%s: got %v, want %v", name, got, want)
				}
			}
		}
		gr := e.get(eim.KindRegion, sub.ResourceID).(*eim.Region)
		// The resource's own keys are left out of what it inherits.
		eq("region inherited", gr.InheritedMetadata, map[string]string{"env": "prod"})
		if gr.AliasID != sub.ResourceID || gr.ParentRegion == nil || gr.ParentRegion.ResourceID != root.ResourceID {
			t.Errorf("region: got alias %q parent %+v", gr.AliasID, gr.ParentRegion)
		}
		eq("root inherited", e.get(eim.KindRegion, root.ResourceID).(*eim.Region).InheritedMetadata, map[string]string{})
		gs := e.get(eim.KindSite, site.ResourceID).(*eim.Site)
		eq("site inherited", gs.InheritedMetadata, map[string]string{"env": "prod", "geo": "de"})
		if gs.AliasID != site.ResourceID || gs.Region == nil || gs.Region.Name != "sub" {
			t.Errorf("site: got alias %q region %+v", gs.AliasID, gs.Region)
		}
		gh := e.get(eim.KindHost, h.ResourceID).(*eim.Host)
		eq("host inherited", gh.InheritedMetadata, map[string]string{"geo": "de", "team": "b"})
		eq("host own", gh.Metadata, map[string]string{"env": "dev"})
		if gh.Site == nil || gh.Site.Region == nil || gh.Site.Region.ResourceID != sub.ResourceID {
			t.Errorf("host.site.region: got %+v", gh.Site)
		}
		if gh.Instance == nil || gh.Instance.ResourceID != in.ResourceID || gh.Instance.OS == nil || gh.Instance.OS.Name != "ubuntu" {
			t.Errorf("host.instance(.os): got %+v", gh.Instance)
		}
		gi := e.get(eim.KindInstance, in.ResourceID).(*eim.Instance)
		if gi.AliasID != in.ResourceID || gi.Host == nil || gi.Host.ResourceID != h.ResourceID || gi.OS == nil ||
			gi.OS.AliasID != o.ResourceID || gi.LocalAccount == nil || gi.LocalAccount.AliasID != la.ResourceID {
			t.Errorf("instance: got alias %q host %v os %v account %v", gi.AliasID, gi.Host, gi.OS, gi.LocalAccount)
		}
		if gi.Host != nil && (gi.Host.Site == nil || gi.Host.Instance != nil) {
			t.Errorf("instance.host: got site %v instance %v, want site and no instance", gi.Host.Site, gi.Host.Instance)
		}
		sch := e.create(&eim.RepeatedSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 60,
			CronMinutes: "0", CronHours: "*", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetSiteID: site.ResourceID}).(*eim.RepeatedSchedule)
		if sch.AliasID != sch.ResourceID || sch.TargetSite == nil || sch.TargetSite.Name != "berlin" || sch.TargetHost != nil {
			t.Errorf("schedule: got alias %q site %v host %v", sch.AliasID, sch.TargetSite, sch.TargetHost)
		}
	})
}

func TestListPagingAndBatching(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		r := e.region("r", "")
		sites := []*eim.Site{e.site("s1", r.ResourceID), e.site("s2", r.ResourceID), e.site("s3", "")}
		o := e.os("ubuntu")
		for i := range 45 {
			h := e.host(fmt.Sprintf("h%02d", i), sites[i%3].ResourceID)
			if i%2 == 0 {
				e.instance(h.ResourceID, o.ResourceID)
			}
		}
		cases := []struct {
			size, offset  int
			wantN         int
			wantNext      bool
			code, message string
		}{
			{0, 0, 20, true, "", ""},
			{100, 0, 45, false, "", ""},
			{20, 40, 5, false, "", ""},
			{20, 25, 20, false, "", ""},
			{10, 30, 10, true, "", ""},
			{20, 50, 0, false, "", ""},
			{101, 0, 0, false, eim.EINVALID, "pageSize must be between 1 and 100"},
			{-1, 0, 0, false, eim.EINVALID, "pageSize must be between 1 and 100"},
			{10, 10001, 0, false, eim.EINVALID, "offset must be between 0 and 10000"},
			{10, -1, 0, false, eim.EINVALID, "offset"},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("size%d-offset%d", c.size, c.offset), func(t *testing.T) {
				p, err := e.svc.List(e.ctx, e.proj, eim.KindHost, inventory.ListQuery{PageSize: c.size, Offset: c.offset})
				if c.code != "" {
					wantErr(t, err, c.code, c.message)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Items) != c.wantN || p.HasNext != c.wantNext || p.Total != 45 {
					t.Fatalf("got %d items hasNext %v total %d, want %d %v 45", len(p.Items), p.HasNext, p.Total, c.wantN, c.wantNext)
				}
			})
		}

		// A page of hosts with sites, regions and instances costs a handful
		// of queries, not one per row.
		counting := &countingStore{Store: e.store}
		svc := inventory.New(counting, inventory.Options{})
		p := ok(svc.List(e.ctx, e.proj, eim.KindHost, inventory.ListQuery{PageSize: 100})).get(t)
		if counting.calls.Load() > 8 {
			t.Errorf("listing 45 hosts: got %d store calls, want ≤ 8", counting.calls.Load())
		}
		withInst := 0
		for _, it := range p.Items {
			h := it.(*eim.Host)
			if h.Site == nil {
				t.Fatalf("host %s: site not expanded", h.Name)
			}
			if h.Site.RegionID != "" && h.Site.Region == nil {
				t.Fatalf("host %s: site region not expanded", h.Name)
			}
			if h.Instance != nil {
				withInst++
				if h.Instance.OS == nil {
					t.Fatalf("host %s: instance OS not expanded", h.Name)
				}
			}
		}
		if withInst != 23 {
			t.Errorf("hosts with an instance: got %d, want 23", withInst)
		}
		counting.calls.Store(0)
		ok(svc.List(e.ctx, e.proj, eim.KindInstance, inventory.ListQuery{PageSize: 100})).get(t)
		if counting.calls.Load() > 10 {
			t.Errorf("listing instances: got %d store calls, want ≤ 10", counting.calls.Load())
		}

		regions := ok(e.svc.List(e.ctx, e.proj, eim.KindRegion, inventory.ListQuery{ShowTotalSites: true})).get(t)
		if got := regions.Items[0].(*eim.Region).TotalSites; got == nil || *got != 2 {
			t.Errorf("totalSites: got %v, want 2", got)
		}
		regions = ok(e.svc.List(e.ctx, e.proj, eim.KindRegion, inventory.ListQuery{})).get(t)
		if got := regions.Items[0].(*eim.Region).TotalSites; got != nil {
			t.Errorf("totalSites without showTotalSites: got %d, want nil", *got)
		}
		filtered := ok(e.svc.List(e.ctx, e.proj, eim.KindSite, inventory.ListQuery{Where: []eim.Cond{{Field: "regionId", Value: r.ResourceID}}})).get(t)
		if filtered.Total != 2 {
			t.Errorf("sites of region: got %d, want 2", filtered.Total)
		}
	})
}

// runTicking is run with a store whose clock moves 1 ms at each reading,
// so that resources created one after another have distinct creation
// times (the locations list orders by them, as the original by its row
// numbers).
func runTicking(t *testing.T, f func(t *testing.T, e *env)) {
	dsns := map[string]string{"sqlite": ""}
	if pgURL != "" {
		dsns["postgres"] = pgURL
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			if dsn == "" {
				dsn = filepath.Join(t.TempDir(), "eim.db")
			}
			start := time.Now()
			var ticks atomic.Int64
			st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{Now: func() time.Time {
				return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond)
			}})
			if err != nil {
				t.Fatalf("open store %s: %v", dsn, err)
			}
			t.Cleanup(func() { st.Close() })
			e := &env{t: t, ctx: context.Background(), store: st, svc: inventory.New(st, inventory.Options{})}
			e.proj = e.newProject()
			f(t, e)
		})
	}
}

func locationNodes(l *inventory.Locations) []string {
	var out []string
	for _, n := range l.Nodes {
		out = append(out, n.Type[len("RESOURCE_KIND_"):]+":"+n.Name+"<"+n.ParentID)
	}
	return out
}

// TestTotalSitesOfSubtree: showTotalSites counts the sites of a region and
// of every region below it, as the original did (a region whose one site is
// in a sub-region shows 1), also when the page holds only part of the tree.
func TestTotalSitesOfSubtree(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		eu := e.region("europe", "")
		de := e.region("germany", eu.ResourceID)
		by := e.region("bavaria", de.ResourceID)
		mu := e.region("munich", by.ResourceID)
		fr := e.region("france", eu.ResourceID)
		us := e.region("americas", "")
		e.site("berlin", de.ResourceID)
		e.site("munich-1", mu.ResourceID)
		e.site("munich-2", mu.ResourceID)
		e.site("lyon", fr.ResourceID)
		e.site("loose", "")
		want := map[string]int{eu.ResourceID: 4, de.ResourceID: 3, by.ResourceID: 2, mu.ResourceID: 2, fr.ResourceID: 1, us.ResourceID: 0}
		check := func(q inventory.ListQuery) {
			t.Helper()
			q.ShowTotalSites = true
			page := ok(e.svc.List(e.ctx, e.proj, eim.KindRegion, q)).get(t)
			for _, it := range page.Items {
				r := it.(*eim.Region)
				got := -1
				if r.TotalSites != nil {
					got = *r.TotalSites
				}
				if got != want[r.ResourceID] {
					t.Errorf("page %d+%d: region %s totalSites %d, want %d", q.Offset, q.PageSize, r.Name, got, want[r.ResourceID])
				}
			}
		}
		check(inventory.ListQuery{PageSize: 100})
		for off := 0; off < len(want); off++ {
			check(inventory.ListQuery{PageSize: 1, Offset: off})
			check(inventory.ListQuery{PageSize: 2, Offset: off})
		}
		check(inventory.ListQuery{Filter: `name="munich" OR name="europe"`})
	})
}

func TestLocations(t *testing.T) {
	runTicking(t, func(t *testing.T, e *env) {
		eu := e.region("Europe", "")
		de := e.region("Germany", eu.ResourceID)
		us := e.region("Americas", "")
		e.site("Berlin-1", de.ResourceID)
		e.site("Boston", us.ResourceID)
		e.site("Loose", "")

		cases := []struct {
			q         inventory.LocationQuery
			want      []string
			wantTotal int
		}{
			{inventory.LocationQuery{Name: "berl", ShowSites: true, ShowRegions: true},
				[]string{"SITE:Berlin-1<" + de.ResourceID, "REGION:Germany<" + eu.ResourceID, "REGION:Europe<"}, 1},
			{inventory.LocationQuery{Name: "ERMA", ShowRegions: true},
				[]string{"REGION:Germany<" + eu.ResourceID, "REGION:Europe<"}, 1},
			{inventory.LocationQuery{Name: "ERMA", ShowSites: true}, nil, 0},
			// The sites first (in creation order), then the regions.
			{inventory.LocationQuery{Name: "o", ShowSites: true},
				[]string{"SITE:Boston<" + us.ResourceID, "SITE:Loose<", "REGION:Americas<"}, 2},
			// Regions deepest first, each level in creation order.
			{inventory.LocationQuery{Name: "e"},
				[]string{"SITE:Berlin-1<" + de.ResourceID, "SITE:Loose<", "REGION:Germany<" + eu.ResourceID, "REGION:Europe<", "REGION:Americas<"}, 5},
			{inventory.LocationQuery{}, nil, 6},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%+v", c.q), func(t *testing.T) {
				got := ok(e.svc.Locations(e.ctx, e.proj, c.q)).get(t)
				// Every match is returned here (fewer than 50 of each kind).
				if got.TotalElements != c.wantTotal || got.OutputElements != c.wantTotal {
					t.Errorf("got total %d output %d (%d nodes), want total and output %d", got.TotalElements, got.OutputElements, len(got.Nodes), c.wantTotal)
				}
				if c.want != nil || c.wantTotal == 0 {
					g := locationNodes(got)
					if !slices.Equal(g, c.want) {
						t.Errorf("got %v, want %v", g, c.want)
					}
				}
			})
		}

		// At most 50 matches of each kind (the first by name);
		// totalElements counts them all.
		for i := range 55 {
			e.site(fmt.Sprintf("many-%02d", 54-i), de.ResourceID)
		}
		got := ok(e.svc.Locations(e.ctx, e.proj, inventory.LocationQuery{Name: "many", ShowSites: true})).get(t)
		if got.TotalElements != 55 || got.OutputElements != inventory.MaxLocationMatches || len(got.Nodes) != inventory.MaxLocationMatches+2 {
			t.Errorf("55 matches: got total %d output %d nodes %d, want 55, %d, %d", got.TotalElements, got.OutputElements, len(got.Nodes), inventory.MaxLocationMatches, inventory.MaxLocationMatches+2)
		}
		// many-49 … many-00 (created in that order), then the regions.
		if g := locationNodes(got); len(g) == inventory.MaxLocationMatches+2 &&
			(g[0] != "SITE:many-49<"+de.ResourceID || g[49] != "SITE:many-00<"+de.ResourceID || g[50] != "REGION:Germany<"+eu.ResourceID || g[51] != "REGION:Europe<") {
			t.Errorf("55 matches: got %v … %v, want many-49 … many-00, Germany, Europe", g[:2], g[49:])
		}
		_, err := e.svc.Locations(e.ctx, e.proj, inventory.LocationQuery{Name: "a;b"})
		wantErr(t, err, eim.EINVALID, "name")
	})
}

// TestLocationsTreeOrder: the original's order for regions r1 ⊃ r2 ⊃ r3,
// site s1 in r1, s2 in r2, s3 in no region: the matching sites, then the
// regions deepest first (r3 named otherwise: not listed, being neither a
// match nor an ancestor of one).
func TestLocationsTreeOrder(t *testing.T) {
	runTicking(t, func(t *testing.T, e *env) {
		r1 := e.region("common-r1", "")
		r2 := e.region("common-r2", r1.ResourceID)
		e.region("other-r3", r2.ResourceID)
		e.site("common-s1", r1.ResourceID)
		e.site("common-s2", r2.ResourceID)
		e.site("common-s3", "")
		e.site("solo-s4", r1.ResourceID)
		e.region("solo-r4", "")

		got := ok(e.svc.Locations(e.ctx, e.proj, inventory.LocationQuery{Name: "common", ShowSites: true, ShowRegions: true})).get(t)
		want := []string{"SITE:common-s1<" + r1.ResourceID, "SITE:common-s2<" + r2.ResourceID, "SITE:common-s3<",
			"REGION:common-r2<" + r1.ResourceID, "REGION:common-r1<"}
		if g := locationNodes(got); !slices.Equal(g, want) || got.TotalElements != 5 || got.OutputElements != 5 {
			t.Errorf("common: got %v (total %d, output %d), want %v (5, 5)", g, got.TotalElements, got.OutputElements, want)
		}
		// A site and a region: the site first, then the roots in creation
		// order, the site's region (an ancestor, not a match) before the
		// matching region created after it.
		got = ok(e.svc.Locations(e.ctx, e.proj, inventory.LocationQuery{Name: "solo", ShowSites: true, ShowRegions: true})).get(t)
		want = []string{"SITE:solo-s4<" + r1.ResourceID, "REGION:common-r1<", "REGION:solo-r4<"}
		if g := locationNodes(got); !slices.Equal(g, want) || got.TotalElements != 2 {
			t.Errorf("solo: got %v (total %d), want %v (2)", g, got.TotalElements, want)
		}
	})
}

// TestInheritedOverrides: a resource's inheritedMetadata leaves out the keys
// it sets itself, at every level, in lists as in gets.
func TestInheritedOverrides(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		kv := func(k, v string) eim.MetadataItem { return eim.MetadataItem{Key: k, Value: v} }
		r := e.region("r", "", kv("a", "1"), kv("b", "2"))
		sub := e.region("sub", r.ResourceID, kv("b", "5"))
		s := e.site("s", r.ResourceID, kv("a", "3"))
		h := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: s.ResourceID, Metadata: eim.Metadata{kv("b", "4")}}).(*eim.Host)
		for _, c := range []struct {
			name string
			got  eim.Metadata
			want eim.Metadata
		}{
			{"region", e.get(eim.KindRegion, sub.ResourceID).(*eim.Region).InheritedMetadata, eim.Metadata{kv("a", "1")}},
			{"site", e.get(eim.KindSite, s.ResourceID).(*eim.Site).InheritedMetadata, eim.Metadata{kv("b", "2")}},
			{"host", e.get(eim.KindHost, h.ResourceID).(*eim.Host).InheritedMetadata, eim.Metadata{kv("a", "3")}},
			{"host.site", e.get(eim.KindHost, h.ResourceID).(*eim.Host).Site.InheritedMetadata, eim.Metadata{kv("b", "2")}},
		} {
			if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
				t.Errorf("%s inheritedMetadata: got %v, want %v", c.name, c.got, c.want)
			}
		}
	})
}
