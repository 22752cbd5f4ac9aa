package compat_test

import (
	"testing"

	rc "github.com/eimhq/eim/compat/refclient"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestRegionsAndSites: CRUD of regions and sites over the /v1 paths, and
// the empty references a generated client dereferences.
func TestRegionsAndSites(t *testing.T) {
	p := newProject(t)
	c := p.c
	root := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("europe"),
		Metadata: &[]rc.MetadataItem{{Key: "a", Value: "1"}}})).get(t)
	rootID := str(root.ResourceId)
	// A root region has an empty parentRegion, which clients dereference.
	if got := str(root.ParentRegion.ResourceId); got != "" {
		t.Errorf("root region: parentRegion.resourceId got %q, want \"\"", got)
	}
	child := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("germany"), ParentId: &rootID})).get(t)
	childID := str(child.ResourceId)

	got := ok(c.RegionServiceGetRegionWithResponse(ctx, p.name, childID)).get(t)
	if str(got.ParentRegion.ResourceId) != rootID || str(got.ParentRegion.Name) != "europe" || str(got.RegionID) != childID {
		t.Errorf("child region: got parentRegion %q %q, regionID %q", str(got.ParentRegion.ResourceId), str(got.ParentRegion.Name), str(got.RegionID))
	}
	if got.InheritedMetadata == nil || len(*got.InheritedMetadata) != 1 {
		t.Errorf("child region: inheritedMetadata got %v, want [a=1]", got.InheritedMetadata)
	}
	gotRoot := ok(c.RegionServiceGetRegionWithResponse(ctx, p.name, rootID)).get(t)
	if str(gotRoot.ParentRegion.Name) != "" || *gotRoot.TotalSites != 0 {
		t.Errorf("root region: parentRegion.name %q totalSites %d, want empty and 0", str(gotRoot.ParentRegion.Name), *gotRoot.TotalSites)
	}

	// Sites: under the region path and the flat path, with and without a region.
	site := ok(c.SiteServiceCreateSiteWithResponse(ctx, p.name, childID, rc.SiteResource{Name: ptr("berlin-1"), SiteLat: ptr(int32(525200000)), SiteLng: ptr(int32(134050000))})).get(t)
	siteID := str(site.ResourceId)
	if str(site.RegionId) != childID || str(site.Region.ResourceId) != childID {
		t.Errorf("site under region: regionId %q region %q, want %s", str(site.RegionId), str(site.Region.ResourceId), childID)
	}
	lone := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("lone")})).get(t)
	// A site without a region has an empty region object.
	if str(lone.Region.ResourceId) != "" || str(lone.Region.Name) != "" {
		t.Errorf("site without region: region got %q %q, want empty", str(lone.Region.ResourceId), str(lone.Region.Name))
	}
	sites := ok(c.SiteServiceListSites3WithResponse(ctx, p.name, &rc.SiteServiceListSites3Params{OrderBy: ptr("name desc"), PageSize: ptr(10)})).get(t)
	if sites.TotalElements != 2 || len(sites.Sites) != 2 || str(sites.Sites[0].Name) != "lone" {
		t.Errorf("site list: got %d, first %q; want 2, lone first", sites.TotalElements, str(sites.Sites[0].Name))
	}
	for _, s := range sites.Sites {
		_ = str(s.Region.ResourceId) // dereferenced by clients
	}
	under := ok(c.SiteServiceListSitesWithResponse(ctx, p.name, childID, nil)).get(t)
	if under.TotalElements != 1 || str(under.Sites[0].ResourceId) != siteID {
		t.Errorf("sites under region: got %d", under.TotalElements)
	}

	// Update: PUT and PATCH.
	put := ok(c.SiteServiceUpdateSite3WithResponse(ctx, p.name, siteID, nil, rc.SiteResource{Name: ptr("berlin-2"), RegionId: &childID})).get(t)
	if str(put.Name) != "berlin-2" {
		t.Errorf("site PUT: name %q", str(put.Name))
	}
	patched := ok(c.RegionServicePatchRegionWithResponse(ctx, p.name, rootID, nil, rc.RegionResource{Name: ptr("emea")})).get(t)
	if str(patched.Name) != "emea" {
		t.Errorf("region PATCH: name %q", str(patched.Name))
	}
	regions := ok(c.RegionServiceListRegionsWithResponse(ctx, p.name, &rc.RegionServiceListRegionsParams{ShowTotalSites: ptr(true), OrderBy: ptr("resource_id")})).get(t)
	if regions.TotalElements != 2 {
		t.Errorf("region list: got %d, want 2", regions.TotalElements)
	}
	for _, r := range regions.Regions {
		_ = str(r.ParentRegion.ResourceId)
		if str(r.ResourceId) == childID && *r.TotalSites != 1 {
			t.Errorf("region list: %s totalSites %d, want 1", childID, *r.TotalSites)
		}
	}

	// Errors.
	call(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("x"), RegionId: ptr("region-0000dead")})).fails(t, 404, "NotFound", "regionId")
	call(c.RegionServiceGetRegionWithResponse(ctx, p.name, "site-12345678")).fails(t, 400, "InvalidArgument")
	call(c.RegionServiceGetRegionWithResponse(ctx, p.name, "region-0000dead")).fails(t, 404, "NotFound")
	call(c.RegionServiceDeleteRegionWithResponse(ctx, p.name, rootID)).fails(t, 400, "FailedPrecondition")
	call(c.RegionServiceListRegionsWithResponse(ctx, p.name, &rc.RegionServiceListRegionsParams{OrderBy: ptr("nosuchfield")})).fails(t, 400, "InvalidArgument", "orderBy")

	// Delete, bottom up.
	call(c.SiteServiceDeleteSiteWithResponse(ctx, p.name, childID, siteID)).ok(t)
	call(c.SiteServiceDeleteSite3WithResponse(ctx, p.name, str(lone.ResourceId), nil)).ok(t)
	call(c.RegionServiceDeleteRegionWithResponse(ctx, p.name, childID)).ok(t)
	call(c.RegionServiceDeleteRegionWithResponse(ctx, p.name, rootID)).ok(t)
	call(c.SiteServiceGetSite3WithResponse(ctx, p.name, siteID, nil)).fails(t, 404, "NotFound")
}
