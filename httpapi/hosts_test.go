package httpapi_test

import (
	"testing"

	"github.com/eimhq/eim/httpapi"
)

func TestHostLifecycle(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	uuid := newUUID()
	reg := e.must(t, 200, "POST", "~/compute/hosts/register", tokRW, map[string]any{"name": "reg", "uuid": uuid, "serial_number": "SN12345"})
	id := reg.str("resourceId")
	if reg.str("desiredState") != "HOST_STATE_REGISTERED" || reg.str("uuid") != uuid {
		t.Fatalf("register got %s, want desiredState HOST_STATE_REGISTERED and uuid %s", reg.raw, uuid)
	}
	wantError(t, e.do(t, "POST", "~/compute/hosts/register", tokRW, map[string]any{"name": "x", "uuid": newUUID(), "extra": 1}), 400, "InvalidArgument", "extra")
	wantError(t, e.do(t, "POST", "~/compute/hosts/register", tokRW, map[string]any{"name": "x", "autoOnboard": "yes"}), 400, "InvalidArgument", "autoOnboard")
	wantError(t, e.do(t, "POST", "~/compute/hosts/register", tokRO, map[string]any{"name": "x", "uuid": newUUID()}), 403, "PermissionDenied")

	up := e.must(t, 200, "PATCH", "~/compute/hosts/"+id+"/register", tokRW, map[string]any{"name": "reg2"})
	if up.str("name") != "reg2" {
		t.Fatalf("patch register got %s, want name reg2", up.raw)
	}
	wantError(t, e.do(t, "PATCH", "~/compute/hosts/inst-0000abcd/register", tokRW, map[string]any{}), 400, "InvalidArgument")
	// A host may be created without a name, as in the original.
	if got := e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "", "uuid": newUUID()}); got.str("name") != "" {
		t.Errorf("host without a name: got %s", got.raw)
	}
	// A created host (desired ONBOARDED) that has not onboarded yet goes
	// to REGISTERED with autoOnboard false, as in the original.
	created := e.host(t, "created")
	if got := e.must(t, 200, "PATCH", "~/compute/hosts/"+created+"/register", tokRW, map[string]any{"autoOnboard": false}).str("desiredState"); got != "HOST_STATE_REGISTERED" {
		t.Errorf("register autoOnboard false: got desiredState %q, want HOST_STATE_REGISTERED", got)
	}

	if r := e.must(t, 200, "PATCH", "~/compute/hosts/"+id+"/onboard", tokRW, nil); string(r.raw) != "{}\n" {
		t.Errorf("onboard body got %q, want {}", r.raw)
	}
	if got := e.must(t, 200, "GET", "~/compute/hosts/"+id, tokRO, nil).str("desiredState"); got != "HOST_STATE_ONBOARDED" {
		t.Errorf("after onboard desiredState got %q, want HOST_STATE_ONBOARDED", got)
	}
	wantError(t, e.do(t, "PATCH", "~/compute/hosts/host-0000abcd/onboard", tokRW, nil), 404, "NotFound")

	wantError(t, e.do(t, "PUT", "~/compute/hosts/"+id+"/invalidate?note=", tokRW, nil), 400, "InvalidArgument", "note")
	if r := e.must(t, 200, "PUT", "~/compute/hosts/"+id+"/invalidate?note=stolen", tokRW, nil); string(r.raw) != "{}\n" {
		t.Errorf("invalidate body got %q, want {}", r.raw)
	}
	got := e.must(t, 200, "GET", "~/compute/hosts/"+id, tokRO, nil)
	if got.str("desiredState") != "HOST_STATE_UNTRUSTED" || got.str("note") != "stolen" {
		t.Errorf("after invalidate got desiredState %q note %q, want HOST_STATE_UNTRUSTED and stolen", got.str("desiredState"), got.str("note"))
	}

	// Instances: create on a fresh host, invalidate.
	h2 := e.host(t, "h2")
	inst := e.must(t, 200, "POST", "~/compute/instances", tokRW, map[string]any{"name": "i", "hostID": h2, "osID": e.os(t, "ubuntu")}).str("resourceId")
	if r := e.must(t, 200, "PUT", "~/compute/instances/"+inst+"/invalidate", tokRW, nil); string(r.raw) != "{}\n" {
		t.Errorf("instance invalidate body got %q, want {}", r.raw)
	}
	if got := e.must(t, 200, "GET", "~/compute/instances/"+inst, tokRO, nil).str("desiredState"); got != "INSTANCE_STATE_UNTRUSTED" {
		t.Errorf("after instance invalidate desiredState got %q, want INSTANCE_STATE_UNTRUSTED", got)
	}
	wantError(t, e.do(t, "PUT", "~/compute/instances/host-0000abcd/invalidate", tokRW, nil), 400, "InvalidArgument")
	// A host with an instance may be deleted: the instance goes with it.
	if r := e.must(t, 200, "DELETE", "~/compute/hosts/"+h2, tokRW, nil); string(r.raw) != "{}\n" {
		t.Errorf("delete host with instance: body got %q, want {}", r.raw)
	}
	if got := e.must(t, 200, "GET", "~/compute/instances/"+inst, tokRO, nil).str("desiredState"); got != "INSTANCE_STATE_DELETED" {
		t.Errorf("instance of a deleted host: desiredState got %q, want INSTANCE_STATE_DELETED", got)
	}
}

func TestHostSummary(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	site := e.site(t, "s", e.region(t, "r"))
	e.host(t, "a")
	e.host(t, "b")
	e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "c", "uuid": newUUID(), "siteId": site})
	for _, path := range []string{"~/compute/hosts/summary", "~/compute/hosts_summary"} {
		r := e.must(t, 200, "GET", path, tokRO, nil)
		if r.num("total") != 3 || r.num("unallocated") != 2 || r.obj["error"] == nil || r.obj["running"] == nil {
			t.Errorf("GET %s got %s, want total 3, unallocated 2, error and running present", path, r.raw)
		}
	}
	r := e.must(t, 200, "GET", "~/compute/hosts/summary?filter=name%3D%22c%22", tokRO, nil)
	if r.num("total") != 1 {
		t.Errorf("filtered summary got %s, want total 1", r.raw)
	}
}

func TestLocations(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	rid := e.region(t, "berlin")
	sid := e.site(t, "berlin-1", rid)
	r := e.must(t, 200, "GET", "~/locations?name=berlin&showSites=true&showRegions=true", tokRO, nil)
	nodes := r.items("nodes")
	seen := map[string]string{}
	for _, n := range nodes {
		m := n.(map[string]any)
		seen[m["resourceId"].(string)] = m["type"].(string)
	}
	if seen[rid] != "RESOURCE_KIND_REGION" || seen[sid] != "RESOURCE_KIND_SITE" {
		t.Fatalf("locations got %s, want region %s and site %s", r.raw, rid, sid)
	}
	none := e.must(t, 200, "GET", "~/locations?name=nowhere&showSites=true", tokRO, nil)
	if nodes, ok := none.obj["nodes"].([]any); !ok || len(nodes) != 0 {
		t.Errorf("no match got %s, want nodes []", none.raw)
	}
	wantError(t, e.do(t, "GET", "~/locations?showSites=perhaps", tokRO, nil), 400, "InvalidArgument", "showSites")
}

func TestSchedules(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	rid := e.region(t, "r")
	hid := e.host(t, "h")
	e.must(t, 200, "POST", "~/schedules/single", tokRW, map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "startSeconds": 1700000000, "targetHostId": hid})
	e.must(t, 200, "POST", "~/compute/schedules/repeated", tokRW, map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "durationSeconds": 60,
		"cronMinutes": "*", "cronHours": "*", "cronDayMonth": "*", "cronMonth": "*", "cronDayWeek": "*", "targetRegionId": rid})
	for _, path := range []string{"~/schedules", "~/compute/schedules"} {
		r := e.must(t, 200, "GET", path, tokRO, nil)
		if len(r.items("singleSchedules")) != 1 || len(r.items("repeatedSchedules")) != 1 || r.num("totalElements") != 2 || r.obj["hasNext"] != false {
			t.Errorf("GET %s got %s, want one of each, totalElements 2, hasNext false", path, r.raw)
		}
	}
	r := e.must(t, 200, "GET", "~/schedules/single?hostId="+hid, tokRO, nil)
	if len(r.items("singleSchedules")) != 1 {
		t.Errorf("single schedules of host got %s, want 1", r.raw)
	}
	r = e.must(t, 200, "GET", "~/compute/schedules/repeated?regionId="+rid, tokRO, nil)
	if len(r.items("repeatedSchedules")) != 1 {
		t.Errorf("repeated schedules of region got %s, want 1", r.raw)
	}
	r = e.must(t, 200, "GET", "~/schedules?hostId=null", tokRO, nil)
	if len(r.items("singleSchedules")) != 0 || len(r.items("repeatedSchedules")) != 1 {
		t.Errorf("schedules without a host target got %s, want only the repeated one", r.raw)
	}
	wantError(t, e.do(t, "GET", "~/schedules?hostId=site-0000abcd", tokRO, nil), 400, "InvalidArgument", "hostId")
	wantError(t, e.do(t, "GET", "~/schedules?unixEpoch=soon", tokRO, nil), 400, "InvalidArgument", "unixEpoch")
	wantError(t, e.do(t, "GET", "~/schedules?pageSize=1000", tokRO, nil), 400, "InvalidArgument", "pageSize")
}
