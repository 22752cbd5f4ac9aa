package inventory_test

import (
	"slices"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

func (e *env) group(v eim.TelemetryResourceKind, name string, items ...string) *eim.TelemetryGroup {
	e.t.Helper()
	return e.create(&eim.TelemetryGroup{Type: v, Name: name, CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: items}).(*eim.TelemetryGroup)
}

func (e *env) logsProfile(group, level string, inst, site, region string) *eim.TelemetryProfile {
	e.t.Helper()
	return e.create(&eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: group, LogLevel: eim.SeverityLevel(level),
		TargetInstance: inst, TargetSite: site, TargetRegion: region}).(*eim.TelemetryProfile)
}

func (e *env) metricsProfile(group string, interval uint32, inst, site, region string) *eim.TelemetryProfile {
	e.t.Helper()
	return e.create(&eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: group, MetricsInterval: interval,
		TargetInstance: inst, TargetSite: site, TargetRegion: region}).(*eim.TelemetryProfile)
}

// Groups and profiles of both variants share a kind; each variant sees
// only its own, with its own alias and nested group.
func TestTelemetryVariants(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		lg := e.group(eim.TelemetryLogs, "sys", "systemd")
		mg := e.group(eim.TelemetryMetrics, "cpu", "cpu", "mem")
		if lg.LogsAliasID != lg.ResourceID || lg.MetricsAliasID != "" || mg.MetricsAliasID != mg.ResourceID || mg.LogsAliasID != "" {
			t.Fatalf("aliases: logs %+v, metrics %+v", lg, mg)
		}
		site := e.site("s", "")
		lp := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_WARN", "", site.ResourceID, "")
		if lp.AliasID != lp.ResourceID || lp.LogsGroup == nil || lp.LogsGroup.ResourceID != lg.ResourceID ||
			lp.LogsGroup.LogsAliasID != lg.ResourceID || lp.MetricsGroup != nil || lp.MetricsInterval != 0 {
			t.Fatalf("logs profile: %+v", lp)
		}
		mp := e.metricsProfile(mg.ResourceID, 60, "", site.ResourceID, "")
		if mp.MetricsGroup == nil || mp.MetricsGroup.MetricsAliasID != mg.ResourceID || mp.LogLevel != "" || mp.LogsGroup != nil {
			t.Fatalf("metrics profile: %+v (a metrics profile has no log level, not even UNSPECIFIED)", mp)
		}

		// The other variant is not found, for get, update and delete.
		_, err := e.svc.GetVariant(e.ctx, e.proj, eim.KindTelemetryGroup, string(eim.TelemetryMetrics), lg.ResourceID)
		wantErr(t, err, eim.ENOTFOUND, "telemetry metrics group "+lg.ResourceID+" not found")
		got := ok(e.svc.GetVariant(e.ctx, e.proj, eim.KindTelemetryGroup, string(eim.TelemetryLogs), lg.ResourceID)).get(t)
		if got.(*eim.TelemetryGroup).Name != "sys" {
			t.Fatalf("get: %+v", got)
		}
		err = e.svc.DeleteVariant(e.ctx, e.proj, eim.KindTelemetryProfile, string(eim.TelemetryMetrics), lp.ResourceID)
		wantErr(t, err, eim.ENOTFOUND, "telemetry metrics profile")
		_, err = e.svc.Update(e.ctx, e.proj, &eim.TelemetryProfile{Meta: eim.Meta{ResourceID: lp.ResourceID}, Type: eim.TelemetryMetrics,
			MetricsInterval: 5, MetricsGroupID: mg.ResourceID, TargetSite: site.ResourceID}, nil)
		wantErr(t, err, eim.ENOTFOUND)
		// A mask naming the other variant's field is refused.
		_, err = e.svc.Update(e.ctx, e.proj, &eim.TelemetryProfile{Meta: eim.Meta{ResourceID: lp.ResourceID}, Type: eim.TelemetryLogs}, []string{"metricsInterval"})
		wantErr(t, err, eim.EINVALID, "metricsInterval")

		// Lists per variant.
		for _, c := range []struct {
			k       eim.Kind
			variant eim.TelemetryResourceKind
			want    string
		}{{eim.KindTelemetryGroup, eim.TelemetryLogs, lg.ResourceID}, {eim.KindTelemetryGroup, eim.TelemetryMetrics, mg.ResourceID},
			{eim.KindTelemetryProfile, eim.TelemetryLogs, lp.ResourceID}, {eim.KindTelemetryProfile, eim.TelemetryMetrics, mp.ResourceID}} {
			page := ok(e.svc.List(e.ctx, e.proj, c.k, inventory.ListQuery{Variant: string(c.variant)})).get(t)
			if len(page.Items) != 1 || page.Items[0].Base().ResourceID != c.want || page.Total != 1 {
				t.Errorf("%s %s: got %d items (%v), want %s", c.k, c.variant, len(page.Items), page.Items, c.want)
			}
		}

		// PATCH of a logs profile: its level, keeping the rest.
		up := ok(e.svc.Update(e.ctx, e.proj, &eim.TelemetryProfile{Meta: eim.Meta{ResourceID: lp.ResourceID}, Type: eim.TelemetryLogs,
			LogLevel: "SEVERITY_LEVEL_DEBUG"}, []string{"logLevel"})).get(t).(*eim.TelemetryProfile)
		if up.LogLevel != "SEVERITY_LEVEL_DEBUG" || up.TargetSite != site.ResourceID || up.LogsGroupID != lg.ResourceID || up.Type != eim.TelemetryLogs {
			t.Fatalf("after patch: %+v", up)
		}
	})
}

// A profile's references: the target exists (an instance not being
// deleted), the group exists and is of the profile's variant.
func TestTelemetryProfileRefs(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		lg := e.group(eim.TelemetryLogs, "sys", "systemd")
		mg := e.group(eim.TelemetryMetrics, "cpu", "cpu")
		region := e.region("r", "")
		_, err := e.svc.Create(e.ctx, e.proj, &eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: mg.ResourceID,
			LogLevel: "SEVERITY_LEVEL_INFO", TargetRegion: region.ResourceID})
		wantErr(t, err, eim.EINVALID, "logsGroupId: "+mg.ResourceID+" is a telemetry metrics group, not a telemetry logs group")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: lg.ResourceID,
			MetricsInterval: 10, TargetRegion: region.ResourceID})
		wantErr(t, err, eim.EINVALID, "metricsGroupId:")
		_, err = e.svc.Create(e.ctx, e.proj, &eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: "telemetrygroup-00000000",
			LogLevel: "SEVERITY_LEVEL_INFO", TargetRegion: region.ResourceID})
		wantErr(t, err, eim.ENOTFOUND, "logsGroupId: telemetrygroup-00000000 not found")
		for _, p := range []*eim.TelemetryProfile{
			{TargetInstance: "inst-00000000"}, {TargetSite: "site-00000000"}, {TargetRegion: "region-00000000"},
		} {
			p.Type, p.LogsGroupID, p.LogLevel = eim.TelemetryLogs, lg.ResourceID, "SEVERITY_LEVEL_INFO"
			_, err := e.svc.Create(e.ctx, e.proj, p)
			wantErr(t, err, eim.ENOTFOUND, "00000000 not found")
		}
		_, err = e.svc.Create(e.ctx, e.proj, &eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: lg.ResourceID, LogLevel: "SEVERITY_LEVEL_INFO"})
		wantErr(t, err, eim.EINVALID, "exactly one of targetInstance, targetSite, targetRegion")

		// An instance being deleted takes no new profiles; its profiles go
		// with it.
		h := e.host("h", "")
		in := e.instance(h.ResourceID, e.os("ubuntu").ResourceID)
		p := e.metricsProfile(mg.ResourceID, 30, in.ResourceID, "", "")
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		_, err = e.svc.Create(e.ctx, e.proj, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: mg.ResourceID,
			MetricsInterval: 30, TargetInstance: in.ResourceID})
		wantErr(t, err, eim.EPRECONDITION, "being deleted")
		noErr(t, e.svc.ConfirmDeleted(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		_, err = e.svc.Get(e.ctx, e.proj, eim.KindTelemetryProfile, p.ResourceID)
		wantErr(t, err, eim.ENOTFOUND)
	})
}

// Groups, sites and regions in use by a profile cannot be deleted
// (FailedPrecondition naming the profiles); once the profile goes they can.
func TestTelemetryInUse(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		lg := e.group(eim.TelemetryLogs, "sys", "systemd")
		region := e.region("r", "")
		site := e.site("s", "")
		pr := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_INFO", "", "", region.ResourceID)
		ps := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_INFO", "", site.ResourceID, "")
		err := e.svc.Delete(e.ctx, e.proj, eim.KindTelemetryGroup, lg.ResourceID)
		wantErr(t, err, eim.EPRECONDITION, "telemetry logs group "+lg.ResourceID+" is in use by 2 telemetry profiles")
		wantErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindRegion, region.ResourceID), eim.EPRECONDITION, pr.ResourceID)
		wantErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindSite, site.ResourceID), eim.EPRECONDITION, ps.ResourceID)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindTelemetryProfile, pr.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindRegion, region.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindTelemetryProfile, ps.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindSite, site.ResourceID))
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindTelemetryGroup, lg.ResourceID))
	})
}

// showInherited: the profiles that reach an object's nodes, down the
// location tree.
func TestListTelemetryProfilesInherited(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		lg := e.group(eim.TelemetryLogs, "sys", "systemd")
		mg := e.group(eim.TelemetryMetrics, "cpu", "cpu")
		root := e.region("root", "")
		sub := e.region("sub", root.ResourceID)
		other := e.region("other", "")
		site := e.site("s", sub.ResourceID)
		bare := e.site("bare", "")
		h := e.host("h", site.ResourceID)
		in := e.instance(h.ResourceID, e.os("ubuntu").ResourceID)
		h2 := e.host("h2", "")
		in2 := e.instance(h2.ResourceID, e.os("ubuntu2").ResourceID)

		pInst := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_DEBUG", in.ResourceID, "", "").ResourceID
		pSite := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_INFO", "", site.ResourceID, "").ResourceID
		pSub := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_WARN", "", "", sub.ResourceID).ResourceID
		pRoot := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_ERROR", "", "", root.ResourceID).ResourceID
		pOther := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_ERROR", "", "", other.ResourceID).ResourceID
		pInst2 := e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_ERROR", in2.ResourceID, "", "").ResourceID
		mSite := e.metricsProfile(mg.ResourceID, 30, "", site.ResourceID, "").ResourceID

		sorted := func(v ...string) []string { slices.Sort(v); return v }
		cases := []struct {
			name    string
			variant eim.TelemetryResourceKind
			q       inventory.TelemetryProfileQuery
			want    []string
		}{
			{"all logs", eim.TelemetryLogs, inventory.TelemetryProfileQuery{}, sorted(pInst, pSite, pSub, pRoot, pOther, pInst2)},
			{"all metrics", eim.TelemetryMetrics, inventory.TelemetryProfileQuery{}, []string{mSite}},
			{"instance", eim.TelemetryLogs, inventory.TelemetryProfileQuery{InstanceID: in.ResourceID}, []string{pInst}},
			{"instance inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{InstanceID: in.ResourceID, ShowInherited: true}, sorted(pInst, pSite, pSub, pRoot)},
			{"metrics of instance inherited", eim.TelemetryMetrics, inventory.TelemetryProfileQuery{InstanceID: in.ResourceID, ShowInherited: true}, []string{mSite}},
			{"instance without site inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{InstanceID: in2.ResourceID, ShowInherited: true}, []string{pInst2}},
			{"site", eim.TelemetryLogs, inventory.TelemetryProfileQuery{SiteID: site.ResourceID}, []string{pSite}},
			{"site inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{SiteID: site.ResourceID, ShowInherited: true}, sorted(pSite, pSub, pRoot)},
			{"site without region inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{SiteID: bare.ResourceID, ShowInherited: true}, nil},
			{"region", eim.TelemetryLogs, inventory.TelemetryProfileQuery{RegionID: sub.ResourceID}, []string{pSub}},
			{"region inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{RegionID: sub.ResourceID, ShowInherited: true}, sorted(pSub, pRoot)},
			{"root inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{RegionID: root.ResourceID, ShowInherited: true}, []string{pRoot}},
			{"several", eim.TelemetryLogs, inventory.TelemetryProfileQuery{SiteID: site.ResourceID, RegionID: other.ResourceID}, sorted(pSite, pOther)},
			{"several inherited", eim.TelemetryLogs, inventory.TelemetryProfileQuery{InstanceID: in2.ResourceID, RegionID: sub.ResourceID, ShowInherited: true},
				sorted(pInst2, pSub, pRoot)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				page := ok(e.svc.ListTelemetryProfiles(e.ctx, e.proj, c.variant, c.q)).get(t)
				var got []string
				for _, r := range page.Items {
					got = append(got, r.Base().ResourceID)
				}
				if !slices.Equal(got, c.want) || page.Total != len(c.want) {
					t.Fatalf("got %v (total %d), want %v", got, page.Total, c.want)
				}
			})
		}
		// Paged, ordered, expanded.
		page := ok(e.svc.ListTelemetryProfiles(e.ctx, e.proj, eim.TelemetryLogs,
			inventory.TelemetryProfileQuery{InstanceID: in.ResourceID, ShowInherited: true, OrderBy: "logLevel desc", PageSize: 2, Offset: 1})).get(t)
		if page.Total != 4 || !page.HasNext || len(page.Items) != 2 {
			t.Fatalf("page: total %d hasNext %v items %d, want 4 true 2", page.Total, page.HasNext, len(page.Items))
		}
		if p := page.Items[0].(*eim.TelemetryProfile); p.LogLevel != "SEVERITY_LEVEL_INFO" || p.LogsGroup == nil {
			t.Fatalf("second by logLevel desc: %+v", p)
		}
		// Unknown objects are 404 naming the parameter; malformed IDs 400.
		_, err := e.svc.ListTelemetryProfiles(e.ctx, e.proj, eim.TelemetryLogs, inventory.TelemetryProfileQuery{SiteID: "site-00000000"})
		wantErr(t, err, eim.ENOTFOUND, "siteId: site-00000000 not found")
		_, err = e.svc.ListTelemetryProfiles(e.ctx, e.proj, eim.TelemetryLogs, inventory.TelemetryProfileQuery{InstanceID: "host-00000000"})
		wantErr(t, err, eim.EINVALID, "instanceId")
		_, err = e.svc.ListTelemetryProfiles(e.ctx, e.proj, eim.TelemetryLogs, inventory.TelemetryProfileQuery{PageSize: 101})
		wantErr(t, err, eim.EINVALID, "pageSize")
	})
}
