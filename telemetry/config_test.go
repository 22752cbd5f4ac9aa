package telemetry_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/telemetry"
)

// shape is a location tree with profiles, written compactly: regions as
// "child>parent" (or "root"), sites as "site>region" (or "site"), and
// profiles as "target:group:value" where value is an interval (metrics
// groups m*) or a level (logs groups l*: crit, err, warn, info, debug).
type shape struct {
	regions, sites, profiles []string
	hosts                    map[string]string // host → its instance ("" for none)
}

func mkID(k eim.Kind, name string) string {
	h := fmt.Sprintf("%08x", hash(name))
	return string(k) + "-" + h
}

func hash(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

var levels = map[string]eim.SeverityLevel{
	"crit": "SEVERITY_LEVEL_CRITICAL", "err": "SEVERITY_LEVEL_ERROR", "warn": "SEVERITY_LEVEL_WARN",
	"info": "SEVERITY_LEVEL_INFO", "debug": "SEVERITY_LEVEL_DEBUG",
}

// target resolves a profile's target name: r* regions, s* sites, i* instances.
func target(p *eim.TelemetryProfile, name string) {
	switch name[0] {
	case 'r':
		p.TargetRegion = mkID(eim.KindRegion, name)
	case 's':
		p.TargetSite = mkID(eim.KindSite, name)
	case 'i':
		p.TargetInstance = mkID(eim.KindInstance, name)
	}
}

func (sh shape) tree(t *testing.T) *telemetry.Tree {
	t.Helper()
	var regions []*eim.Region
	for _, r := range sh.regions {
		name, parent, _ := strings.Cut(r, ">")
		reg := &eim.Region{Meta: eim.Meta{ResourceID: mkID(eim.KindRegion, name)}}
		if parent != "" {
			reg.ParentID = mkID(eim.KindRegion, parent)
		}
		regions = append(regions, reg)
	}
	var sites []*eim.Site
	for _, s := range sh.sites {
		name, region, _ := strings.Cut(s, ">")
		st := &eim.Site{Meta: eim.Meta{ResourceID: mkID(eim.KindSite, name)}}
		if region != "" {
			st.RegionID = mkID(eim.KindRegion, region)
		}
		sites = append(sites, st)
	}
	groups := map[string]*eim.TelemetryGroup{}
	var profiles []*eim.TelemetryProfile
	for i, ps := range sh.profiles {
		parts := strings.Split(ps, ":")
		tgt, group, val := parts[0], parts[1], parts[2]
		p := &eim.TelemetryProfile{Meta: eim.Meta{ResourceID: fmt.Sprintf("telemetryprofile-%08x", i)}}
		target(p, tgt)
		gid := mkID(eim.KindTelemetryGroup, group)
		g := groups[gid]
		if g == nil {
			g = &eim.TelemetryGroup{Meta: eim.Meta{ResourceID: gid}, Name: group, CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{group + "-in"}}
			g.Type = eim.TelemetryLogs
			if group[0] == 'm' {
				g.Type = eim.TelemetryMetrics
			}
			groups[gid] = g
		}
		if group[0] == 'm' {
			var n uint32
			fmt.Sscan(val, &n)
			p.Type, p.MetricsGroupID, p.MetricsInterval = eim.TelemetryMetrics, gid, n
		} else {
			p.Type, p.LogsGroupID, p.LogLevel = eim.TelemetryLogs, gid, levels[val]
		}
		profiles = append(profiles, p)
	}
	var instances []*eim.Instance
	for host, inst := range sh.hosts {
		if inst != "" {
			instances = append(instances, &eim.Instance{Meta: eim.Meta{ResourceID: mkID(eim.KindInstance, inst)}, HostID: mkID(eim.KindHost, host)})
		}
	}
	var gs []*eim.TelemetryGroup
	for _, g := range groups {
		gs = append(gs, g)
	}
	return telemetry.NewTree(profiles, gs, sites, regions, instances)
}

// summary renders a config as "m1=30 l1=debug", sorted by group name.
func summary(c telemetry.Config) string {
	var parts []string
	for _, m := range c.Metrics {
		parts = append(parts, fmt.Sprintf("%s=%d", m.Name, m.IntervalSeconds))
	}
	for _, l := range c.Logs {
		for short, lv := range levels {
			if lv == l.Level {
				parts = append(parts, l.Name+"="+short)
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func TestEffective(t *testing.T) {
	deep := []string{"r1", "r2>r1", "r3>r2", "r4>r3", "r5>r4"}
	cases := []struct {
		name  string
		shape shape
		host  string // the node's host (h*), at site
		site  string
		want  string
	}{
		{"nothing", shape{regions: []string{"r1"}, sites: []string{"s1>r1"}}, "h1", "s1", ""},
		{"region reaches its sites' hosts", shape{regions: []string{"r1"}, sites: []string{"s1>r1"}, profiles: []string{"r1:m1:60"}}, "h1", "s1", "m1=60"},
		{"shortest interval wins, instance lowest", shape{regions: []string{"r1", "r2>r1"}, sites: []string{"s1>r2"},
			profiles: []string{"r1:m1:60", "r2:m1:30", "s1:m1:120", "i1:m1:10"}, hosts: map[string]string{"h1": "i1"}}, "h1", "s1", "m1=10"},
		{"shortest interval wins, region lowest", shape{regions: []string{"r1", "r2>r1"}, sites: []string{"s1>r2"},
			profiles: []string{"r1:m1:15", "r2:m1:30", "s1:m1:120", "i1:m1:60"}, hosts: map[string]string{"h1": "i1"}}, "h1", "s1", "m1=15"},
		{"most verbose level wins", shape{regions: []string{"r1"}, sites: []string{"s1>r1"},
			profiles: []string{"r1:l1:debug", "s1:l1:warn", "i1:l1:err"}, hosts: map[string]string{"h1": "i1"}}, "h1", "s1", "l1=debug"},
		{"instance more verbose than region", shape{regions: []string{"r1"}, sites: []string{"s1>r1"},
			profiles: []string{"r1:l1:crit", "i1:l1:info"}, hosts: map[string]string{"h1": "i1"}}, "h1", "s1", "l1=info"},
		{"groups merge apart", shape{regions: []string{"r1"}, sites: []string{"s1>r1"},
			profiles: []string{"r1:m1:60", "s1:m2:20", "s1:m1:90", "r1:l1:warn", "s1:l2:info"}}, "h1", "s1", "l1=warn l2=info m1=60 m2=20"},
		{"other branches do not reach", shape{regions: []string{"r1", "r2>r1", "r3>r1"}, sites: []string{"s1>r2", "s2>r3"},
			profiles: []string{"r3:m1:5", "s2:m1:5", "i2:m1:5", "r2:m1:50"}, hosts: map[string]string{"h1": "i1", "h2": "i2"}}, "h1", "s1", "m1=50"},
		{"host without site: its instance only", shape{regions: []string{"r1"}, sites: []string{"s1>r1"},
			profiles: []string{"r1:m1:5", "s1:m1:5", "i1:m1:45"}, hosts: map[string]string{"h1": "i1"}}, "h1", "", "m1=45"},
		{"host without instance: site and regions", shape{regions: []string{"r1"}, sites: []string{"s1>r1"},
			profiles: []string{"r1:m1:25", "i9:m1:5"}, hosts: map[string]string{"h1": ""}}, "h1", "s1", "m1=25"},
		{"site without region", shape{sites: []string{"s1"}, profiles: []string{"s1:l1:info", "r1:l1:debug"}}, "h1", "s1", "l1=info"},
		{"five levels of regions", shape{regions: deep, sites: []string{"s1>r5"}, profiles: []string{"r1:m1:7", "r5:m1:70", "r3:l1:err"}}, "h1", "s1", "l1=err m1=7"},
		{"a cycle ends", shape{regions: []string{"r1>r2", "r2>r1"}, sites: []string{"s1>r1"}, profiles: []string{"r2:m1:9"}}, "h1", "s1", "m1=9"},
		{"unknown site", shape{profiles: []string{"r1:m1:9"}}, "h1", "s9", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree := c.shape.tree(t)
			n := telemetry.Node{HostID: mkID(eim.KindHost, c.host)}
			if c.site != "" {
				n.SiteID = mkID(eim.KindSite, c.site)
			}
			cfg := tree.Effective(n)
			if got := summary(cfg); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if cfg.Metrics == nil || cfg.Logs == nil {
				t.Errorf("lists are nil: %+v (they are written as [])", cfg)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	lg := &eim.TelemetryGroup{Meta: eim.Meta{ResourceID: "telemetrygroup-0000000b"}, Type: eim.TelemetryLogs, Name: "logs", Groups: []string{"a", "b"}}
	mg := &eim.TelemetryGroup{Meta: eim.Meta{ResourceID: "telemetrygroup-0000000a"}, Type: eim.TelemetryMetrics, Name: "metrics",
		CollectorKind: "TELEMETRY_COLLECTOR_KIND_CLUSTER", Groups: []string{"cpu"}}
	groups := map[string]*eim.TelemetryGroup{lg.ResourceID: lg, mg.ResourceID: mg}
	ps := []*eim.TelemetryProfile{
		{Type: eim.TelemetryMetrics, MetricsGroupID: mg.ResourceID, MetricsInterval: 30},
		{Type: eim.TelemetryMetrics, MetricsGroupID: mg.ResourceID, MetricsInterval: 20},
		{Type: eim.TelemetryLogs, LogsGroupID: lg.ResourceID, LogLevel: "SEVERITY_LEVEL_WARN"},
		// A profile naming a group of the other type, or none that exists, is skipped.
		{Type: eim.TelemetryLogs, LogsGroupID: mg.ResourceID, LogLevel: "SEVERITY_LEVEL_DEBUG"},
		{Type: eim.TelemetryMetrics, MetricsGroupID: "telemetrygroup-0000000f", MetricsInterval: 1},
	}
	c := telemetry.Merge(ps, groups)
	want := telemetry.Config{
		Metrics: []telemetry.MetricsGroup{{GroupID: mg.ResourceID, Name: "metrics", CollectorKind: "TELEMETRY_COLLECTOR_KIND_CLUSTER", Inputs: []string{"cpu"}, IntervalSeconds: 20}},
		Logs:    []telemetry.LogsGroup{{GroupID: lg.ResourceID, Name: "logs", Inputs: []string{"a", "b"}, Level: "SEVERITY_LEVEL_WARN"}},
	}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	// The version depends on the content, not on the profiles' order.
	rev := slices.Clone(ps)
	slices.Reverse(rev)
	if v1, v2 := c.Version(), telemetry.Merge(rev, groups).Version(); v1 != v2 || len(v1) != 32 {
		t.Fatalf("versions %q and %q, want equal 32-digit digests", v1, v2)
	}
	ps[1].MetricsInterval = 25
	if v := telemetry.Merge(ps, groups).Version(); v == c.Version() {
		t.Fatalf("a changed interval kept the version %s", v)
	}
	if e1, e2 := telemetry.Merge(nil, nil).Version(), (telemetry.Config{Metrics: []telemetry.MetricsGroup{}, Logs: []telemetry.LogsGroup{}}).Version(); e1 != e2 {
		t.Fatalf("empty configs: %s, %s", e1, e2)
	}
	// In the protocol: the same groups, levels by verbosity.
	p := c.Proto("v1")
	if p.Version != "v1" || len(p.MetricsGroups) != 1 || p.MetricsGroups[0].IntervalSeconds != 20 || p.MetricsGroups[0].CollectorKind.String() != "TELEMETRY_COLLECTOR_KIND_CLUSTER" ||
		len(p.LogsGroups) != 1 || p.LogsGroups[0].Level.String() != "LEVEL_WARN" || !slices.Equal(p.LogsGroups[0].Inputs, []string{"a", "b"}) {
		t.Fatalf("proto: %v", p)
	}
}
