package inventory_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// fullProject fills e's project with one resource of every kind and every
// optional reference set: a host at a site of a region with a parent
// region, with a provider; its instance with an OS, an update policy with
// a target OS, a local account and custom configs, in a workload; an OS
// update run; schedules on a host, a site and a region; telemetry profiles
// of both variants.
func fullProject(e *env) {
	e.t.Helper()
	parent := e.region("parent", "", eim.MetadataItem{Key: "a", Value: "1"})
	region := e.region("child", parent.ResourceID, eim.MetadataItem{Key: "b", Value: "2"})
	site := e.site("s", region.ResourceID, eim.MetadataItem{Key: "c", Value: "3"})
	prov := e.create(&eim.Provider{Name: "p", ProviderKind: "PROVIDER_KIND_BAREMETAL", APIEndpoint: "https://p.example"}).(*eim.Provider)
	host := e.host("h", site.ResourceID)
	e.manager(eim.KindHost, host.ResourceID, func(r eim.Resource) { r.(*eim.Host).ProviderID = prov.ResourceID })
	os := e.os("ubuntu")
	target := e.immutableOS("emt")
	pol := e.create(&eim.OSUpdatePolicy{Name: "to emt", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: target.ResourceID}).(*eim.OSUpdatePolicy)
	acct := e.create(&eim.LocalAccount{Username: "ops", SSHKey: sshKey}).(*eim.LocalAccount)
	c1 := e.create(&eim.CustomConfig{Name: "one", Config: "#cloud-config"}).(*eim.CustomConfig)
	c2 := e.create(&eim.CustomConfig{Name: "two", Config: "#cloud-config"}).(*eim.CustomConfig)
	in := e.create(&eim.Instance{Name: "i", HostID: host.ResourceID, OSID: os.ResourceID, OSUpdatePolicyID: pol.ResourceID,
		LocalAccountID: acct.ResourceID, CustomConfigIDs: []string{c1.ResourceID, c2.ResourceID}}).(*eim.Instance)
	w := e.create(&eim.Workload{Kind: eim.WorkloadKindCluster, Name: "w", ExternalID: "w"}).(*eim.Workload)
	e.create(&eim.WorkloadMember{Kind: eim.WorkloadMemberKindClusterNode, WorkloadID: w.ResourceID, InstanceID: in.ResourceID})
	noErr(e.t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
		run := eim.OSUpdateRun{InstanceID: in.ResourceID, AppliedPolicyID: pol.ResourceID}
		return inventory.CreateOSUpdateRun(e.ctx, tx, &run, time.Unix(1000, 0))
	}))
	for _, t := range []struct{ host, site, region string }{{host.ResourceID, "", ""}, {"", site.ResourceID, ""}, {"", "", region.ResourceID}} {
		e.create(&eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 10,
			TargetHostID: t.host, TargetSiteID: t.site, TargetRegionID: t.region})
		e.create(&eim.RepeatedSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 60,
			CronMinutes: "0", CronHours: "*", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*",
			TargetHostID: t.host, TargetSiteID: t.site, TargetRegionID: t.region})
	}
	lg, mg := e.group(eim.TelemetryLogs, "logs", "syslog"), e.group(eim.TelemetryMetrics, "metrics", "cpu")
	e.logsProfile(lg.ResourceID, "SEVERITY_LEVEL_INFO", in.ResourceID, "", "")
	e.metricsProfile(mg.ResourceID, 60, "", site.ResourceID, "")
}

// TestExpandedAnswersAreTrees reads every kind the API serves, listed and
// one by one, from a project where every optional reference is set: each
// answer must encode, and be a tree — no object reached by two paths, so
// no cycle either (issue 31: a workload member's instance and member
// shared their host, and the API's filling-in of absent references then
// made a region its own parent). It also checks that the fixture sets
// every nested reference of every kind, so a new kind or reference is
// covered or fails here.
func TestExpandedAnswersAreTrees(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		fullProject(e)
		for _, k := range eim.Kinds() {
			if k == eim.KindWorkflow { // internal: not served by the API
				continue
			}
			page := ok(e.svc.List(e.ctx, e.proj, k, inventory.ListQuery{ShowTotalSites: true})).get(t)
			if len(page.Items) == 0 {
				t.Errorf("%s: the fixture has none: add one with every reference set", k)
				continue
			}
			set := map[string]bool{}
			for _, r := range page.Items {
				id := r.Base().ResourceID
				one := ok(e.svc.Get(e.ctx, e.proj, k, id)).get(t)
				for name, got := range map[string]eim.Resource{"list": r, "get": one} {
					if _, err := json.Marshal(got); err != nil {
						t.Errorf("%s %s (%s): encode: %v", k, id, name, err)
					}
					if err := tree(reflect.ValueOf(got), string(k), map[uintptr]string{}); err != nil {
						t.Errorf("%s %s (%s): %v", k, id, name, err)
					}
				}
				for _, name := range references(r) {
					set[name] = true
				}
			}
			for _, f := range eim.SchemaOf(k).Fields {
				if isReference(f.Type) && !set[f.Name] {
					t.Errorf("%s: no answer has %s set: give the fixture one", k, f.Name)
				}
			}
		}
	})
}

// isReference reports whether a field of type t holds nested resources.
func isReference(t reflect.Type) bool {
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Implements(reflect.TypeFor[eim.Resource]())
}

// references returns the names of r's nested-resource fields that are set.
func references(r eim.Resource) []string {
	var out []string
	for _, f := range eim.SchemaOf(r.ResourceKind()).Fields {
		if v := f.Value(r); isReference(f.Type) && !v.IsNil() && (v.Kind() != reflect.Slice || v.Len() > 0) {
			out = append(out, f.Name)
		}
	}
	return out
}

// tree checks that no struct pointer is reached twice from v; seen maps
// the pointers met to their paths.
func tree(v reflect.Value, path string, seen map[uintptr]string) error {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			return tree(v.Elem(), path, seen)
		}
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		if first, ok := seen[v.Pointer()]; ok {
			return fmt.Errorf("%s is the object at %s too: the answer must be a tree", path, first)
		}
		seen[v.Pointer()] = path
		return tree(v.Elem(), path, seen)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				if err := tree(v.Field(i), path+"."+f.Name, seen); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := tree(v.Index(i), fmt.Sprintf("%s[%d]", path, i), seen); err != nil {
				return err
			}
		}
	}
	return nil
}
