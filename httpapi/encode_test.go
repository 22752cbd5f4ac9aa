package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
)

// fullProject fills p1 with resources of every kind the API serves, with
// every optional reference set: a host at a site of a region with a parent
// region, with a provider; its instance with an OS, an update policy with
// a target OS, a local account and custom configs, a member of a workload;
// an OS update run; schedules on a host, a site and a region; telemetry
// profiles of both variants. It returns the IDs by kind.
func (e *env) fullProject(t *testing.T) map[eim.Kind]string {
	t.Helper()
	ctx := context.Background()
	parent := e.region(t, "parent")
	region := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "child", "parentId": parent,
		"metadata": []any{map[string]any{"key": "a", "value": "1"}}}).str("resourceId")
	site := e.must(t, 200, "POST", "~/regions/"+region+"/sites", tokRW, map[string]any{"name": "s", "regionId": region}).str("resourceId")
	prov := e.must(t, 200, "POST", "~/providers", tokRW, map[string]any{"name": "p", "providerKind": "PROVIDER_KIND_BAREMETAL", "apiEndpoint": "https://p.example"}).str("resourceId")
	host := e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "h", "uuid": newUUID(), "siteId": site}).str("resourceId")
	// A host's provider is the onboarding module's to set.
	err := e.inv.Store().Update(ctx, "p1", func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, host)
		if err != nil {
			return err
		}
		r.(*eim.Host).ProviderID = prov
		return tx.Update(ctx, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	os := e.os(t, "ubuntu")
	pol := e.must(t, 200, "POST", "~/os-update-policies", tokRW, map[string]any{"name": "to emt", "updatePolicy": "UPDATE_POLICY_TARGET",
		"targetOsId": e.immutableOS(t, "emt")}).str("resourceId")
	acct, cc := e.localAccount(t, "p1", "ops"), e.customConfig(t, "p1", "one")
	inst := e.must(t, 200, "POST", "~/compute/instances", tokRW, map[string]any{"name": "i", "hostID": host, "osID": os,
		"osUpdatePolicyID": pol, "localAccountID": acct, "customConfigID": []string{cc, e.customConfig(t, "p1", "two")}}).str("resourceId")
	w := e.workload(t, "w", "w")
	member := e.member(t, w, inst).str("resourceId")
	var run string
	err = e.inv.Store().Update(ctx, "p1", func(tx eim.Tx) error {
		r := &eim.OSUpdateRun{InstanceID: inst, AppliedPolicyID: pol}
		err := inventory.CreateOSUpdateRun(ctx, tx, r, time.Unix(1_800_000_000, 0))
		run = r.ResourceID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var single, repeated string
	for _, target := range []map[string]any{{"targetHostId": host}, {"targetSiteId": site}, {"targetRegionId": region}} {
		s := map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "startSeconds": 1700000000}
		r := map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "durationSeconds": 60,
			"cronMinutes": "0", "cronHours": "*", "cronDayMonth": "*", "cronMonth": "*", "cronDayWeek": "*"}
		for k, v := range target {
			s[k], r[k] = v, v
		}
		single = e.must(t, 200, "POST", "~/schedules/single", tokRW, s).str("resourceId")
		repeated = e.must(t, 200, "POST", "~/schedules/repeated", tokRW, r).str("resourceId")
	}
	lg, mg := e.group(t, "/telemetry/groups/logs", "logs", "syslog"), e.group(t, "/telemetry/groups/metrics", "metrics", "cpu")
	lp := e.must(t, 200, "POST", "~/telemetry/profiles/logs", tokRW, map[string]any{"targetInstance": inst, "logLevel": "SEVERITY_LEVEL_INFO", "logsGroupId": lg}).str("resourceId")
	e.must(t, 200, "POST", "~/telemetry/profiles/metrics", tokRW, map[string]any{"targetSite": site, "metricsInterval": 60, "metricsGroupId": mg})
	return map[eim.Kind]string{
		eim.KindRegion: region, eim.KindSite: site, eim.KindHost: host, eim.KindInstance: inst, eim.KindOS: os,
		eim.KindProvider: prov, eim.KindSingleSchedule: single, eim.KindRepeatedSchedule: repeated,
		eim.KindLocalAccount: acct, eim.KindCustomConfig: cc, eim.KindTelemetryGroup: lg, eim.KindTelemetryProfile: lp,
		eim.KindOSUpdatePolicy: pol, eim.KindOSUpdateRun: run, eim.KindWorkload: w, eim.KindWorkloadMember: member,
	}
}

// TestEveryAnswerEncodes reads, in a project where every optional
// reference is set, every project-scoped GET operation of our OpenAPI
// document on both path families: each list, and each resource the list
// holds by its own path. None may fail (issue 31: once a workload member's
// host was at a site, its answers could not be encoded: 500 on every read
// of the project's members). The fixture has a resource of every kind the
// API serves, so a new kind fails here until it is given one.
func TestEveryAnswerEncodes(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	ids := e.fullProject(t)
	for _, k := range eim.Kinds() {
		if _, ok := ids[k]; !ok && k != eim.KindWorkflow { // workflows are internal
			t.Errorf("kind %s: the fixture has none: add one with every reference set", k)
		}
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.Spec(), &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{projectName}", "p1", "{regionId}", ids[eim.KindRegion])
	seen := map[eim.Kind]bool{}
	n := 0
	for path, ops := range doc.Paths {
		if _, ok := ops["get"]; !ok || strings.HasSuffix(path, "}") {
			continue
		}
		var target string
		switch {
		case strings.HasPrefix(path, "/v1/projects/{projectName}/"):
			target = fill.Replace(path)
		case strings.HasPrefix(path, api.LegacyPrefix+"/"):
			target = path + "?projectName=p1"
		default:
			continue
		}
		if strings.Contains(target, "{") {
			continue // a webhook's deliveries: not a resource answer
		}
		if servedByAModule(path) {
			continue // not the API's; no resources of the inventory
		}
		n++
		list := e.do(t, "GET", target, tokRO, nil)
		if list.status != 200 {
			t.Errorf("GET %s: got %d %s, want 200", target, list.status, list.raw)
			continue
		}
		for _, v := range list.obj {
			items, _ := v.([]any)
			for _, it := range items {
				id, _ := it.(map[string]any)["resourceId"].(string)
				k, ok := eim.KindOfID(id)
				if !ok {
					continue
				}
				seen[k] = true
				if _, ok := doc.Paths[path+"/{resourceId}"]; !ok {
					continue // a view (locations, schedules of all kinds): no path of its own
				}
				base, query, _ := strings.Cut(target, "?")
				one := base + "/" + id
				if query != "" {
					one += "?" + query
				}
				if got := e.do(t, "GET", one, tokRO, nil); got.status != 200 || got.str("resourceId") != id {
					t.Errorf("GET %s: got %d %s, want 200 with it", one, got.status, got.raw)
				}
			}
		}
	}
	if n < 50 {
		t.Errorf("%d list operations read, want ≥ 50 (both families)", n)
	}
	for k := range ids {
		if !seen[k] {
			t.Errorf("kind %s: no list answered one", k)
		}
	}
}
