package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
)

type crudCase struct {
	name    string
	base    string
	kind    eim.Kind
	alias   string // the resourceId echo field, if the kind has one
	body    func(i int) map[string]any
	update  bool
	twoStep bool // delete is two-phase (desired DELETED): the resource may remain
}

// TestCRUD runs create, get, list, patch, put and delete on every kind
// through every path (aliases included).
func TestCRUD(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	region := e.region(t, "crud-region")
	cases := []crudCase{
		{"region", "/regions", eim.KindRegion, "regionID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("r", i), "metadata": []any{map[string]any{"key": "a", "value": "b"}}}
		}, true, false},
		{"site", "/sites", eim.KindSite, "siteID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("s", i), "regionId": region, "siteLat": 10, "siteLng": 20}
		}, true, false},
		{"site under region", "/regions/" + region + "/sites", eim.KindSite, "siteID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("s", i)}
		}, true, false},
		{"host", "/compute/hosts", eim.KindHost, "", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("h", i), "uuid": newUUID()}
		}, true, true},
		{"instance", "/compute/instances", eim.KindInstance, "instanceID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("i", i), "kind": "INSTANCE_KIND_METAL",
				"hostID": e.host(t, fmt.Sprint("ih", i)), "osID": e.os(t, fmt.Sprint("ios", i))}
		}, true, true},
		{"os", "/compute/os", eim.KindOS, "osResourceID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("os-a", i), "sha256": sha, "profileName": "ubuntu"}
		}, true, false},
		{"operating_systems", "/compute/operating_systems", eim.KindOS, "osResourceID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("os-b", i), "sha256": sha, "profileName": "ubuntu"}
		}, true, false},
		{"provider", "/providers", eim.KindProvider, "providerID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("pv", i), "providerKind": "PROVIDER_KIND_BAREMETAL", "apiEndpoint": "https://lxca.example/api"}
		}, false, false},
		{"local account", "/localAccounts", eim.KindLocalAccount, "localAccountID", func(i int) map[string]any {
			return map[string]any{"username": fmt.Sprint("user", i), "sshKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG user@example"}
		}, false, false},
		{"custom config", "/customConfigs", eim.KindCustomConfig, "", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("cfg", i), "config": "#cloud-config\nruncmd:\n  - echo hi\n"}
		}, false, false},
	}
	for _, base := range []string{"/schedules", "/compute/schedules"} {
		cases = append(cases, crudCase{"single" + base, base + "/single", eim.KindSingleSchedule, "singleScheduleID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("w", i), "scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "startSeconds": 1700000000, "endSeconds": 1700003600, "targetRegionId": region}
		}, true, false}, crudCase{"repeated" + base, base + "/repeated", eim.KindRepeatedSchedule, "repeatedScheduleID", func(i int) map[string]any {
			return map[string]any{"name": fmt.Sprint("rw", i), "scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "durationSeconds": 3600,
				"cronMinutes": "0", "cronHours": "3", "cronDayMonth": "*", "cronMonth": "*", "cronDayWeek": "*", "targetRegionId": region}
		}, true, false})
	}
	plural := func(k eim.Kind) string { return eim.SchemaOf(k).Plural }
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := "~" + c.base
			body := c.body(ci * 10)
			created := e.must(t, 200, "POST", p, tokRW, body)
			id := created.str("resourceId")
			if !eim.ValidID(c.kind, id) {
				t.Fatalf("created resourceId got %q, want a %s ID", id, c.kind)
			}
			if c.alias != "" && created.str(c.alias) != id {
				t.Errorf("%s got %q, want %q", c.alias, created.str(c.alias), id)
			}
			if created.obj["timestamps"] == nil {
				t.Errorf("created has no timestamps: %s", created.raw)
			}
			got := e.must(t, 200, "GET", p+"/"+id, tokRO, nil)
			if got.str("resourceId") != id {
				t.Errorf("get resourceId got %q, want %q", got.str("resourceId"), id)
			}
			list := e.must(t, 200, "GET", p+"?pageSize=100", tokRO, nil)
			found := false
			for _, it := range list.items(plural(c.kind)) {
				if it.(map[string]any)["resourceId"] == id {
					found = true
				}
			}
			if !found || list.num("totalElements") < 1 || list.obj["hasNext"] != false {
				t.Errorf("list got %s, want %s containing %s, totalElements ≥ 1, hasNext false", list.raw, plural(c.kind), id)
			}
			if c.update {
				patched := e.must(t, 200, "PATCH", p+"/"+id, tokRW, map[string]any{"name": "patched"})
				if patched.str("name") != "patched" {
					t.Errorf("patch name got %q, want patched", patched.str("name"))
				}
				put := map[string]any{}
				for k, v := range body { // the created body with another name
					put[k] = v
				}
				put["name"] = "replaced"
				replaced := e.must(t, 200, "PUT", p+"/"+id, tokRW, put)
				if replaced.str("name") != "replaced" || replaced.str("resourceId") != id {
					t.Errorf("put got %s, want name replaced and resourceId %s", replaced.raw, id)
				}
			} else {
				r := e.do(t, "PATCH", p+"/"+id, tokRW, map[string]any{"name": "x"})
				wantError(t, r, 404, "NotFound")
			}
			del := e.must(t, 200, "DELETE", p+"/"+id, tokRW, nil)
			if string(del.raw) != "{}\n" {
				t.Errorf("delete body got %q, want {}", del.raw)
			}
			if !c.twoStep {
				wantError(t, e.do(t, "GET", p+"/"+id, tokRO, nil), 404, "NotFound")
			}
		})
	}
}

func TestListPaging(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	empty := e.must(t, 200, "GET", "~/localAccounts", tokRO, nil)
	if !strings.Contains(string(empty.raw), `"localAccounts":[]`) || empty.num("totalElements") != 0 || empty.obj["hasNext"] != false {
		t.Fatalf("empty list got %s, want localAccounts [] totalElements 0 hasNext false", empty.raw)
	}
	for i := range 25 {
		e.region(t, fmt.Sprintf("page-%02d", i))
	}
	tests := []struct {
		query         string
		items, total  int
		hasNext       bool
		status        int
		mentionInFail string
	}{
		{"", 20, 25, true, 200, ""},
		{"?pageSize=10", 10, 25, true, 200, ""},
		{"?pageSize=10&offset=20", 5, 25, false, 200, ""},
		{"?pageSize=100", 25, 25, false, 200, ""},
		{"?offset=10000", 0, 25, false, 200, ""},
		{`?filter=name%3D%22page-1*%22`, 10, 10, false, 200, ""},
		{"?orderBy=name%20desc&pageSize=1", 1, 25, true, 200, ""},
		{"?unknownParam=1", 20, 25, true, 200, ""},
		{"?pageSize=0", 0, 0, false, 400, "pageSize"},
		{"?pageSize=101", 0, 0, false, 400, "pageSize"},
		{"?pageSize=abc", 0, 0, false, 400, "pageSize"},
		{"?offset=-1", 0, 0, false, 400, "offset"},
		{"?offset=10001", 0, 0, false, 400, "offset"},
		{"?filter=", 0, 0, false, 400, "filter"},
		{"?filter=name%3D", 0, 0, false, 400, ""},
		{"?showTotalSites=maybe", 0, 0, false, 400, "showTotalSites"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := e.do(t, "GET", "~/regions"+tt.query, tokRO, nil)
			if tt.status != 200 {
				wantError(t, r, tt.status, "InvalidArgument", tt.mentionInFail)
				return
			}
			if r.status != 200 {
				t.Fatalf("got status %d, want 200: %s", r.status, r.raw)
			}
			if n := len(r.items("regions")); n != tt.items || r.num("totalElements") != tt.total || r.obj["hasNext"] != tt.hasNext {
				t.Errorf("got %d items, total %d, hasNext %v; want %d, %d, %v", n, r.num("totalElements"), r.obj["hasNext"], tt.items, tt.total, tt.hasNext)
			}
		})
	}
	first := e.must(t, 200, "GET", "~/regions?orderBy=name%20desc&pageSize=1", tokRO, nil).items("regions")[0].(map[string]any)
	if first["name"] != "page-24" {
		t.Errorf("orderBy name desc: first got %v, want page-24", first["name"])
	}
}

func TestPatchAndPut(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	region := e.region(t, "pr")
	site := e.site(t, "ps", region)
	md := []any{map[string]any{"key": "env", "value": "prod"}}
	id := e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "h", "uuid": newUUID(), "metadata": md, "siteId": site}).str("resourceId")
	p := "~/compute/hosts/" + id

	// Without fieldMask only the fields in the body change.
	r := e.must(t, 200, "PATCH", p, tokRW, map[string]any{"name": "h2"})
	if r.str("name") != "h2" || len(r.items("metadata")) != 1 || r.str("siteId") != site {
		t.Fatalf("patch without mask got %s, want name h2, metadata and siteId kept", r.raw)
	}
	// With fieldMask only the named fields change, even if others are sent.
	r = e.must(t, 200, "PATCH", p+"?fieldMask=name", tokRW, map[string]any{"name": "h3", "metadata": []any{}})
	if r.str("name") != "h3" || len(r.items("metadata")) != 1 {
		t.Fatalf("patch with mask name got %s, want name h3 and metadata kept", r.raw)
	}
	// A masked field absent from the body is cleared; snake_case works.
	r = e.must(t, 200, "PATCH", p+"?fieldMask=site_id,metadata", tokRW, map[string]any{})
	if r.str("siteId") != "" || len(r.items("metadata")) != 0 || r.str("name") != "h3" {
		t.Fatalf("patch with mask site_id,metadata and empty body got %s, want siteId and metadata cleared, name kept", r.raw)
	}
	wantError(t, e.do(t, "PATCH", p+"?fieldMask=nope", tokRW, map[string]any{}), 400, "InvalidArgument", "nope")

	// PUT replaces every writable field: absent ones are cleared.
	rid := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "put", "metadata": md}).str("resourceId")
	r = e.must(t, 200, "PUT", "~/regions/"+rid, tokRW, map[string]any{"name": "put2"})
	if r.str("name") != "put2" || len(r.items("metadata")) != 0 {
		t.Fatalf("put got %s, want name put2 and metadata cleared", r.raw)
	}
	// Clients may PUT back what they GET: read-only fields are ignored.
	got := e.must(t, 200, "GET", p, tokRO, nil)
	got.obj["name"] = "roundtrip"
	r = e.must(t, 200, "PUT", p, tokRW, got.obj)
	if r.str("name") != "roundtrip" {
		t.Fatalf("put of a GET body got %s, want name roundtrip", r.raw)
	}
}

func TestSitesOfRegion(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	r1, r2 := e.region(t, "r1"), e.region(t, "r2")
	s1 := e.must(t, 200, "POST", "~/regions/"+r1+"/sites", tokRW, map[string]any{"name": "s1"})
	if s1.str("regionId") != r1 {
		t.Fatalf("site created under region got regionId %q, want %s", s1.str("regionId"), r1)
	}
	e.site(t, "s2", r2)
	for _, path := range []string{"~/regions/" + r1 + "/sites", "~/sites?regionId=" + r1} {
		l := e.must(t, 200, "GET", path, tokRO, nil)
		if len(l.items("sites")) != 1 || l.num("totalElements") != 1 {
			t.Errorf("GET %s got %s, want only s1", path, l.raw)
		}
	}
	id := s1.str("resourceId")
	wantError(t, e.do(t, "GET", "~/regions/"+r2+"/sites/"+id, tokRO, nil), 404, "NotFound")
	wantError(t, e.do(t, "DELETE", "~/regions/"+r2+"/sites/"+id, tokRW, nil), 404, "NotFound")
	wantError(t, e.do(t, "GET", "~/sites/"+id+"?regionId="+r2, tokRO, nil), 404, "NotFound")
	wantError(t, e.do(t, "GET", "~/regions/site-00000000/sites/"+id, tokRO, nil), 400, "InvalidArgument", "regionId")
	wantError(t, e.do(t, "POST", "~/regions/"+r1+"/sites", tokRW, map[string]any{"name": "x", "regionId": r2}), 400, "InvalidArgument", "regionId")
	e.must(t, 200, "GET", "~/regions/"+r1+"/sites/"+id, tokRO, nil)
	e.must(t, 200, "GET", "~/sites/"+id, tokRO, nil)
}
