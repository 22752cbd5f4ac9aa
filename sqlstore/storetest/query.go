package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func ids(rs []eim.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Base().ResourceID
	}
	return out
}

func testTenancy(t *testing.T, s eim.Store) {
	a, b := project(t, s), project(t, s)
	siteA := create(t, s, a, &eim.Site{Name: "a"}).(*eim.Site)
	hostA := create(t, s, a, &eim.Host{Name: "a", SiteID: siteA.ResourceID}).(*eim.Host)
	create(t, s, b, &eim.Host{Name: "b"})

	// Another project's ID is not found, for every operation.
	_, err := get(t, s, b, eim.KindHost, hostA.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)
	err = s.Update(ctx(t), b, func(tx eim.Tx) error {
		h := *hostA
		h.Name = "stolen"
		return tx.Update(ctx(t), &h)
	})
	wantCode(t, err, eim.ENOTFOUND)
	err = s.Update(ctx(t), b, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, hostA.ResourceID) })
	wantCode(t, err, eim.ENOTFOUND)
	got, _ := get(t, s, a, eim.KindHost, hostA.ResourceID)
	if got == nil || got.(*eim.Host).Name != "a" {
		t.Fatalf("host of A after B's attempts: got %+v", got)
	}
	var many []eim.Resource
	err = s.View(ctx(t), b, func(tx eim.Tx) error {
		var err error
		many, err = tx.GetMany(ctx(t), eim.KindHost, []string{hostA.ResourceID})
		return err
	})
	if err != nil || len(many) != 0 {
		t.Fatalf("GetMany of A's host in B: got %v, %v; want none", ids(many), err)
	}
	items, total := list(t, s, b, eim.KindHost, eim.Query{})
	if total != 1 || len(items) != 1 || items[0].(*eim.Host).Name != "b" {
		t.Fatalf("List in B: got %v (total %d), want only B's host", ids(items), total)
	}
	if n := count(t, s, b, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "siteId", Value: siteA.ResourceID}}}); n != 0 {
		t.Fatalf("Count in B by A's site: got %d, want 0", n)
	}
	// A reference into another project points nowhere.
	err = s.Update(ctx(t), b, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{SiteID: siteA.ResourceID}) })
	wantCode(t, err, eim.EINVALID)
	// Create in a scoped tx takes the tx's project; naming another fails.
	err = s.Update(ctx(t), b, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{Meta: eim.Meta{Project: a}}) })
	wantCode(t, err, eim.EINVALID)
	// Unscoped transactions see every project, and need a project to create.
	items, total = list(t, s, "", eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "name", Value: []string{"a", "b"}}}})
	if total != 2 {
		t.Fatalf("unscoped List: got %v (total %d), want both projects' hosts", ids(items), total)
	}
	for _, it := range items {
		if it.Base().Project != a && it.Base().Project != b {
			t.Errorf("unscoped List: project %q, want %q or %q", it.Base().Project, a, b)
		}
	}
	err = s.Update(ctx(t), "", func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{}) })
	wantCode(t, err, eim.EINVALID)
	update(t, s, "", func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{Meta: eim.Meta{Project: b}, Name: "admin"}) })
	if n := count(t, s, b, eim.KindHost, eim.Query{}); n != 2 {
		t.Fatalf("hosts of B after unscoped create: got %d, want 2", n)
	}
	// A project that does not exist.
	err = s.Update(ctx(t), "nosuchproject", func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Region{}) })
	wantCode(t, err, eim.ENOTFOUND)
}

func testWhere(t *testing.T, s eim.Store) {
	p := project(t, s)
	site1 := create(t, s, p, &eim.Site{}).(*eim.Site)
	site2 := create(t, s, p, &eim.Site{}).(*eim.Site)
	mk := func(name, site string, st eim.HostState, mem uint64) string {
		return create(t, s, p, &eim.Host{Name: name, SiteID: site, DesiredState: st, MemoryBytes: mem}).Base().ResourceID
	}
	h1 := mk("h1", site1.ResourceID, eim.HostStateOnboarded, 1)
	h2 := mk("h2", site2.ResourceID, eim.HostStateOnboarded, 2)
	h3 := mk("", "", eim.HostStateRegistered, 2)
	tests := []struct {
		name  string
		conds []eim.Cond
		want  []string
	}{
		{"edge", []eim.Cond{{Field: "siteId", Value: site1.ResourceID}}, []string{h1}},
		{"edge empty is absent", []eim.Cond{{Field: "siteId", Value: ""}}, []string{h3}},
		{"edge nil is absent", []eim.Cond{{Field: "siteId", Value: nil}}, []string{h3}},
		{"edge snake_case name", []eim.Cond{{Field: "site_id", Value: site2.ResourceID}}, []string{h2}},
		{"edge in list", []eim.Cond{{Field: "siteId", Value: []string{site1.ResourceID, site2.ResourceID}}}, []string{h1, h2}},
		{"empty list", []eim.Cond{{Field: "siteId", Value: []string{}}}, nil},
		{"string empty", []eim.Cond{{Field: "name", Value: ""}}, []string{h3}},
		{"enum", []eim.Cond{{Field: "desiredState", Value: eim.HostStateOnboarded}}, []string{h1, h2}},
		{"enum list", []eim.Cond{{Field: "desiredState", Value: []eim.HostState{eim.HostStateRegistered, eim.HostStateUntrusted}}}, []string{h3}},
		{"enum as string", []eim.Cond{{Field: "desiredState", Value: "HOST_STATE_REGISTERED"}}, []string{h3}},
		{"integer", []eim.Cond{{Field: "memoryBytes", Value: uint64(2)}}, []string{h2, h3}},
		{"and", []eim.Cond{{Field: "memoryBytes", Value: uint64(2)}, {Field: "desiredState", Value: eim.HostStateOnboarded}}, []string{h2}},
		{"resource id", []eim.Cond{{Field: "resourceId", Value: h3}}, []string{h3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, total := list(t, s, p, eim.KindHost, eim.Query{Where: tt.conds})
			got := ids(items)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) || total != len(want) {
				t.Fatalf("got %v (total %d), want %v", got, total, want)
			}
		})
	}
	for _, bad := range []eim.Cond{{Field: "nosuch", Value: "x"}, {Field: "site", Value: "x"}, {Field: "memoryBytes", Value: "x"}} {
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			_, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{Where: []eim.Cond{bad}})
			return err
		})
		wantCode(t, err, eim.EINVALID)
		mustContain(t, err, bad.Field)
	}
}

func testPaging(t *testing.T, s eim.Store) {
	p := project(t, s)
	var all []string
	update(t, s, p, func(tx eim.Tx) error {
		for i := range 25 {
			h := &eim.Host{Name: fmt.Sprint(i)}
			if err := tx.Create(ctx(t), h); err != nil {
				return err
			}
			all = append(all, h.ResourceID)
		}
		return nil
	})
	slices.Sort(all)
	tests := []struct {
		limit, offset int
		want          []string
	}{
		{0, 0, all},
		{10, 0, all[:10]},
		{10, 10, all[10:20]},
		{10, 20, all[20:]},
		{10, 25, nil},
		{10, 30, nil},
		{0, 5, all[5:]},
		{25, 0, all},
	}
	for _, tt := range tests {
		items, total := list(t, s, p, eim.KindHost, eim.Query{Limit: tt.limit, Offset: tt.offset})
		if got := ids(items); !slices.Equal(got, tt.want) || total != 25 {
			t.Errorf("limit %d offset %d: got %v total %d, want %v total 25", tt.limit, tt.offset, got, total, tt.want)
		}
	}
	// NoTotal: no count, unless the page tells it.
	if items, total := list(t, s, p, eim.KindHost, eim.Query{Limit: 10, NoTotal: true}); total != -1 || len(items) != 10 {
		t.Errorf("NoTotal, full page: got %d items, total %d; want 10, -1", len(items), total)
	}
	if items, total := list(t, s, p, eim.KindHost, eim.Query{Limit: 30, NoTotal: true}); total != 25 || len(items) != 25 {
		t.Errorf("NoTotal, short page: got %d items, total %d; want 25, 25", len(items), total)
	}
	// Later pages of a filtered, ordered list: names "9" … "10" descending
	// as strings, only those containing "1".
	var names []string
	for i := range 25 {
		if n := fmt.Sprint(i); strings.Contains(n, "1") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	slices.Reverse(names)
	var got []string
	for off := 0; off < len(names); off += 4 {
		items, total := list(t, s, p, eim.KindHost, eim.Query{Filter: `name="1"`, OrderBy: "name desc", Limit: 4, Offset: off})
		if total != len(names) {
			t.Errorf("filtered page at %d: total %d, want %d", off, total, len(names))
		}
		for _, it := range items {
			got = append(got, it.(*eim.Host).Name)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("filtered pages: got %v, want %v", got, names)
	}
}

// testTotalsFollowWrites checks that list totals and counts (which the
// store may remember between reads) follow every committed write, and
// that a rolled-back write leaves them as they were.
func testTotalsFollowWrites(t *testing.T, s eim.Store) {
	p := project(t, s)
	q := eim.Query{Filter: `name="keep"`, Limit: 1}
	check := func(when string, want int) {
		t.Helper()
		if _, total := list(t, s, p, eim.KindRegion, q); total != want {
			t.Errorf("%s: list total %d, want %d", when, total, want)
		}
		if n := count(t, s, p, eim.KindRegion, eim.Query{Filter: q.Filter}); n != want {
			t.Errorf("%s: count %d, want %d", when, n, want)
		}
	}
	for range 3 {
		create(t, s, p, &eim.Region{Name: "keep"})
	}
	check("after 3 creates", 3)
	check("asked again", 3)
	r := create(t, s, p, &eim.Region{Name: "keep"})
	check("after a 4th", 4)
	// A count inside a write transaction sees its own rows, and they
	// leave no trace when it rolls back.
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), &eim.Region{Name: "keep"}); err != nil {
			return err
		}
		if n, err := tx.Count(ctx(t), eim.KindRegion, eim.Query{Filter: q.Filter}); err != nil || n != 5 {
			t.Errorf("inside the write: count %d (%v), want 5", n, err)
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the write should have failed")
	}
	check("after a rollback", 4)
	r.(*eim.Region).Name = "renamed"
	update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), r) })
	check("after a rename", 3)
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindRegion, r.Base().ResourceID) })
	check("after a delete", 3)
	// Another project's writes are not counted.
	create(t, s, project(t, s), &eim.Region{Name: "keep"})
	check("after a write elsewhere", 3)
}

func testGetMany(t *testing.T, s eim.Store) {
	p := project(t, s)
	a := create(t, s, p, &eim.OS{Name: "a"}).Base().ResourceID
	b := create(t, s, p, &eim.OS{Name: "b"}).Base().ResourceID
	var got []eim.Resource
	err := s.View(ctx(t), p, func(tx eim.Tx) error {
		var err error
		got, err = tx.GetMany(ctx(t), eim.KindOS, []string{a, "os-00000000", b, a})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	g := ids(got)
	slices.Sort(g)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(g, want) {
		t.Fatalf("GetMany: got %v, want %v", g, want)
	}
}

// testFilter checks that List and Count pass filters and orders through.
func testFilter(t *testing.T, s eim.Store) {
	p := project(t, s)
	for i, name := range []string{"alpha", "beta", "gamma"} {
		st := eim.HostStateOnboarded
		if i == 1 {
			st = eim.HostStateRegistered
		}
		create(t, s, p, &eim.Host{Name: name, DesiredState: st})
	}
	items, total := list(t, s, p, eim.KindHost, eim.Query{Filter: "desiredState=HOST_STATE_ONBOARDED", OrderBy: "name desc"})
	var names []string
	for _, it := range items {
		names = append(names, it.(*eim.Host).Name)
	}
	if !slices.Equal(names, []string{"gamma", "alpha"}) || total != 2 {
		t.Fatalf("filtered list: got %v (total %d), want [gamma alpha] (total 2)", names, total)
	}
	if n := count(t, s, p, eim.KindHost, eim.Query{Filter: `name="beta"`, Where: []eim.Cond{{Field: "desiredState", Value: eim.HostStateRegistered}}}); n != 1 {
		t.Fatalf("Count with filter and cond: got %d, want 1", n)
	}
	err := s.View(ctx(t), p, func(tx eim.Tx) error {
		_, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{Filter: "nosuchfield=1"})
		return err
	})
	wantCode(t, err, eim.EINVALID)
}

// testRereadInTx: a transaction that reads a row again sees its own update
// and delete of it, each read returns a resource of its own (changing one
// changes no other read), and GetMany mixes rows read before with new ones.
func testRereadInTx(t *testing.T, s eim.Store) {
	p := project(t, s)
	reg := create(t, s, p, &eim.Region{Name: "r"}).Base().ResourceID
	a := create(t, s, p, &eim.Site{Name: "a", RegionID: reg}).Base().ResourceID
	b := create(t, s, p, &eim.Site{Name: "b", RegionID: reg}).Base().ResourceID
	site := func(tx eim.Tx, id string) *eim.Site {
		t.Helper()
		r, err := tx.Get(ctx(t), eim.KindSite, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return r.(*eim.Site)
	}
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		first := site(tx, a)
		first.Name = "changed in memory only"
		first.Metadata = eim.Metadata{{Key: "k", Value: "v"}}
		if again := site(tx, a); again.Name != "a" || len(again.Metadata) != 0 {
			t.Errorf("second read: %q %v, want the stored row (name a, no metadata)", again.Name, again.Metadata)
		}
		upd := site(tx, a)
		upd.Name = "renamed"
		if err := tx.Update(ctx(t), upd); err != nil {
			return err
		}
		if got := site(tx, a); got.Name != "renamed" {
			t.Errorf("read after the transaction's update: name %q, want renamed", got.Name)
		}
		both, err := tx.GetMany(ctx(t), eim.KindSite, []string{a, b, "site-00000000"})
		if err != nil {
			return err
		}
		names := map[string]string{}
		for _, r := range both {
			names[r.Base().ResourceID] = r.(*eim.Site).Name
		}
		if len(both) != 2 || names[a] != "renamed" || names[b] != "b" {
			t.Errorf("GetMany: %v, want %s renamed and %s b", names, a, b)
		}
		if err := tx.Delete(ctx(t), eim.KindSite, b); err != nil {
			return err
		}
		if _, err := tx.Get(ctx(t), eim.KindSite, b); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Errorf("read after the transaction's delete: %v, want ENOTFOUND", err)
		}
		if rs, err := tx.GetMany(ctx(t), eim.KindSite, []string{b}); err != nil || len(rs) != 0 {
			t.Errorf("GetMany after the delete: %d rows, %v; want none", len(rs), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And the next transaction reads what was committed.
	err = s.View(ctx(t), p, func(tx eim.Tx) error {
		if got := site(tx, a); got.Name != "renamed" {
			t.Errorf("after commit: name %q, want renamed", got.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
