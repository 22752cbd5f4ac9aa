package compat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	rc "github.com/eimhq/eim/compat/refclient"
)

// The scenarios of issue 16 beyond plain CRUD: the legacy paths,
// workloads, and the original's behaviours that clients depend on.

// activeProject sets the legacy paths' ActiveProjectID header (the
// project's UUID).
func activeProject(id string) rc.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("ActiveProjectID", id)
		return nil
	}
}

// TestLegacySites: the original's generated client manages sites only
// through /edge-infra.orchestrator.apis/v2/sites, naming the project by
// projectName or by the ActiveProjectID header. The generated client
// always sends projectName (a required query parameter): empty when the
// header names the project.
func TestLegacySites(t *testing.T) {
	p := newProject(t)
	c := p.c
	reg := ok(c.RegionServiceCreateRegion2WithResponse(ctx, &rc.RegionServiceCreateRegion2Params{ProjectName: p.name}, rc.RegionResource{Name: ptr("r")})).get(t)
	if str(reg.ParentRegion.ResourceId) != "" {
		t.Errorf("legacy root region: parentRegion %q", str(reg.ParentRegion.ResourceId))
	}
	byName := &rc.SiteServiceCreateSite2Params{ProjectName: p.name}
	s := ok(c.SiteServiceCreateSite2WithResponse(ctx, byName, rc.SiteResource{Name: ptr("by-name"), RegionId: reg.ResourceId})).get(t)
	if str(s.Region.ResourceId) != str(reg.ResourceId) {
		t.Errorf("legacy site: region %q", str(s.Region.ResourceId))
	}
	byHeader := &rc.SiteServiceCreateSite2Params{}
	s2 := ok(c.SiteServiceCreateSite2WithResponse(ctx, byHeader, rc.SiteResource{Name: ptr("by-header")}, activeProject(p.id))).get(t)
	if str(s2.Region.ResourceId) != "" {
		t.Errorf("legacy site without region: region %q", str(s2.Region.ResourceId))
	}
	// Both are the project's sites, seen over /v1 too.
	if l := ok(c.SiteServiceListSites3WithResponse(ctx, p.name, nil)).get(t); l.TotalElements != 2 {
		t.Errorf("sites over /v1: %d, want 2", l.TotalElements)
	}
	l := ok(c.SiteServiceListSites2WithResponse(ctx, &rc.SiteServiceListSites2Params{OrderBy: ptr("name")}, activeProject(p.id))).get(t)
	if l.TotalElements != 2 || str(l.Sites[0].Name) != "by-header" {
		t.Errorf("legacy site list by header: %d", l.TotalElements)
	}
	got := ok(c.SiteServiceGetSite2WithResponse(ctx, str(s.ResourceId), &rc.SiteServiceGetSite2Params{ProjectName: p.name})).get(t)
	if str(got.Name) != "by-name" {
		t.Errorf("legacy get site: %q", str(got.Name))
	}
	patched := ok(c.SiteServicePatchSite2WithResponse(ctx, str(s.ResourceId), &rc.SiteServicePatchSite2Params{ProjectName: p.name}, rc.SiteResource{Name: ptr("renamed")})).get(t)
	if str(patched.Name) != "renamed" {
		t.Errorf("legacy patch site: %q", str(patched.Name))
	}
	// No project, or an unknown one: refused.
	for _, params := range []*rc.SiteServiceListSites2Params{{}, {ProjectName: "no-such-project"}} {
		r, err := c.SiteServiceListSites2WithResponse(ctx, params)
		if err != nil || r.StatusCode() < 400 || r.StatusCode() >= 500 {
			t.Errorf("legacy list naming project %q: %v %d, want a 4xx", params.ProjectName, err, r.StatusCode())
		}
	}
	// Another project's token does not reach this one through the header.
	other := newProject(t)
	r, err := other.c.SiteServiceListSites2WithResponse(ctx, &rc.SiteServiceListSites2Params{}, activeProject(p.id))
	if err != nil || (r.StatusCode() != 403 && r.StatusCode() != 404) {
		t.Errorf("legacy list of another project by header: %v %d, want 403 or 404 as on /v1", err, r.StatusCode())
	}
	// A malformed tail of a known prefix is 404, as in the original.
	call(c.SiteServiceGetSite2WithResponse(ctx, "site-XXXXXXXX", &rc.SiteServiceGetSite2Params{ProjectName: p.name})).fails(t, 404, "NotFound")
	call(c.SiteServiceDeleteSite2WithResponse(ctx, str(s.ResourceId), &rc.SiteServiceDeleteSite2Params{ProjectName: p.name})).ok(t)
	call(c.SiteServiceDeleteSite2WithResponse(ctx, str(s2.ResourceId), &rc.SiteServiceDeleteSite2Params{}, activeProject(p.id))).ok(t)
	if hl := ok(c.HostServiceListHosts2WithResponse(ctx, &rc.HostServiceListHosts2Params{ProjectName: p.name})).get(t); hl.TotalElements != 0 {
		t.Errorf("legacy host list: %d", hl.TotalElements)
	}
	// Over /v1 too, a well-formed prefix with a malformed tail is 404.
	call(c.InstanceServiceGetInstanceWithResponse(ctx, p.name, "inst-XXXXXXXX")).fails(t, 404, "NotFound")
	call(c.OperatingSystemServiceGetOperatingSystemWithResponse(ctx, p.name, "os-XXXXXX")).fails(t, 404, "NotFound")
	call(c.ScheduleServiceGetSingleScheduleWithResponse(ctx, p.name, "singlesche-XXXXXX")).fails(t, 404, "NotFound")
	call(c.OperatingSystemServiceGetOperatingSystemWithResponse(ctx, p.name, "inst-12345678")).fails(t, 400, "InvalidArgument")
}

// TestWorkloads: workloads and their members, and an instance's
// workloadMembers.
func TestWorkloads(t *testing.T) {
	p := newProject(t)
	c := p.c
	os1 := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("os"), Sha256: sha})).get(t)
	h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID())})).get(t)
	in := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("i"), Kind: ptr(rc.INSTANCEKINDMETAL), HostID: h.ResourceId, OsID: os1.ResourceId})).get(t)

	w := ok(c.WorkloadServiceCreateWorkloadWithResponse(ctx, p.name, rc.WorkloadResource{Kind: rc.WORKLOADKINDCLUSTER, Name: ptr("cluster-1"), ExternalId: ptr("ext-1")})).get(t)
	wid := str(w.ResourceId)
	if got := ok(c.WorkloadServiceGetWorkload3WithResponse(ctx, p.name, wid)).get(t); str(got.Name) != "cluster-1" || str(got.WorkloadId) != wid {
		t.Errorf("workload: %q %q", str(got.Name), str(got.WorkloadId))
	}
	w = ok(c.WorkloadServicePatchWorkloadWithResponse(ctx, p.name, wid, nil, rc.WorkloadResource{Kind: rc.WORKLOADKINDCLUSTER, Name: ptr("cluster-2"), Status: ptr("ready")})).get(t)
	if str(w.Name) != "cluster-2" {
		t.Errorf("patched workload: %q", str(w.Name))
	}
	m := ok(c.WorkloadMemberServiceCreateWorkloadMemberWithResponse(ctx, p.name, rc.WorkloadMember{Kind: rc.WORKLOADMEMBERKINDCLUSTERNODE,
		WorkloadId: &wid, InstanceId: in.ResourceId})).get(t)
	if str(m.Workload.ResourceId) != wid || str(m.Instance.ResourceId) != str(in.ResourceId) {
		t.Errorf("member: workload %q instance %q", str(m.Workload.ResourceId), str(m.Instance.ResourceId))
	}
	gi := ok(c.InstanceServiceGetInstanceWithResponse(ctx, p.name, str(in.ResourceId))).get(t)
	if gi.WorkloadMembers == nil || len(*gi.WorkloadMembers) != 1 {
		t.Errorf("instance's workloadMembers: %v", gi.WorkloadMembers)
	}
	il := ok(c.InstanceServiceListInstancesWithResponse(ctx, p.name, &rc.InstanceServiceListInstancesParams{Filter: ptr("has(workload_members)")})).get(t)
	if il.TotalElements != 1 {
		t.Errorf("instances with workload members: %d", il.TotalElements)
	}
	if ml := ok(c.WorkloadMemberServiceListWorkloadMembersWithResponse(ctx, p.name, nil)).get(t); ml.TotalElements != 1 {
		t.Errorf("members: %d", ml.TotalElements)
	}
	if wl := ok(c.WorkloadServiceListWorkloads2WithResponse(ctx, &rc.WorkloadServiceListWorkloads2Params{ProjectName: p.name})).get(t); wl.TotalElements != 1 {
		t.Errorf("workloads over the legacy path: %d", wl.TotalElements)
	}
	call(c.WorkloadServiceCreateWorkloadWithResponse(ctx, p.name, rc.WorkloadResource{Kind: rc.WORKLOADKINDCLUSTER, Name: ptr("dup"), ExternalId: ptr("ext-1")})).fails(t, 409, "AlreadyExists")
	call(c.WorkloadMemberServiceDeleteWorkloadMemberWithResponse(ctx, p.name, str(m.ResourceId))).ok(t)
	call(c.WorkloadServiceDeleteWorkloadWithResponse(ctx, p.name, wid)).ok(t)
	call(c.WorkloadServiceGetWorkloadWithResponse(ctx, p.name, wid)).fails(t, 404, "NotFound")
}

// TestOriginalBehaviour: behaviours of the original that clients depend on
// (issue 16 items 5–13).
func TestOriginalBehaviour(t *testing.T) {
	p := newProject(t)
	c := p.c

	t.Run("inheritedMetadata leaves out overridden keys", func(t *testing.T) {
		reg := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("r"),
			Metadata: &[]rc.MetadataItem{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}})).get(t)
		site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("s"), RegionId: reg.ResourceId,
			Metadata: &[]rc.MetadataItem{{Key: "a", Value: "3"}}})).get(t)
		gs := ok(c.SiteServiceGetSite3WithResponse(ctx, p.name, str(site.ResourceId), nil)).get(t)
		if got := metadata(gs.InheritedMetadata); got != "b=2" {
			t.Errorf("site inherits %s, want b=2", got)
		}
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID()), SiteId: site.ResourceId,
			Metadata: &[]rc.MetadataItem{{Key: "b", Value: "4"}}})).get(t)
		gh := ok(c.HostServiceGetHostWithResponse(ctx, p.name, str(h.ResourceId))).get(t)
		if got := metadata(gh.InheritedMetadata); got != "a=3" {
			t.Errorf("host inherits %s, want a=3", got)
		}
	})

	t.Run("register without autoOnboard sets REGISTERED", func(t *testing.T) {
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "sm", Uuid: ptr(newUUID())})).get(t)
		got := ok(c.HostServicePatchRegisterHostWithResponse(ctx, p.name, str(h.ResourceId), rc.HostRegister{AutoOnboard: ptr(false)})).get(t)
		if *got.DesiredState != rc.HOSTSTATEREGISTERED {
			t.Errorf("register autoOnboard=false: desired %s, want REGISTERED", *got.DesiredState)
		}
	})

	t.Run("invalidate is reflected", func(t *testing.T) {
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "inv", Uuid: ptr(newUUID())})).get(t)
		call(c.HostServiceInvalidateHostWithResponse(ctx, p.name, str(h.ResourceId), &rc.HostServiceInvalidateHostParams{Note: ptr("lost")})).ok(t)
		eventually(t, "host UNTRUSTED and Invalidated", func() bool {
			g := ok(c.HostServiceGetHostWithResponse(ctx, p.name, str(h.ResourceId))).get(t)
			return g.CurrentState != nil && *g.CurrentState == rc.HOSTSTATEUNTRUSTED && str(g.HostStatus) == "Invalidated" &&
				g.HostStatusIndicator != nil && *g.HostStatusIndicator == rc.STATUSINDICATIONIDLE
		})
	})

	t.Run("delete a host with an instance", func(t *testing.T) {
		os1 := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("os-del"), Sha256: sha})).get(t)
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "del", Uuid: ptr(newUUID())})).get(t)
		in := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("i"), Kind: ptr(rc.INSTANCEKINDMETAL), HostID: h.ResourceId, OsID: os1.ResourceId})).get(t)
		call(c.HostServiceDeleteHostWithResponse(ctx, p.name, str(h.ResourceId))).ok(t)
		eventually(t, "host and instance gone", func() bool {
			rh, err1 := c.HostServiceGetHostWithResponse(ctx, p.name, str(h.ResourceId))
			ri, err2 := c.InstanceServiceGetInstanceWithResponse(ctx, p.name, str(in.ResourceId))
			return err1 == nil && err2 == nil && rh.StatusCode() == 404 && ri.StatusCode() == 404
		})
	})

	t.Run("UUID kept as written, unique ignoring case", func(t *testing.T) {
		u := strings.ToUpper(newUUID())
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "upper", Uuid: &u})).get(t)
		if str(h.Uuid) != u {
			t.Errorf("uuid: got %q, want %q", str(h.Uuid), u)
		}
		call(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "lower", Uuid: ptr(strings.ToLower(u))})).fails(t, 409, "AlreadyExists")
		l := ok(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{Filter: ptr(`uuid="` + strings.ToLower(u) + `"`)})).get(t)
		if l.TotalElements != 1 {
			t.Errorf("filter by lower-case uuid: %d", l.TotalElements)
		}
	})

	t.Run("OS PUT and PATCH change only name, architecture and metadata", func(t *testing.T) {
		o := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("os-edit"), Sha256: sha,
			ProfileName: ptr("prof"), OsType: ptr(rc.OSTYPEMUTABLE)})).get(t)
		// The generated client always sends sha256 (a required field), "" here.
		got := ok(c.OperatingSystemServicePatchOperatingSystemWithResponse(ctx, p.name, str(o.ResourceId), nil, rc.OperatingSystemResource{Name: ptr("os-edit-2")})).get(t)
		if str(got.Name) != "os-edit-2" || got.Sha256 != sha || str(got.ProfileName) != "prof" {
			t.Errorf("OS PATCH: name %q sha %q profile %q", str(got.Name), got.Sha256, str(got.ProfileName))
		}
		got = ok(c.OperatingSystemServiceUpdateOperatingSystemWithResponse(ctx, p.name, str(o.ResourceId), rc.OperatingSystemResource{Architecture: ptr("x86"),
			Sha256: strings.Repeat("f", 64)})).get(t)
		if got.Sha256 != sha || str(got.ProfileName) != "prof" || *got.OsType != rc.OSTYPEMUTABLE || str(got.Architecture) != "x86" {
			t.Errorf("OS PUT: sha %q profile %q type %s arch %q", got.Sha256, str(got.ProfileName), *got.OsType, str(got.Architecture))
		}
	})

	t.Run("the default provider infra_onboarding", func(t *testing.T) {
		l := ok(c.ProviderServiceListProvidersWithResponse(ctx, p.name, &rc.ProviderServiceListProvidersParams{Filter: ptr(`name="infra_onboarding"`)})).get(t)
		if l.TotalElements != 1 {
			t.Fatalf("providers named infra_onboarding: %d, want 1", l.TotalElements)
		}
		pv := l.Providers[0]
		if pv.ProviderKind != rc.PROVIDERKINDBAREMETAL || pv.ApiEndpoint != "null" || pv.Config == nil {
			t.Fatalf("infra_onboarding: kind %s apiEndpoint %q config %v", pv.ProviderKind, pv.ApiEndpoint, pv.Config)
		}
		var cfg map[string]any
		if err := json.Unmarshal([]byte(*pv.Config), &cfg); err != nil {
			t.Fatalf("infra_onboarding config %q: %v", *pv.Config, err)
		}
		for _, k := range []string{"defaultOs", "autoProvision", "defaultLocalAccount", "osSecurityFeatureEnable"} {
			if _, ok := cfg[k]; !ok {
				t.Errorf("infra_onboarding config %q lacks %s", *pv.Config, k)
			}
		}
	})

	t.Run("a schedule's target can be cleared", func(t *testing.T) {
		site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("sched-site")})).get(t)
		h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "sched-host", Uuid: ptr(newUUID())})).get(t)
		start := 2000000000
		s := ok(c.ScheduleServiceCreateSingleScheduleWithResponse(ctx, p.name, rc.SingleScheduleResource{ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE,
			StartSeconds: start, TargetSiteId: site.ResourceId})).get(t)
		got := ok(c.ScheduleServiceUpdateSingleScheduleWithResponse(ctx, p.name, str(s.ResourceId), rc.SingleScheduleResource{ScheduleStatus: rc.SCHEDULESTATUSMAINTENANCE,
			StartSeconds: start, TargetSiteId: ptr(""), TargetHostId: h.ResourceId})).get(t)
		if str(got.TargetHostId) != str(h.ResourceId) || (got.TargetSiteId != nil && *got.TargetSiteId != "") {
			t.Errorf("schedule retargeted: host %q site %v", str(got.TargetHostId), got.TargetSiteId)
		}
	})

	t.Run("a host may be created with an empty name", func(t *testing.T) {
		ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "", Uuid: ptr(newUUID())})).get(t)
	})
}

func metadata(md *[]rc.MetadataItem) string {
	if md == nil {
		return "<null>"
	}
	var parts []string
	for _, m := range *md {
		parts = append(parts, m.Key+"="+m.Value)
	}
	return strings.Join(parts, ",")
}

// TestMemberOfHostAtSite is issue 31's scenario as a client of the original
// drives it: a workload member whose instance's host is at a site answered
// 500 (its answer could not be encoded) although it was created, and from
// then on every list and get of the project's members answered 500 too, on
// both path families. The member's answer shows the host's site and region.
func TestMemberOfHostAtSite(t *testing.T) {
	p := newProject(t)
	c := p.c
	r := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("r")})).get(t)
	s := ok(c.SiteServiceCreateSiteWithResponse(ctx, p.name, str(r.ResourceId), rc.SiteResource{Name: ptr("s"), RegionId: r.ResourceId})).get(t)
	h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID()), SiteId: s.ResourceId})).get(t)
	os1 := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("os"), Sha256: sha})).get(t)
	in := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("i"), Kind: ptr(rc.INSTANCEKINDMETAL),
		HostID: h.ResourceId, OsID: os1.ResourceId})).get(t)
	w := ok(c.WorkloadServiceCreateWorkload3WithResponse(ctx, p.name, rc.WorkloadResource{Kind: rc.WORKLOADKINDCLUSTER,
		Name: ptr("w"), ExternalId: ptr("w"), Status: ptr("ok")})).get(t)

	m := ok(c.WorkloadMemberServiceCreateWorkloadMemberWithResponse(ctx, p.name, rc.WorkloadMember{Kind: rc.WORKLOADMEMBERKINDCLUSTERNODE,
		WorkloadId: w.ResourceId, InstanceId: in.ResourceId})).get(t)
	mid := str(m.ResourceId)
	for name, got := range map[string]*rc.WorkloadMember{
		"create":     m,
		"get":        ok(c.WorkloadMemberServiceGetWorkloadMemberWithResponse(ctx, p.name, mid)).get(t),
		"legacy get": ok(c.WorkloadMemberServiceGetWorkloadMember2WithResponse(ctx, mid, &rc.WorkloadMemberServiceGetWorkloadMember2Params{ProjectName: p.name})).get(t),
	} {
		if got.Member == nil || got.Instance == nil {
			t.Fatalf("%s: member or instance missing", name)
		}
		for _, inst := range []*rc.InstanceResource{got.Instance, got.Member} {
			site := inst.Host.Site
			if str(site.ResourceId) != str(s.ResourceId) || str(site.Region.ResourceId) != str(r.ResourceId) {
				t.Errorf("%s: instance's host's site %q region %q, want %s in %s", name, str(site.ResourceId), str(site.Region.ResourceId), str(s.ResourceId), str(r.ResourceId))
			}
		}
	}
	if l := ok(c.WorkloadMemberServiceListWorkloadMembersWithResponse(ctx, p.name, nil)).get(t); len(l.WorkloadMembers) != 1 || str(l.WorkloadMembers[0].ResourceId) != mid {
		t.Errorf("members: %d", len(l.WorkloadMembers))
	}
	if l := ok(c.WorkloadMemberServiceListWorkloadMembers2WithResponse(ctx, &rc.WorkloadMemberServiceListWorkloadMembers2Params{ProjectName: p.name})).get(t); len(l.WorkloadMembers) != 1 {
		t.Errorf("members over the legacy path: %d", len(l.WorkloadMembers))
	}
	call(c.WorkloadMemberServiceCreateWorkloadMemberWithResponse(ctx, p.name, rc.WorkloadMember{Kind: rc.WORKLOADMEMBERKINDCLUSTERNODE,
		WorkloadId: w.ResourceId, InstanceId: in.ResourceId})).fails(t, 409, "AlreadyExists")
}
