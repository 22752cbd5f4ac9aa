package storetest

import (
	"slices"
	"testing"

	"github.com/eimhq/eim"
)

// The telemetry kinds hold two API types each, told apart by a hidden
// variant column: Query.Variant selects one, in lists and counts.
func testVariants(t *testing.T, s eim.Store) {
	p := project(t, s)
	lg := create(t, s, p, &eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "l", Groups: []string{"a"}}).(*eim.TelemetryGroup)
	mg := create(t, s, p, &eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "m", Groups: []string{"cpu", "mem"}}).(*eim.TelemetryGroup)
	got, err := get(t, s, p, eim.KindTelemetryGroup, mg.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*eim.TelemetryGroup); g.Type != eim.TelemetryMetrics || !slices.Equal(g.Groups, []string{"cpu", "mem"}) {
		t.Fatalf("metrics group: got %+v", g)
	}
	for _, c := range []struct {
		variant eim.TelemetryResourceKind
		want    []string
	}{{eim.TelemetryLogs, []string{lg.ResourceID}}, {eim.TelemetryMetrics, []string{mg.ResourceID}}, {"", sorted(lg.ResourceID, mg.ResourceID)}} {
		items, total := list(t, s, p, eim.KindTelemetryGroup, eim.Query{Variant: string(c.variant)})
		if got := ids(items); !slices.Equal(got, c.want) || total != len(c.want) {
			t.Errorf("variant %q: got %v (total %d), want %v", c.variant, got, total, c.want)
		}
		var n int
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			var err error
			n, err = tx.Count(ctx(t), eim.KindTelemetryGroup, eim.Query{Variant: string(c.variant)})
			return err
		})
		if err != nil || n != len(c.want) {
			t.Errorf("count of variant %q: got %d, %v; want %d", c.variant, n, err, len(c.want))
		}
	}
	// A kind without variants refuses the selection.
	err = s.View(ctx(t), p, func(tx eim.Tx) error {
		_, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{Variant: "x"})
		return err
	})
	wantCode(t, err, eim.EINVALID)
}

// Query.Any keeps what matches at least one of its conditions, together
// with the other conditions.
func testAnyConds(t *testing.T, s eim.Store) {
	p := project(t, s)
	r1 := create(t, s, p, &eim.Region{}).(*eim.Region)
	r2 := create(t, s, p, &eim.Region{}).(*eim.Region)
	site := create(t, s, p, &eim.Site{RegionID: r1.ResourceID}).(*eim.Site)
	g := create(t, s, p, &eim.TelemetryGroup{Type: eim.TelemetryLogs}).(*eim.TelemetryGroup)
	mk := func(v eim.TelemetryResourceKind, site, region string) string {
		return create(t, s, p, &eim.TelemetryProfile{Type: v, TargetSite: site, TargetRegion: region, LogsGroupID: g.ResourceID}).Base().ResourceID
	}
	onSite := mk(eim.TelemetryLogs, site.ResourceID, "")
	onR1 := mk(eim.TelemetryLogs, "", r1.ResourceID)
	onR2 := mk(eim.TelemetryLogs, "", r2.ResourceID)
	metricsOnSite := mk(eim.TelemetryMetrics, site.ResourceID, "")
	tests := []struct {
		name string
		q    eim.Query
		want []string
	}{
		{"one", eim.Query{Any: []eim.Cond{{Field: "targetSite", Value: site.ResourceID}}}, []string{onSite, metricsOnSite}},
		{"or", eim.Query{Any: []eim.Cond{{Field: "targetSite", Value: site.ResourceID}, {Field: "targetRegion", Value: r2.ResourceID}}},
			[]string{onSite, metricsOnSite, onR2}},
		{"or list", eim.Query{Any: []eim.Cond{{Field: "targetSite", Value: []string{}}, {Field: "targetRegion", Value: []string{r1.ResourceID, r2.ResourceID}}}},
			[]string{onR1, onR2}},
		{"and variant", eim.Query{Variant: string(eim.TelemetryLogs), Any: []eim.Cond{{Field: "targetSite", Value: site.ResourceID}, {Field: "targetRegion", Value: r1.ResourceID}}},
			[]string{onSite, onR1}},
		{"and where", eim.Query{Where: []eim.Cond{{Field: "targetRegion", Value: nil}}, Any: []eim.Cond{{Field: "targetSite", Value: site.ResourceID}, {Field: "targetRegion", Value: r1.ResourceID}}},
			[]string{onSite, metricsOnSite}},
		{"none match", eim.Query{Any: []eim.Cond{{Field: "targetSite", Value: []string{}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, total := list(t, s, p, eim.KindTelemetryProfile, tt.q)
			want := sorted(tt.want...)
			if got := ids(items); !slices.Equal(got, want) || total != len(want) {
				t.Fatalf("got %v (total %d), want %v", got, total, want)
			}
		})
	}
	// Paged, the total still counts every match.
	q := eim.Query{Any: []eim.Cond{{Field: "targetSite", Value: site.ResourceID}, {Field: "targetRegion", Value: r2.ResourceID}}, Limit: 1, Offset: 1}
	if items, total := list(t, s, p, eim.KindTelemetryProfile, q); len(items) != 1 || total != 3 {
		t.Fatalf("page: got %d items, total %d; want 1 of 3", len(items), total)
	}
	err := s.View(ctx(t), p, func(tx eim.Tx) error {
		_, _, err := tx.List(ctx(t), eim.KindTelemetryProfile, eim.Query{Any: []eim.Cond{{Field: "nosuch", Value: "x"}}})
		return err
	})
	wantCode(t, err, eim.EINVALID)
}

// Telemetry profiles of an instance go with it (each with a delete event);
// a group, site or region that a profile names cannot be deleted.
func testTelemetryCascade(t *testing.T, s eim.Store) {
	p := project(t, s)
	host := create(t, s, p, &eim.Host{}).(*eim.Host)
	inst := create(t, s, p, &eim.Instance{HostID: host.ResourceID}).(*eim.Instance)
	site := create(t, s, p, &eim.Site{}).(*eim.Site)
	g := create(t, s, p, &eim.TelemetryGroup{Type: eim.TelemetryMetrics}).(*eim.TelemetryGroup)
	onInst := create(t, s, p, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, TargetInstance: inst.ResourceID, MetricsGroupID: g.ResourceID, MetricsInterval: 30})
	onSite := create(t, s, p, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, TargetSite: site.ResourceID, MetricsGroupID: g.ResourceID, MetricsInterval: 60})
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, inst.ResourceID) })
	if _, err := get(t, s, p, eim.KindTelemetryProfile, onInst.Base().ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("profile of a deleted instance: got %v, want not found", err)
	}
	if _, err := get(t, s, p, eim.KindTelemetryProfile, onSite.Base().ResourceID); err != nil {
		t.Fatalf("profile of a site after deleting an instance: %v", err)
	}
	evs, err := s.Events(ctx(t), rev, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]eim.Op{}
	for _, e := range evs {
		got[e.ID] = e.Op
	}
	for _, id := range []string{inst.ResourceID, onInst.Base().ResourceID} {
		if got[id] != eim.OpDeleted {
			t.Errorf("event of %s: got %q, want DELETED (events %+v)", id, got[id], evs)
		}
	}
	for _, r := range []eim.Resource{site, g} {
		err := s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), r.ResourceKind(), r.Base().ResourceID) })
		wantCode(t, err, eim.EPRECONDITION)
	}
}

func sorted(s ...string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
