package compat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	rc "github.com/eimhq/eim/compat/refclient"
)

// The calls of the original's web UI (open-edge-platform/orch-ui) that a
// client generated from the reference document cannot make as the UI
// makes them (issue 32): they go out as raw HTTP, exactly as the UI sends
// them, and their answers are decoded into the generated types.

// uiCall sends one request as the UI does (bearer token, JSON body) and
// returns the status and body.
func (p *project) uiCall(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, raw
}

// uiGet sends a request that must answer 200 and decodes the answer into
// out (a generated type: a body it cannot decode fails the test).
func (p *project) uiGet(t *testing.T, method, path string, body, out any) {
	t.Helper()
	code, raw := p.uiCall(t, method, path, body)
	if code != 200 {
		t.Fatalf("%s %s: got status %d, want 200; body %s", method, path, code, raw)
	}
	if out == nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s %s: answer does not decode into %T: %v: %s", method, path, out, err, raw)
	}
}

// TestWebUIAnyRegion: the UI asks for a site under the region "*" wherever
// it knows a site but not its region (host details, the site column,
// cluster pages); the original never read regionId on its site operations.
func TestWebUIAnyRegion(t *testing.T) {
	p := newProject(t)
	c := p.c
	reg := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("emea")})).get(t)
	other := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("apac")})).get(t)
	in := ok(c.SiteServiceCreateSiteWithResponse(ctx, p.name, str(reg.ResourceId), rc.SiteResource{Name: ptr("berlin")})).get(t)
	ok(c.SiteServiceCreateSiteWithResponse(ctx, p.name, str(other.ResourceId), rc.SiteResource{Name: ptr("tokyo")})).get(t)
	ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("lone")})).get(t)
	base := "/v1/projects/" + p.name + "/regions/*/sites"

	// The UI's two calls.
	var list rc.ListSitesResponse
	p.uiGet(t, "GET", base+"?pageSize=100", nil, &list)
	if list.TotalElements != 3 || len(list.Sites) != 3 {
		t.Errorf("sites of any region: got %d (%d listed), want all 3", list.TotalElements, len(list.Sites))
	}
	var got rc.SiteResource
	p.uiGet(t, "GET", base+"/"+str(in.ResourceId), nil, &got)
	if str(got.Name) != "berlin" || str(got.Region.ResourceId) != str(reg.ResourceId) {
		t.Errorf("site under any region: got %q in %q, want berlin in %s", str(got.Name), str(got.Region.ResourceId), str(reg.ResourceId))
	}

	// The other operations of the path ignore it too; a create takes the
	// body's region, as the original did.
	var made rc.SiteResource
	p.uiGet(t, "POST", base, rc.SiteResource{Name: ptr("paris"), RegionId: reg.ResourceId}, &made)
	if str(made.RegionId) != str(reg.ResourceId) {
		t.Errorf("site created under any region: regionId %q, want the body's %s", str(made.RegionId), str(reg.ResourceId))
	}
	var none rc.SiteResource
	p.uiGet(t, "POST", base, rc.SiteResource{Name: ptr("nowhere")}, &none)
	if str(none.RegionId) != "" {
		t.Errorf("site created under any region without one: regionId %q, want none", str(none.RegionId))
	}
	var patched rc.SiteResource
	p.uiGet(t, "PATCH", base+"/"+str(made.ResourceId), rc.SiteResource{Name: ptr("paris-2")}, &patched)
	if str(patched.Name) != "paris-2" || str(patched.RegionId) != str(reg.ResourceId) {
		t.Errorf("site patched under any region: %q in %q", str(patched.Name), str(patched.RegionId))
	}
	p.uiGet(t, "PUT", base+"/"+str(made.ResourceId), rc.SiteResource{Name: ptr("paris-3"), RegionId: other.ResourceId}, &patched)
	if str(patched.RegionId) != str(other.ResourceId) {
		t.Errorf("site moved under any region: regionId %q, want %s", str(patched.RegionId), str(other.ResourceId))
	}
	p.uiGet(t, "DELETE", base+"/"+str(made.ResourceId), nil, nil)
	call(c.SiteServiceGetSite3WithResponse(ctx, p.name, str(made.ResourceId), nil)).fails(t, 404, "NotFound")

	// The flat path's ?regionId takes it alike; a real region still scopes.
	p.uiGet(t, "GET", "/v1/projects/"+p.name+"/sites/"+str(in.ResourceId)+"?regionId=*", nil, &got)
	if code, raw := p.uiCall(t, "GET", "/v1/projects/"+p.name+"/regions/"+str(other.ResourceId)+"/sites/"+str(in.ResourceId), nil); code != 404 {
		t.Errorf("site under another region: got %d %s, want 404", code, raw)
	}
	// Anything else is still not a region ID.
	if code, raw := p.uiCall(t, "GET", "/v1/projects/"+p.name+"/regions/any/sites", nil); code != 400 {
		t.Errorf("sites under region \"any\": got %d %s, want 400", code, raw)
	}
}

// TestWebUIRegionWithoutID: with no region chosen the UI asks
// GET …/regions/ (an empty ID); the original's server dropped a trailing
// slash before routing, which makes it the list of regions.
func TestWebUIRegionWithoutID(t *testing.T) {
	p := newProject(t)
	ok(p.c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("emea")})).get(t)
	var list rc.ListRegionsResponse
	p.uiGet(t, "GET", "/v1/projects/"+p.name+"/regions/", nil, &list)
	if list.TotalElements != 1 || len(list.Regions) != 1 || str(list.Regions[0].Name) != "emea" {
		t.Errorf("GET …/regions/: got %d regions, want emea", list.TotalElements)
	}
	// Any path alike: …/sites/ lists the sites.
	var sites rc.ListSitesResponse
	p.uiGet(t, "GET", "/v1/projects/"+p.name+"/sites/", nil, &sites)
}

// TestWebUITotalSites: the location tree shows each region's site count
// from showTotalSites, which counts the sites of its sub-regions too (a
// region whose one site is in a sub-region shows "1 Sites").
func TestWebUITotalSites(t *testing.T) {
	p := newProject(t)
	c := p.c
	root := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("emea")})).get(t)
	sub := ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("germany"), ParentId: root.ResourceId})).get(t)
	ok(c.SiteServiceCreateSiteWithResponse(ctx, p.name, str(sub.ResourceId), rc.SiteResource{Name: ptr("berlin")})).get(t)
	l := ok(c.RegionServiceListRegionsWithResponse(ctx, p.name, &rc.RegionServiceListRegionsParams{PageSize: ptr(100), ShowTotalSites: ptr(true)})).get(t)
	for _, r := range l.Regions {
		if *r.TotalSites != 1 {
			t.Errorf("region %s: totalSites %d, want 1", str(r.Name), *r.TotalSites)
		}
	}
	if len(l.Regions) != 2 {
		t.Errorf("regions: got %d, want 2", len(l.Regions))
	}
}

// brokerResponse is the original metadata broker's MetadataResponse, as
// the UI's generated client (library/apis/metadata-broker) types it.
type brokerResponse struct {
	Metadata []struct {
		Key    string   `json:"key"`
		Values []string `json:"values"`
	} `json:"metadata"`
}

func (b brokerResponse) String() string {
	out := ""
	for _, m := range b.Metadata {
		out += m.Key + "="
		for i, v := range m.Values {
			if i > 0 {
				out += ","
			}
			out += v
		}
		out += ";"
	}
	return out
}

// TestWebUIMetadata: the UI reads the project's label keys and values for
// suggestions and, saving a host or a region, posts its labels and waits
// for the answer, both at the original's metadata broker's
// /v1/projects/{p}/metadata.
func TestWebUIMetadata(t *testing.T) {
	p := newProject(t)
	c := p.c
	ok(c.RegionServiceCreateRegionWithResponse(ctx, p.name, rc.RegionResource{Name: ptr("emea"),
		Metadata: &[]rc.MetadataItem{{Key: "zone", Value: "eu"}}})).get(t)
	ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID()),
		Metadata: &[]rc.MetadataItem{{Key: "customer", Value: "acme"}}})).get(t)
	path := "/v1/projects/" + p.name + "/metadata"
	var got brokerResponse
	p.uiGet(t, "GET", path, nil, &got)
	if got.String() != "customer=acme;zone=eu;" {
		t.Errorf("GET metadata: got %s, want the labels in use", got)
	}
	body := map[string]any{"metadata": []map[string]string{{"key": "customer", "value": "globex"}, {"key": "rack", "value": "r1"}}}
	p.uiGet(t, "POST", path, body, &got)
	if got.String() != "customer=acme,globex;rack=r1;zone=eu;" {
		t.Errorf("POST metadata: got %s", got)
	}
	p.uiGet(t, "GET", path, nil, &got)
	if got.String() != "customer=acme,globex;rack=r1;zone=eu;" {
		t.Errorf("GET after POST: got %s", got)
	}
}
