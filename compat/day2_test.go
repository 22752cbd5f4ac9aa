package compat_test

import (
	"testing"
	"time"

	rc "github.com/eimhq/eim/compat/refclient"
)

// TestSchedules: single and repeated schedules over both paths, the
// combined list, and their errors.
func TestSchedules(t *testing.T) {
	p := newProject(t)
	c := p.c
	reg := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("r")})).get(t)
	site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("s"), RegionId: reg.ResourceId})).get(t)
	h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID()), SiteId: site.ResourceId})).get(t)
	start := int(time.Now().Add(time.Hour).Unix())

	single := ok(c.ScheduleServiceCreateSingleScheduleWithResponse(ctx, p.name, rc.SingleScheduleResource{Name: ptr("once"),
		ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE, StartSeconds: start, EndSeconds: ptr(start + 3600), TargetHostId: h.ResourceId})).get(t)
	sid := str(single.ResourceId)
	if str(single.SingleScheduleID) != sid || str(single.TargetHost.ResourceId) != str(h.ResourceId) {
		t.Errorf("single schedule: alias %q target %q", str(single.SingleScheduleID), str(single.TargetHost.ResourceId))
	}
	// The target host's nested site has its region.
	if str(single.TargetHost.Site.Region.ResourceId) != str(reg.ResourceId) {
		t.Errorf("single schedule: targetHost.site.region %q", str(single.TargetHost.Site.Region.ResourceId))
	}
	single = ok(c.ScheduleServicePatchSingleSchedule3WithResponse(ctx, p.name, sid, nil, rc.SingleScheduleResource{Name: ptr("once-b"),
		ScheduleStatus: rc.SCHEDULESTATUSOSUPDATE, StartSeconds: start, TargetHostId: h.ResourceId})).get(t)
	if str(single.Name) != "once-b" {
		t.Errorf("patched single schedule: %q", str(single.Name))
	}
	rep := ok(c.ScheduleServiceCreateRepeatedSchedule3WithResponse(ctx, p.name, rc.RepeatedScheduleResource{Name: ptr("nightly"),
		ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE, DurationSeconds: 3600, CronMinutes: "0", CronHours: "2", CronDayMonth: "*",
		CronMonth: "*", CronDayWeek: "1,2,3", TargetRegionId: reg.ResourceId})).get(t)
	rid := str(rep.ResourceId)
	if str(rep.TargetRegion.ResourceId) != str(reg.ResourceId) || str(rep.TargetRegion.ParentRegion.ResourceId) != "" {
		t.Errorf("repeated schedule: targetRegion %q", str(rep.TargetRegion.ResourceId))
	}
	rep = ok(c.ScheduleServiceUpdateRepeatedScheduleWithResponse(ctx, p.name, rid, rc.RepeatedScheduleResource{Name: ptr("nightly"),
		ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE, DurationSeconds: 1800, CronMinutes: "30", CronHours: "2", CronDayMonth: "*",
		CronMonth: "*", CronDayWeek: "*", TargetSiteId: site.ResourceId})).get(t)
	if rep.DurationSeconds != 1800 || str(rep.TargetSite.ResourceId) != str(site.ResourceId) {
		t.Errorf("PUT repeated schedule: duration %d site %q", rep.DurationSeconds, str(rep.TargetSite.ResourceId))
	}

	all := ok(c.ScheduleServiceListSchedulesWithResponse(ctx, p.name, &rc.ScheduleServiceListSchedulesParams{HostId: h.ResourceId})).get(t)
	if len(all.SingleSchedules) != 1 || len(all.RepeatedSchedules) != 1 || all.TotalElements != 2 {
		t.Errorf("schedules of the host (inherited included): %d single, %d repeated, total %d", len(all.SingleSchedules), len(all.RepeatedSchedules), all.TotalElements)
	}
	if s := ok(c.ScheduleServiceListSingleSchedules3WithResponse(ctx, p.name, nil)).get(t); s.TotalElements != 1 {
		t.Errorf("single schedules: %d", s.TotalElements)
	}
	if r := ok(c.ScheduleServiceListRepeatedSchedulesWithResponse(ctx, p.name, nil)).get(t); r.TotalElements != 1 {
		t.Errorf("repeated schedules: %d", r.TotalElements)
	}
	if got := ok(c.ScheduleServiceGetRepeatedSchedule3WithResponse(ctx, p.name, rid)).get(t); got.CronMinutes != "30" {
		t.Errorf("get repeated schedule: %q", got.CronMinutes)
	}

	call(c.ScheduleServiceCreateSingleScheduleWithResponse(ctx, p.name, rc.SingleScheduleResource{ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE,
		StartSeconds: start, EndSeconds: ptr(start - 1), TargetHostId: h.ResourceId})).fails(t, 400, "InvalidArgument")
	call(c.ScheduleServiceCreateRepeatedScheduleWithResponse(ctx, p.name, rc.RepeatedScheduleResource{ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE,
		DurationSeconds: 60, CronMinutes: "61", CronHours: "*", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetHostId: h.ResourceId})).fails(t, 400, "InvalidArgument", "cronMinutes")
	call(c.ScheduleServiceGetSingleScheduleWithResponse(ctx, p.name, "singlesche-0000dead")).fails(t, 404, "NotFound")

	call(c.ScheduleServiceDeleteSingleScheduleWithResponse(ctx, p.name, sid)).ok(t)
	call(c.ScheduleServiceDeleteRepeatedSchedule3WithResponse(ctx, p.name, rid)).ok(t)
	if all := ok(c.ScheduleServiceListSchedules3WithResponse(ctx, p.name, nil)).get(t); all.TotalElements != 0 {
		t.Errorf("schedules after delete: %d", all.TotalElements)
	}
}

// TestTelemetry: logs and metrics groups and profiles.
func TestTelemetry(t *testing.T) {
	p := newProject(t)
	c := p.c
	site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("s")})).get(t)
	lg := ok(c.TelemetryLogsGroupServiceCreateTelemetryLogsGroupWithResponse(ctx, p.name, rc.TelemetryLogsGroupResource{Name: "syslog",
		CollectorKind: rc.TELEMETRYCOLLECTORKINDHOST, Groups: []string{"syslog", "kern"}})).get(t)
	mg := ok(c.TelemetryMetricsGroupServiceCreateTelemetryMetricsGroup3WithResponse(ctx, p.name, rc.TelemetryMetricsGroupResource{Name: "cpu",
		CollectorKind: rc.TELEMETRYCOLLECTORKINDHOST, Groups: []string{"cpu"}})).get(t)
	if got := ok(c.TelemetryLogsGroupServiceGetTelemetryLogsGroup3WithResponse(ctx, p.name, str(lg.ResourceId))).get(t); len(got.Groups) != 2 {
		t.Errorf("logs group: %v", got.Groups)
	}
	if l := ok(c.TelemetryMetricsGroupServiceListTelemetryMetricsGroupsWithResponse(ctx, p.name, nil)).get(t); l.TotalElements < 1 {
		t.Errorf("metrics groups: %d", l.TotalElements)
	}
	lp := ok(c.TelemetryLogsProfileServiceCreateTelemetryLogsProfileWithResponse(ctx, p.name, rc.TelemetryLogsProfileResource{
		LogLevel: rc.SEVERITYLEVELINFO, LogsGroupId: str(lg.ResourceId), TargetSite: site.ResourceId})).get(t)
	if lp.LogsGroup.Name != "syslog" {
		t.Errorf("logs profile: group %q", lp.LogsGroup.Name)
	}
	lp = ok(c.TelemetryLogsProfileServicePatchTelemetryLogsProfileWithResponse(ctx, p.name, str(lp.ResourceId), nil, rc.TelemetryLogsProfileResource{
		LogLevel: rc.SEVERITYLEVELDEBUG, LogsGroupId: str(lg.ResourceId), TargetSite: site.ResourceId})).get(t)
	if lp.LogLevel != rc.SEVERITYLEVELDEBUG {
		t.Errorf("patched logs profile: %s", lp.LogLevel)
	}
	mp := ok(c.TelemetryMetricsProfileServiceCreateTelemetryMetricsProfileWithResponse(ctx, p.name, rc.TelemetryMetricsProfileResource{
		MetricsInterval: 60, MetricsGroupId: str(mg.ResourceId), TargetSite: site.ResourceId})).get(t)
	mp = ok(c.TelemetryMetricsProfileServiceUpdateTelemetryMetricsProfileWithResponse(ctx, p.name, str(mp.ResourceId), rc.TelemetryMetricsProfileResource{
		MetricsInterval: 30, MetricsGroupId: str(mg.ResourceId), TargetSite: site.ResourceId})).get(t)
	if mp.MetricsInterval != 30 || mp.MetricsGroup.Name != "cpu" {
		t.Errorf("PUT metrics profile: %d %q", mp.MetricsInterval, mp.MetricsGroup.Name)
	}
	if l := ok(c.TelemetryLogsProfileServiceListTelemetryLogsProfilesWithResponse(ctx, p.name, &rc.TelemetryLogsProfileServiceListTelemetryLogsProfilesParams{SiteId: site.ResourceId})).get(t); l.TotalElements != 1 {
		t.Errorf("logs profiles of site: %d", l.TotalElements)
	}
	call(c.TelemetryMetricsProfileServiceCreateTelemetryMetricsProfileWithResponse(ctx, p.name, rc.TelemetryMetricsProfileResource{
		MetricsInterval: 60, MetricsGroupId: str(lg.ResourceId), TargetSite: site.ResourceId})).fails(t, 400, "InvalidArgument")
	call(c.TelemetryLogsGroupServiceDeleteTelemetryLogsGroupWithResponse(ctx, p.name, str(lg.ResourceId))).fails(t, 400, "FailedPrecondition")
	call(c.TelemetryLogsProfileServiceDeleteTelemetryLogsProfileWithResponse(ctx, p.name, str(lp.ResourceId))).ok(t)
	call(c.TelemetryMetricsProfileServiceDeleteTelemetryMetricsProfileWithResponse(ctx, p.name, str(mp.ResourceId))).ok(t)
	call(c.TelemetryLogsGroupServiceDeleteTelemetryLogsGroup3WithResponse(ctx, p.name, str(lg.ResourceId))).ok(t)
	call(c.TelemetryMetricsGroupServiceDeleteTelemetryMetricsGroupWithResponse(ctx, p.name, str(mg.ResourceId))).ok(t)
	call(c.TelemetryLogsProfileServiceGetTelemetryLogsProfileWithResponse(ctx, p.name, str(lp.ResourceId))).fails(t, 404, "NotFound")
}

// TestOSUpdatePoliciesAndRuns: policies over both paths; runs are read-only.
func TestOSUpdatePoliciesAndRuns(t *testing.T) {
	p := newProject(t)
	c := p.c
	pol := ok(c.OSUpdatePolicyCreateOSUpdatePolicyWithResponse(ctx, p.name, rc.OSUpdatePolicy{Name: "latest", UpdatePolicy: ptr(rc.UPDATEPOLICYLATEST)})).get(t)
	if pol.TargetOs != nil {
		t.Errorf("LATEST policy: targetOs %v, want null", pol.TargetOs)
	}
	if got := ok(c.OSUpdatePolicyGetOSUpdatePolicy3WithResponse(ctx, p.name, str(pol.ResourceId))).get(t); got.Name != "latest" {
		t.Errorf("policy over the alias path: %q", got.Name)
	}
	if l := ok(c.OSUpdatePolicyListOSUpdatePolicyWithResponse(ctx, p.name, nil)).get(t); l.TotalElements != 1 {
		t.Errorf("policies: %d", l.TotalElements)
	}
	call(c.OSUpdatePolicyCreateOSUpdatePolicyWithResponse(ctx, p.name, rc.OSUpdatePolicy{Name: "bad", UpdatePolicy: ptr(rc.UPDATEPOLICYLATEST),
		UpdatePackages: ptr("curl")})).fails(t, 400, "InvalidArgument", "updatePackages")
	if l := ok(c.OSUpdateRunListOSUpdateRunWithResponse(ctx, p.name, &rc.OSUpdateRunListOSUpdateRunParams{OrderBy: ptr("resource_id")})).get(t); l.TotalElements != 0 || l.OsUpdateRuns == nil {
		t.Errorf("runs: %d %v", l.TotalElements, l.OsUpdateRuns)
	}
	call(c.OSUpdateRunGetOSUpdateRun3WithResponse(ctx, p.name, "osupdaterun-0000dead")).fails(t, 404, "NotFound")
	call(c.OSUpdatePolicyDeleteOSUpdatePolicy3WithResponse(ctx, p.name, str(pol.ResourceId))).ok(t)
}

// TestLocations: the matching sites, then their regions deepest first;
// outputElements counts the matches.
func TestLocations(t *testing.T) {
	p := newProject(t)
	c := p.c
	eu := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("europe")})).get(t)
	de := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("germany"), ParentId: eu.ResourceId})).get(t)
	b1 := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("berlin-1"), RegionId: de.ResourceId})).get(t)
	b2 := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("berlin-2")})).get(t)

	l := ok(c.LocationServiceListLocationsWithResponse(ctx, p.name, &rc.LocationServiceListLocationsParams{Name: ptr("berlin"), ShowSites: ptr(true), ShowRegions: ptr(true)})).get(t)
	var got []string
	for _, n := range l.Nodes {
		got = append(got, n.Name)
	}
	want := append(byCreation(*b1, *b2), "germany", "europe") // berlin-1, berlin-2 unless created in the same millisecond
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("locations: got %v, want %v", got, want)
	}
	if *l.OutputElements != 2 || *l.TotalElements != 2 {
		t.Errorf("locations: output %d total %d, want 2 and 2", *l.OutputElements, *l.TotalElements)
	}
	if l.Nodes[2].ParentId != str(eu.ResourceId) || l.Nodes[2].Type != rc.RESOURCEKINDREGION || l.Nodes[3].ParentId != "" {
		t.Errorf("locations: third parent %q type %s, fourth parent %q", l.Nodes[2].ParentId, l.Nodes[2].Type, l.Nodes[3].ParentId)
	}
	for _, n := range l.Nodes[:2] {
		if want := map[string]string{"berlin-1": str(de.ResourceId), "berlin-2": ""}[n.Name]; n.ParentId != want || n.Type != rc.RESOURCEKINDSITE {
			t.Errorf("locations: %s parent %q type %s, want %q and a site", n.Name, n.ParentId, n.Type, want)
		}
	}
	call(c.LocationServiceListLocationsWithResponse(ctx, p.name, &rc.LocationServiceListLocationsParams{Name: ptr("a;b")})).fails(t, 400, "InvalidArgument", "name")
}
