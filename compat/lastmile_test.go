package compat_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	rc "github.com/eimhq/eim/compat/refclient"
)

// TestMetadataFilterLists: the original's clients filter by several labels
// at once, as a comma-separated list of objects in one quoted value; a
// resource matches when it has every label (its own, not inherited ones),
// with or without a value, on every kind with labels.
func TestMetadataFilterLists(t *testing.T) {
	p := newProject(t)
	c := p.c
	md := func(kv ...string) *[]rc.MetadataItem {
		var out []rc.MetadataItem
		for i := 0; i < len(kv); i += 2 {
			out = append(out, rc.MetadataItem{Key: kv[i], Value: kv[i+1]})
		}
		return &out
	}
	both := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("both"), Metadata: md("k1", "v1", "k2", "v2")})).get(t)
	ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("one"), Metadata: md("k1", "v1")})).get(t)
	// Inherits k1 and k2 from its region: not a match.
	site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("inheriting"), RegionId: both.ResourceId})).get(t)
	ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("own"), Metadata: md("k2", "v2", "k1", "v1")})).get(t)
	ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h-both", Uuid: ptr(newUUID()), SiteId: site.ResourceId,
		Metadata: md("k2", "v2", "x", "y", "k1", "v1")})).get(t)
	ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h-other", Uuid: ptr(newUUID()), SiteId: site.ResourceId,
		Metadata: md("k1", "v1", "k2", "other")})).get(t)

	const pair = `metadata='{"key":"k1","value":"v1"},{"key":"k2","value":"v2"}'`
	const keys = `metadata='{"key":"k1"}, {"key":"k2"}'`
	const reversed = `metadata='{"key":"k2","value":"v2"},{"key":"k1"}'`
	for _, tc := range []struct {
		filter      string
		regions     []string
		sites       []string
		hosts       []string
		hostsFilter string
	}{
		{pair, []string{"both"}, []string{"own"}, []string{"h-both"}, pair},
		{keys, []string{"both"}, []string{"own"}, []string{"h-both", "h-other"}, keys},
		{reversed, []string{"both"}, []string{"own"}, []string{"h-both"}, reversed},
		{`NOT ` + pair, []string{"one"}, []string{"inheriting"}, []string{"h-other"}, `NOT ` + pair},
		{`name="o" AND ` + keys, []string{"both"}, []string{"own"}, []string{"h-other"}, `name="other" AND ` + keys},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			var names []string
			for _, r := range ok(c.RegionServiceListRegionsWithResponse(ctx, p.name, &rc.RegionServiceListRegionsParams{Filter: ptr(tc.filter), OrderBy: ptr("name")})).get(t).Regions {
				names = append(names, str(r.Name))
			}
			if !slices.Equal(names, tc.regions) {
				t.Errorf("regions: got %v, want %v", names, tc.regions)
			}
			names = nil
			for _, s := range ok(c.SiteServiceListSites3WithResponse(ctx, p.name, &rc.SiteServiceListSites3Params{Filter: ptr(tc.filter), OrderBy: ptr("name")})).get(t).Sites {
				names = append(names, str(s.Name))
			}
			if !slices.Equal(names, tc.sites) {
				t.Errorf("sites: got %v, want %v", names, tc.sites)
			}
			names = nil
			for _, h := range ok(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{Filter: ptr(tc.hostsFilter), OrderBy: ptr("name")})).get(t).Hosts {
				names = append(names, h.Name)
			}
			if !slices.Equal(names, tc.hosts) {
				t.Errorf("hosts: got %v, want %v", names, tc.hosts)
			}
		})
	}
	call(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{Filter: ptr(`metadata='{"key":"k1"},{"value":"v"}'`)})).
		fails(t, 400, "InvalidArgument", "metadata")
}

// TestOrderByOriginalColumns: lists of orderBy keys in the original's
// spellings, its inventory's columns among them (<kind>_resource_<edge>).
func TestOrderByOriginalColumns(t *testing.T) {
	p := newProject(t)
	c := p.c
	ra := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("ra")})).get(t)
	rb := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("rb"), ParentId: ra.ResourceId})).get(t)
	var sites []rc.SiteResource
	for i, region := range []*string{ra.ResourceId, rb.ResourceId, nil, ra.ResourceId} {
		sites = append(sites, *ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr(string(rune('a' + i))), RegionId: region})).get(t))
	}
	// By region descending (the one without last), then by ID.
	want := slices.Clone(sites)
	slices.SortFunc(want, func(a, b rc.SiteResource) int {
		ar, br := str(a.RegionId), str(b.RegionId)
		switch {
		case ar == br:
			return cmp.Compare(str(a.ResourceId), str(b.ResourceId))
		case ar == "":
			return 1
		case br == "":
			return -1
		}
		return -cmp.Compare(ar, br)
	})
	for _, order := range []string{"site_resource_region desc, resource_id", "siteResourceRegion desc,resource_id asc", "site_resource_region desc, tenant_id, site_resource_ou, resource_id"} {
		got := ok(c.SiteServiceListSites3WithResponse(ctx, p.name, &rc.SiteServiceListSites3Params{OrderBy: ptr(order)})).get(t)
		var g, w []string
		for i := range got.Sites {
			g = append(g, str(got.Sites[i].Name))
		}
		for i := range want {
			w = append(w, str(want[i].Name))
		}
		if !slices.Equal(g, w) {
			t.Errorf("sites by %q: got %v, want %v", order, g, w)
		}
	}
	// Other kinds' columns: accepted, in lists.
	ok(c.RegionServiceListRegionsWithResponse(ctx, p.name, &rc.RegionServiceListRegionsParams{OrderBy: ptr("region_resource_parent_region desc, id, metadata")})).get(t)
	ok(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{OrderBy: ptr("host_resource_site, host_resource_provider desc, instance_resource_host, resource_id")})).get(t)
	ok(c.InstanceServiceListInstancesWithResponse(ctx, p.name, &rc.InstanceServiceListInstancesParams{OrderBy: ptr("instance_resource_os desc, instance_resource_localaccount, instance_resource_os_update_policy, name")})).get(t)
	call(c.SiteServiceListSites3WithResponse(ctx, p.name, &rc.SiteServiceListSites3Params{OrderBy: ptr("host_resource_site")})).fails(t, 400, "InvalidArgument", "host_resource_site")
}

// TestLocationsTreeOrder: the original's order (its inventory's tree query,
// deepest first): for regions r1 ⊃ r2 ⊃ r3, site s1 in r1, s2 in r2 and s3
// in none, the matching sites in creation order, then the regions from
// the deepest up.
func TestLocationsTreeOrder(t *testing.T) {
	p := newProject(t)
	c := p.c
	r1 := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("north-r1")})).get(t)
	r2 := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("north-r2"), ParentId: r1.ResourceId})).get(t)
	ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("r3"), ParentId: r2.ResourceId})).get(t)
	var sites []rc.SiteResource
	for _, s := range []struct {
		name   string
		region *string
	}{{"north-s1", r1.ResourceId}, {"north-s2", r2.ResourceId}, {"north-s3", nil}, {"pole-s4", r1.ResourceId}} {
		sites = append(sites, *ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr(s.name), RegionId: s.region})).get(t))
	}
	ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("pole-r4")})).get(t)

	list := func(name string) ([]string, []string, int32) {
		t.Helper()
		l := ok(c.LocationServiceListLocationsWithResponse(ctx, p.name, &rc.LocationServiceListLocationsParams{Name: ptr(name), ShowSites: ptr(true), ShowRegions: ptr(true)})).get(t)
		var names, parents []string
		for _, n := range l.Nodes {
			names = append(names, n.Name)
			parents = append(parents, n.ParentId)
		}
		return names, parents, *l.TotalElements
	}

	names, parents, total := list("north")
	want := append(byCreation(sites[0], sites[1], sites[2]), "north-r2", "north-r1")
	if !slices.Equal(names, want) || total != 5 {
		t.Errorf("north: got %v (total %d), want %v (5)", names, total, want)
	}
	if !slices.Equal(want[:3], []string{"north-s1", "north-s2", "north-s3"}) {
		t.Logf("sites created in the same millisecond: %v", want[:3])
	}
	if len(parents) == 5 && (parents[3] != str(r1.ResourceId) || parents[4] != "") {
		t.Errorf("north: regions' parents %q, want %s and none", parents[3:], str(r1.ResourceId))
	}

	// A name common to r1 and s1 only: the site first.
	names, _, total = list("1")
	if want := []string{"north-s1", "north-r1"}; !slices.Equal(names, want) || total != 2 {
		t.Errorf("1: got %v (total %d), want %v (2)", names, total, want)
	}
	// A site and a region of the same level as the site's: the site, then
	// the roots in creation order (the site's region, not a match, first).
	names, _, total = list("pole")
	if want := []string{"pole-s4", "north-r1", "pole-r4"}; !slices.Equal(names, want) || total != 2 {
		t.Errorf("pole: got %v (total %d), want %v (2)", names, total, want)
	}
}

// byCreation returns the names of sites in creation order, as locations
// lists them: by creation time, then by ID for those created in the same
// millisecond.
func byCreation(s ...rc.SiteResource) []string {
	slices.SortStableFunc(s, func(a, b rc.SiteResource) int {
		if c := a.Timestamps.CreatedAt.Compare(*b.Timestamps.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(str(a.ResourceId), str(b.ResourceId))
	})
	var out []string
	for _, x := range s {
		out = append(out, str(x.Name))
	}
	return out
}

// TestInstanceCreateReusedRequest: a client reusing one request object
// across calls creates an instance after earlier calls set and cleared the
// optional references (the cleared custom config leaves [""]): empty
// values mean none, as in the original.
func TestInstanceCreateReusedRequest(t *testing.T) {
	p := newProject(t)
	c := p.c
	osr := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{
		Name: ptr("ubuntu"), Sha256: sha, ProfileName: ptr("ubuntu"), OsType: ptr(rc.OSTYPEMUTABLE)})).get(t)
	la := ok(c.LocalAccountServiceCreateLocalAccountWithResponse(ctx, p.name, rc.LocalAccountResource{Username: "ops",
		SshKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG ops@example"})).get(t)
	cc := ok(c.CustomConfigServiceCreateCustomConfigWithResponse(ctx, p.name, rc.CustomConfigResource{Name: "motd", Config: "#cloud-config\n"})).get(t)
	pol := ok(c.OSUpdatePolicyCreateOSUpdatePolicyWithResponse(ctx, p.name, rc.OSUpdatePolicy{Name: "latest", UpdatePolicy: ptr(rc.UPDATEPOLICYLATEST)})).get(t)
	host := func(name string) *string {
		return ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: name, Uuid: ptr(newUUID())})).get(t).ResourceId
	}

	customConfig := str(cc.ResourceId)
	req := rc.InstanceResource{HostID: host("h1"), OsID: osr.ResourceId, Kind: ptr(rc.INSTANCEKINDMETAL), Name: ptr("first"),
		SecurityFeature: ptr(rc.SECURITYFEATURESECUREBOOTANDFULLDISKENCRYPTION), LocalAccountID: la.ResourceId, CustomConfigID: &[]string{customConfig}}
	first := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, req)).get(t)
	if first.CustomConfigID == nil || len(*first.CustomConfigID) != 1 || str(first.LocalAccountID) != str(la.ResourceId) {
		t.Fatalf("first instance: customConfigID %v localAccountID %q", first.CustomConfigID, str(first.LocalAccountID))
	}

	// The next one: the caller clears what it set and adds a policy.
	customConfig = ""
	req.HostID, req.Name = host("h2"), ptr("second")
	req.SecurityFeature = ptr(rc.SECURITYFEATUREUNSPECIFIED)
	req.LocalAccountID = ptr("")
	req.CustomConfigID = &[]string{customConfig}
	req.OsUpdatePolicyID = pol.ResourceId
	second := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, req)).get(t)
	if second.CustomConfigID == nil || len(*second.CustomConfigID) != 0 || str(second.LocalAccountID) != "" || second.Localaccount != nil ||
		str(second.OsUpdatePolicyID) != str(pol.ResourceId) {
		t.Errorf("second instance: customConfigID %v localAccountID %q localaccount %v osUpdatePolicyID %q",
			second.CustomConfigID, str(second.LocalAccountID), second.Localaccount, str(second.OsUpdatePolicyID))
	}

	// And a PATCH of the first with the same object: its configs go.
	patched := ok(c.InstanceServicePatchInstanceWithResponse(ctx, p.name, str(first.ResourceId), &rc.InstanceServicePatchInstanceParams{FieldMask: ptr("customConfigID")},
		rc.InstanceResource{CustomConfigID: &[]string{""}})).get(t)
	if patched.CustomConfigID == nil || len(*patched.CustomConfigID) != 0 {
		t.Errorf("patched instance: customConfigID %v, want []", patched.CustomConfigID)
	}
}
