package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
)

func (e *env) group(t *testing.T, base, name string, items ...any) string {
	t.Helper()
	return e.must(t, 200, "POST", "~"+base, tokRW, map[string]any{"name": name, "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": items}).str("resourceId")
}

func (e *env) instance(t *testing.T, name string) string {
	t.Helper()
	return e.must(t, 200, "POST", "~/compute/instances", tokRW, map[string]any{"name": name, "hostID": e.host(t, name), "osID": e.os(t, name)}).str("resourceId")
}

// Every telemetry path, aliases included: create, get, list, delete, with
// the list names and alias IDs of the original.
func TestTelemetryCRUD(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	site := e.site(t, "s", "")
	for _, c := range []struct {
		base, list, alias string
		kind              eim.Kind
		body              map[string]any
		absent            []string // keys of the other variant, never in answers
	}{
		{"/telemetry/groups/logs", "telemetryLogsGroups", "telemetryLogsGroupId", eim.KindTelemetryGroup,
			map[string]any{"name": "System logs", "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": []string{"systemd", "kern"}},
			[]string{"telemetryMetricsGroupId"}},
		{"/telemetry/loggroups", "telemetryLogsGroups", "telemetryLogsGroupId", eim.KindTelemetryGroup,
			map[string]any{"name": "Agents", "collector_kind": "TELEMETRY_COLLECTOR_KIND_CLUSTER", "groups": []string{"eim-agent"}},
			[]string{"telemetryMetricsGroupId"}},
		{"/telemetry/groups/metrics", "telemetryMetricsGroups", "telemetryMetricsGroupId", eim.KindTelemetryGroup,
			map[string]any{"name": "CPU", "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": []string{"cpu"}},
			[]string{"telemetryLogsGroupId"}},
		{"/telemetry/metricgroups", "telemetryMetricsGroups", "telemetryMetricsGroupId", eim.KindTelemetryGroup,
			map[string]any{"name": "Disk", "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": []string{"disk", "diskio"}},
			[]string{"telemetryLogsGroupId"}},
		{"/telemetry/profiles/logs", "telemetryLogsProfiles", "profileId", eim.KindTelemetryProfile,
			map[string]any{"targetSite": site, "logLevel": "SEVERITY_LEVEL_INFO", "logsGroupId": e.group(t, "/telemetry/loggroups", "g1", "a")},
			[]string{"metricsInterval", "metricsGroupId", "metricsGroup"}},
		{"/telemetry/profiles/metrics", "telemetryMetricsProfiles", "profileId", eim.KindTelemetryProfile,
			map[string]any{"targetSite": site, "metricsInterval": 30, "metricsGroupId": e.group(t, "/telemetry/metricgroups", "g2", "cpu")},
			[]string{"logLevel", "logsGroupId", "logsGroup"}},
	} {
		t.Run(c.base, func(t *testing.T) {
			created := e.must(t, 200, "POST", "~"+c.base, tokRW, c.body)
			id := created.str("resourceId")
			if !eim.ValidID(c.kind, id) || created.str(c.alias) != id {
				t.Fatalf("created %s: resourceId %q, %s %q", created.raw, id, c.alias, created.str(c.alias))
			}
			for _, k := range c.absent {
				if _, ok := created.obj[k]; ok {
					t.Errorf("created has %q, a field of the other variant: %s", k, created.raw)
				}
			}
			got := e.must(t, 200, "GET", "~"+c.base+"/"+id, tokRO, nil)
			if string(got.raw) != string(created.raw) {
				t.Errorf("get: got %s, want %s", got.raw, created.raw)
			}
			list := e.must(t, 200, "GET", "~"+c.base+"?pageSize=100", tokRO, nil)
			if len(list.obj) != 3 || list.num("totalElements") < 1 || list.obj["hasNext"] != false {
				t.Fatalf("list envelope: %s", list.raw)
			}
			var ids []string
			for _, it := range list.items(c.list) {
				ids = append(ids, it.(map[string]any)["resourceId"].(string))
			}
			if !slices.Contains(ids, id) {
				t.Fatalf("list %s: %v does not contain %s", c.list, ids, id)
			}
			e.must(t, 200, "DELETE", "~"+c.base+"/"+id, tokRW, nil)
			wantError(t, e.do(t, "GET", "~"+c.base+"/"+id, tokRO, nil), 404, "NotFound", id)
		})
	}
	// The read-only token cannot write; groups have no PUT or PATCH.
	wantError(t, e.do(t, "POST", "~/telemetry/loggroups", tokRO, map[string]any{}), 403, "PermissionDenied")
	g := e.group(t, "/telemetry/loggroups", "g", "a")
	wantError(t, e.do(t, "PATCH", "~/telemetry/loggroups/"+g, tokRW, map[string]any{"name": "x"}), 404, "NotFound", "no operation")
}

// Each route serves one variant: the other's resources are not found
// there and not listed.
func TestTelemetryVariantsApart(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	lg := e.group(t, "/telemetry/groups/logs", "logs", "systemd")
	mg := e.group(t, "/telemetry/groups/metrics", "metrics", "cpu")
	wantError(t, e.do(t, "GET", "~/telemetry/groups/metrics/"+lg, tokRO, nil), 404, "NotFound", "telemetry metrics group "+lg)
	wantError(t, e.do(t, "DELETE", "~/telemetry/metricgroups/"+lg, tokRW, nil), 404, "NotFound")
	wantError(t, e.do(t, "GET", "~/telemetry/groups/logs/"+mg, tokRO, nil), 404, "NotFound")
	for base, want := range map[string]string{"/telemetry/groups/logs": lg, "/telemetry/groups/metrics": mg} {
		r := e.must(t, 200, "GET", "~"+base, tokRO, nil)
		for _, list := range []string{"telemetryLogsGroups", "telemetryMetricsGroups"} {
			if items := r.items(list); items != nil && (len(items) != 1 || items[0].(map[string]any)["resourceId"] != want) {
				t.Errorf("%s: %s", base, r.raw)
			}
		}
	}
	site := e.site(t, "s", "")
	p := e.must(t, 200, "POST", "~/telemetry/profiles/logs", tokRW, map[string]any{"targetSite": site, "logLevel": "SEVERITY_LEVEL_WARN", "logsGroupId": lg}).str("resourceId")
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/metrics/"+p, tokRO, nil), 404, "NotFound")
	wantError(t, e.do(t, "PUT", "~/telemetry/profiles/metrics/"+p, tokRW, map[string]any{"targetSite": site, "metricsInterval": 30, "metricsGroupId": mg}), 404, "NotFound")
	// An ID of another kind is 400; one of this kind with a malformed
	// tail names nothing (404), as in the original.
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/logs/"+lg, tokRO, nil), 400, "InvalidArgument", "resourceId")
	wantError(t, e.do(t, "GET", "~/telemetry/groups/logs/telemetrygroup-1", tokRO, nil), 404, "NotFound")
}

func TestTelemetryValidation(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	lg := e.group(t, "/telemetry/loggroups", "logs", "systemd")
	mg := e.group(t, "/telemetry/metricgroups", "metrics", "cpu")
	site := e.site(t, "s", "")
	region := e.region(t, "r")
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	group := func(f func(m map[string]any)) map[string]any {
		m := map[string]any{"name": "g", "collectorKind": "TELEMETRY_COLLECTOR_KIND_HOST", "groups": []string{"cpu"}}
		f(m)
		return m
	}
	logs := func(f func(m map[string]any)) map[string]any {
		m := map[string]any{"targetSite": site, "logLevel": "SEVERITY_LEVEL_INFO", "logsGroupId": lg}
		f(m)
		return m
	}
	metrics := func(f func(m map[string]any)) map[string]any {
		m := map[string]any{"targetRegion": region, "metricsInterval": 60, "metricsGroupId": mg}
		f(m)
		return m
	}
	for _, c := range []struct {
		name   string
		base   string
		body   map[string]any
		status int
		code   string
		words  []string
	}{
		{"group no name", "/telemetry/loggroups", group(func(m map[string]any) { delete(m, "name") }), 400, "InvalidArgument", []string{"name: is required"}},
		{"group bad name", "/telemetry/loggroups", group(func(m map[string]any) { m["name"] = "a;b" }), 400, "InvalidArgument", []string{"name:"}},
		{"group long name", "/telemetry/loggroups", group(func(m map[string]any) { m["name"] = strings.Repeat("n", 51) }), 400, "InvalidArgument", []string{"name: is 51"}},
		{"group no collector", "/telemetry/metricgroups", group(func(m map[string]any) { delete(m, "collectorKind") }), 400, "InvalidArgument", []string{"collectorKind: is required"}},
		{"group bad collector", "/telemetry/metricgroups", group(func(m map[string]any) { m["collectorKind"] = "HOST" }), 400, "InvalidArgument", []string{"collectorKind: want one of"}},
		{"group no items", "/telemetry/metricgroups", group(func(m map[string]any) { m["groups"] = []string{} }), 400, "InvalidArgument", []string{"groups: is required"}},
		{"group 101 items", "/telemetry/metricgroups", group(func(m map[string]any) { m["groups"] = many }), 400, "InvalidArgument", []string{"groups: has 101 items"}},
		{"group bad item", "/telemetry/metricgroups", group(func(m map[string]any) { m["groups"] = []string{"cpu", "a/b"} }), 400, "InvalidArgument", []string{"groups[1]:"}},
		{"group items not strings", "/telemetry/metricgroups", group(func(m map[string]any) { m["groups"] = []int{1} }), 400, "InvalidArgument", []string{"groups: want an array of strings"}},
		{"group unknown field", "/telemetry/groups/logs", group(func(m map[string]any) { m["kind"] = "TELEMETRY_RESOURCE_KIND_METRICS" }), 400, "InvalidArgument", []string{`unknown field "kind"`}},
		{"group other alias", "/telemetry/groups/logs", group(func(m map[string]any) { m["telemetryMetricsGroupId"] = mg }), 400, "InvalidArgument", []string{"telemetryMetricsGroupId"}},
		{"group own alias ignored", "/telemetry/groups/logs", group(func(m map[string]any) { m["telemetryLogsGroupId"] = "x" }), 200, "", nil},
		{"logs profile ok", "/telemetry/profiles/logs", logs(func(map[string]any) {}), 200, "", nil},
		{"logs profile metrics field", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["metricsInterval"] = 30 }), 400, "InvalidArgument", []string{`unknown field "metricsInterval"`}},
		{"logs profile no level", "/telemetry/profiles/logs", logs(func(m map[string]any) { delete(m, "logLevel") }), 400, "InvalidArgument", []string{"logLevel: is required"}},
		{"logs profile bad level", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["logLevel"] = 4 }), 400, "InvalidArgument", []string{"logLevel: want one of"}},
		{"logs profile no target", "/telemetry/profiles/logs", logs(func(m map[string]any) { delete(m, "targetSite") }), 400, "InvalidArgument", []string{"exactly one of targetInstance, targetSite, targetRegion"}},
		{"logs profile two targets", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["targetRegion"] = region }), 400, "InvalidArgument", []string{"got 2"}},
		{"logs profile bad target", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["targetSite"] = region }), 400, "InvalidArgument", []string{"targetSite:"}},
		{"logs profile missing target", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["targetSite"] = "site-00000000" }), 404, "NotFound", []string{"targetSite: site-00000000 not found"}},
		{"logs profile metrics group", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["logsGroupId"] = mg }), 400, "InvalidArgument", []string{"logsGroupId:", "metrics group"}},
		{"logs profile missing group", "/telemetry/profiles/logs", logs(func(m map[string]any) { m["logsGroupId"] = "telemetrygroup-00000000" }), 404, "NotFound", []string{"logsGroupId:"}},
		{"logs profile no group", "/telemetry/profiles/logs", logs(func(m map[string]any) { delete(m, "logsGroupId") }), 400, "InvalidArgument", []string{"logsGroupId: is required"}},
		{"metrics profile ok", "/telemetry/profiles/metrics", metrics(func(map[string]any) {}), 200, "", nil},
		{"metrics profile logs field", "/telemetry/profiles/metrics", metrics(func(m map[string]any) { m["log_level"] = "SEVERITY_LEVEL_INFO" }), 400, "InvalidArgument", []string{`unknown field "log_level"`}},
		{"metrics profile 0 s", "/telemetry/profiles/metrics", metrics(func(m map[string]any) { m["metricsInterval"] = 0 }), 400, "InvalidArgument", []string{"metricsInterval: 0 is out of range"}},
		{"metrics profile negative", "/telemetry/profiles/metrics", metrics(func(m map[string]any) { m["metricsInterval"] = -5 }), 400, "InvalidArgument", []string{"metricsInterval:"}},
		{"metrics profile logs group", "/telemetry/profiles/metrics", metrics(func(m map[string]any) { m["metricsGroupId"] = lg }), 400, "InvalidArgument", []string{"metricsGroupId:", "logs group"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, "POST", "~"+c.base, tokRW, c.body)
			if c.status == 200 {
				if r.status != 200 {
					t.Fatalf("got %d %s, want 200", r.status, r.raw)
				}
				return
			}
			wantError(t, r, c.status, c.code, c.words...)
		})
	}
}

// Profiles are replaced (PUT) and patched (PATCH, with or without
// fieldMask) as the other resources; the variant never changes.
func TestTelemetryProfileUpdate(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	lg := e.group(t, "/telemetry/loggroups", "logs", "systemd")
	lg2 := e.group(t, "/telemetry/loggroups", "logs2", "kern")
	site := e.site(t, "s", "")
	region := e.region(t, "r")
	p := e.must(t, 200, "POST", "~/telemetry/profiles/logs", tokRW, map[string]any{"targetSite": site, "logLevel": "SEVERITY_LEVEL_INFO", "logsGroupId": lg})
	id := p.str("resourceId")
	path := "~/telemetry/profiles/logs/" + id
	r := e.must(t, 200, "PATCH", path, tokRW, map[string]any{"logLevel": "SEVERITY_LEVEL_DEBUG"})
	if r.str("logLevel") != "SEVERITY_LEVEL_DEBUG" || r.str("targetSite") != site {
		t.Fatalf("after patch: %s", r.raw)
	}
	// Moving the target needs the old one cleared: exactly one target.
	wantError(t, e.do(t, "PATCH", path, tokRW, map[string]any{"targetRegion": region}), 400, "InvalidArgument", "got 2")
	r = e.must(t, 200, "PATCH", path+"?fieldMask=targetSite,target_region", tokRW, map[string]any{"targetRegion": region})
	if r.str("targetSite") != "" || r.str("targetRegion") != region {
		t.Fatalf("after masked patch: %s", r.raw)
	}
	wantError(t, e.do(t, "PATCH", path+"?fieldMask=metricsInterval", tokRW, map[string]any{}), 400, "InvalidArgument", "metricsInterval")
	// PUT back what GET gave, with another group: read-only fields ignored.
	got := e.must(t, 200, "GET", path, tokRO, nil).obj
	got["logsGroupId"] = lg2
	r = e.must(t, 200, "PUT", path, tokRW, got)
	if r.str("logsGroupId") != lg2 || r.obj["logsGroup"].(map[string]any)["name"] != "logs2" || r.str("logLevel") != "SEVERITY_LEVEL_DEBUG" {
		t.Fatalf("after put: %s", r.raw)
	}
	// The group in use cannot be deleted; the profile's delete frees it.
	wantError(t, e.do(t, "DELETE", "~/telemetry/loggroups/"+lg2, tokRW, nil), 400, "FailedPrecondition", id)
	e.must(t, 200, "DELETE", path, tokRW, nil)
	e.must(t, 200, "DELETE", "~/telemetry/loggroups/"+lg2, tokRW, nil)
}

// The profile lists by instance, site or region, with showInherited.
func TestTelemetryProfileLists(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	mg := e.group(t, "/telemetry/metricgroups", "cpu", "cpu")
	root := e.region(t, "root")
	sub := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "sub", "parentId": root}).str("resourceId")
	site := e.site(t, "s", sub)
	inst := e.instance(t, "n1")
	var host string
	{
		r := e.must(t, 200, "GET", "~/compute/instances/"+inst, tokRO, nil)
		host = r.str("hostID")
	}
	e.must(t, 200, "PATCH", "~/compute/hosts/"+host, tokRW, map[string]any{"siteId": site})
	mk := func(target string, id string, interval int) string {
		return e.must(t, 200, "POST", "~/telemetry/profiles/metrics", tokRW, map[string]any{target: id, "metricsInterval": interval, "metricsGroupId": mg}).str("resourceId")
	}
	pInst, pSite, pSub, pRoot := mk("targetInstance", inst, 10), mk("targetSite", site, 20), mk("targetRegion", sub, 30), mk("targetRegion", root, 40)
	list := func(query string) []string {
		r := e.must(t, 200, "GET", "~/telemetry/profiles/metrics?"+query, tokRO, nil)
		var out []string
		for _, it := range r.items("telemetryMetricsProfiles") {
			out = append(out, it.(map[string]any)["resourceId"].(string))
		}
		if r.num("totalElements") != len(out) && !strings.Contains(query, "pageSize") {
			t.Errorf("%s: totalElements %d, %d items", query, r.num("totalElements"), len(out))
		}
		return out
	}
	sorted := func(v ...string) []string { slices.Sort(v); return v }
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", sorted(pInst, pSite, pSub, pRoot)},
		{"instanceId=" + inst, []string{pInst}},
		{"instanceId=" + inst + "&showInherited=true", sorted(pInst, pSite, pSub, pRoot)},
		{"siteId=" + site + "&showInherited=true", sorted(pSite, pSub, pRoot)},
		{"regionId=" + sub + "&showInherited=true", sorted(pSub, pRoot)},
		{"regionId=" + sub, []string{pSub}},
		{"showInherited=true", sorted(pInst, pSite, pSub, pRoot)},
		{"instanceId=" + inst + "&showInherited=true&orderBy=metricsInterval%20desc", []string{pRoot, pSub, pSite, pInst}},
		{"instanceId=" + inst + "&showInherited=true&orderBy=metricsInterval&pageSize=2&offset=1", []string{pSite, pSub}},
	} {
		if got := list(c.query); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.query, got, c.want)
		}
	}
	r := e.must(t, 200, "GET", "~/telemetry/profiles/metrics?instanceId="+inst+"&showInherited=true&pageSize=1", tokRO, nil)
	if r.num("totalElements") != 4 || r.obj["hasNext"] != true {
		t.Errorf("paged: %s", r.raw)
	}
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/metrics?instanceId="+host, tokRO, nil), 400, "InvalidArgument", "instanceId")
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/metrics?siteId=site-00000000&showInherited=true", tokRO, nil), 404, "NotFound", "siteId")
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/logs?regionId="+root+"&showInherited=maybe", tokRO, nil), 400, "InvalidArgument", "showInherited")
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/logs?pageSize=0", tokRO, nil), 400, "InvalidArgument", "pageSize")
	wantError(t, e.do(t, "GET", "~/telemetry/profiles/logs?orderBy=nosuch", tokRO, nil), 400, "InvalidArgument")
	// The instance's removal takes its profile along.
	e.must(t, 200, "DELETE", "~/compute/instances/"+inst, tokRW, nil)
}
