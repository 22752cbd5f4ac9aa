package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
)

func (e *env) immutableOS(t *testing.T, name string) string {
	t.Helper()
	return e.must(t, 200, "POST", "~/compute/os", tokRW, map[string]any{"name": name, "sha256": sha, "osType": "OS_TYPE_IMMUTABLE"}).str("resourceId")
}

// Policies under both paths: create each type, read, list, delete; no
// PUT or PATCH; the original's rules as 400s naming the field.
func TestOSUpdatePolicyCRUD(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	emt := e.immutableOS(t, "emt")
	for _, base := range []string{"/os-update-policies", "/os_update_policy"} {
		t.Run(base, func(t *testing.T) {
			latest := e.must(t, 200, "POST", "~"+base, tokRW, map[string]any{"name": "latest", "update_policy": "UPDATE_POLICY_LATEST"})
			id := latest.str("resourceId")
			if !eim.ValidID(eim.KindOSUpdatePolicy, id) || latest.str("updatePolicy") != "UPDATE_POLICY_LATEST" || latest.obj["targetOs"] != nil {
				t.Fatalf("latest: %s", latest.raw)
			}
			target := e.must(t, 200, "POST", "~"+base, tokRW, map[string]any{"name": "to emt", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": emt})
			os, _ := target.obj["targetOs"].(map[string]any)
			if os == nil || os["resourceId"] != emt || target.str("targetOsId") != emt {
				t.Fatalf("target OS not expanded: %s", target.raw)
			}
			apt := e.must(t, 200, "POST", "~"+base, tokRW, map[string]any{"name": "apt", "description": "weekly (security)",
				"updatePolicy": "UPDATE_POLICY_TARGET", "updateSources": []string{"Types: deb\nURIs: http://x/ubuntu\nSuites: noble\nComponents: main"},
				"updatePackages": "curl\nvim", "updateKernelCommand": "quiet splash"})
			got := e.must(t, 200, "GET", "~"+base+"/"+apt.str("resourceId"), tokRO, nil)
			if string(got.raw) != string(apt.raw) {
				t.Errorf("get: got %s, want %s", got.raw, apt.raw)
			}
			list := e.must(t, 200, "GET", "~"+base+"?filter=updatePolicy%3DUPDATE_POLICY_TARGET&orderBy=name&pageSize=1", tokRO, nil)
			if len(list.obj) != 3 || list.num("totalElements") < 2 || list.obj["hasNext"] != true || len(list.items("osUpdatePolicies")) != 1 {
				t.Fatalf("list: %s", list.raw)
			}
			for _, m := range []string{"PUT", "PATCH"} {
				wantError(t, e.do(t, m, "~"+base+"/"+id, tokRW, map[string]any{"name": "x"}), 404, "NotFound", "no operation")
			}
			for _, r := range []resp{latest, target, apt} {
				e.must(t, 200, "DELETE", "~"+base+"/"+r.str("resourceId"), tokRW, nil)
			}
			wantError(t, e.do(t, "GET", "~"+base+"/"+id, tokRO, nil), 404, "NotFound", id)
		})
	}

	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
		words  []string
	}{
		{"latest with packages", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_LATEST", "updatePackages": "vim"}, 400, "InvalidArgument",
			[]string{"updatePackages", "UPDATE_POLICY_LATEST"}},
		{"latest with target", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_LATEST", "targetOsId": emt}, 400, "InvalidArgument", []string{"targetOsId"}},
		{"both", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": emt, "updateSources": []string{"deb x"}}, 400, "InvalidArgument",
			[]string{"targetOsId", "cannot be combined"}},
		{"neither", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_TARGET"}, 400, "InvalidArgument", []string{"UPDATE_POLICY_TARGET needs"}},
		{"no policy", map[string]any{"name": "x"}, 400, "InvalidArgument", []string{"updatePolicy: is required"}},
		{"no name", map[string]any{"updatePolicy": "UPDATE_POLICY_LATEST"}, 400, "InvalidArgument", []string{"name: is required"}},
		{"bad enum", map[string]any{"name": "x", "updatePolicy": "NEWEST"}, 400, "InvalidArgument", []string{"updatePolicy"}},
		{"bad target", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": "os-1"}, 400, "InvalidArgument", []string{"targetOsId"}},
		{"missing target", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": "os-00000000"}, 404, "NotFound",
			[]string{"targetOsId", "os-00000000"}},
		{"mutable target", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": e.os(t, "ubuntu")}, 400, "InvalidArgument",
			[]string{"targetOsId", "mutable"}},
		{"unknown field", map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_LATEST", "osType": "OS_TYPE_MUTABLE"}, 400, "InvalidArgument", []string{"osType"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, e.do(t, "POST", "~/os-update-policies", tokRW, c.body), c.status, c.code, c.words...)
		})
	}
	// Nothing of the refused ones was stored.
	if n := e.must(t, 200, "GET", "~/os-update-policies", tokRO, nil).num("totalElements"); n != 0 {
		t.Errorf("policies after the refusals: got %d, want 0", n)
	}
	wantError(t, e.do(t, "POST", "~/os-update-policies", tokRO, map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_LATEST"}), 403, "PermissionDenied")
	wantError(t, e.do(t, "GET", "~/os-update-policies/os-00000000", tokRO, nil), 400, "InvalidArgument", "resourceId")
}

// An instance names a policy and shows it; the policy cannot be deleted
// while named. Runs are read, filtered and deleted through the API, never
// created or changed by it, and their references stay off the wire.
func TestOSUpdateRunsAPI(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	emt := e.immutableOS(t, "emt")
	pol := e.must(t, 200, "POST", "~/os-update-policies", tokRW, map[string]any{"name": "to emt", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": emt}).str("resourceId")
	inst := e.instance(t, "i1")
	other := e.instance(t, "i2")

	wantError(t, e.do(t, "PATCH", "~/compute/instances/"+inst, tokRW, map[string]any{"osUpdatePolicyID": "osupdatepolicy-00000000"}), 404, "NotFound", "osUpdatePolicyID")
	patched := e.must(t, 200, "PATCH", "~/compute/instances/"+inst, tokRW, map[string]any{"osUpdatePolicyID": pol, "updatePolicy": map[string]any{"name": "ignored"}})
	up, _ := patched.obj["updatePolicy"].(map[string]any)
	if up == nil || up["resourceId"] != pol || up["targetOs"] == nil {
		t.Fatalf("instance's updatePolicy: %s", patched.raw)
	}
	wantError(t, e.do(t, "DELETE", "~/os-update-policies/"+pol, tokRW, nil), 400, "FailedPrecondition", pol, inst)

	ctx := context.Background()
	var runs []string
	for _, in := range []string{inst, other, inst} {
		err := e.inv.Store().Update(ctx, "p1", func(tx eim.Tx) error {
			r := &eim.OSUpdateRun{InstanceID: in, AppliedPolicyID: pol}
			if err := inventory.CreateOSUpdateRun(ctx, tx, r, time.Unix(1_800_000_000, 0)); err != nil {
				return err
			}
			runs = append(runs, r.ResourceID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, base := range []string{"/os-update-runs", "/os_update_run"} {
		got := e.must(t, 200, "GET", "~"+base+"/"+runs[0], tokRO, nil)
		ri, _ := got.obj["instance"].(map[string]any)
		ap, _ := got.obj["appliedPolicy"].(map[string]any)
		if ri == nil || ri["resourceId"] != inst || ap == nil || ap["resourceId"] != pol || got.str("status") != eim.UpdateStatusUpdating ||
			got.str("statusIndicator") != "STATUS_INDICATION_IN_PROGRESS" || got.num("startTime") != 1_800_000_000 {
			t.Fatalf("run: %s", got.raw)
		}
		for _, k := range []string{"instanceId", "instance_id", "hostId", "appliedPolicyId", "applied_policy_id"} {
			if _, ok := got.obj[k]; ok {
				t.Errorf("run has %q on the wire: %s", k, got.raw)
			}
		}
		list := e.must(t, 200, "GET", "~"+base+`?filter=instance.resourceId%3D%22`+inst+`%22&orderBy=resourceId`, tokRO, nil)
		if list.num("totalElements") != 2 || len(list.items("osUpdateRuns")) != 2 {
			t.Fatalf("runs of %s: %s", inst, list.raw)
		}
		wantError(t, e.do(t, "POST", "~"+base, tokRW, map[string]any{"name": "x"}), 404, "NotFound", "no operation")
		wantError(t, e.do(t, "PATCH", "~"+base+"/"+runs[0], tokRW, map[string]any{"name": "x"}), 404, "NotFound", "no operation")
	}
	e.must(t, 200, "DELETE", "~/os-update-runs/"+runs[1], tokRW, nil)
	wantError(t, e.do(t, "GET", "~/os_update_run/"+runs[1], tokRO, nil), 404, "NotFound", runs[1])
	if n := e.must(t, 200, "GET", "~/os-update-runs", tokRO, nil).num("totalElements"); n != 2 {
		t.Fatalf("runs after a delete: got %d, want 2", n)
	}
	// Another project sees none of them.
	wantError(t, e.do(t, "GET", "/v1/projects/p2/os-update-runs/"+runs[0], tokRW2, nil), 404, "NotFound")
}

// The fleet-wide update view is routed beside /compute/instances/{id} and
// answers the counts per OS profile.
func TestUpdatesSummaryAPI(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	inst := e.instance(t, "i1")
	e.instance(t, "i2")
	ctx := context.Background()
	err := e.inv.Store().Update(ctx, "p1", func(tx eim.Tx) error {
		_, err := inventory.SetInstanceUpdateStatus(ctx, tx, inst, eim.UpdateStatusFailed, eim.StatusError, time.Unix(1_800_000_000, 0))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := e.must(t, 200, "GET", "~/compute/instances/updates_summary", tokRO, nil)
	oses := sum.items("operatingSystems")
	if sum.num("total") != 2 || sum.num("failed") != 1 || sum.num("unknown") != 1 || sum.num("upToDate") != 0 || len(oses) != 2 {
		t.Fatalf("summary: %s", sum.raw)
	}
	for _, k := range []string{"osResourceId", "name", "total", "upToDate", "updating", "failed", "unknown", "osUpdateAvailable"} {
		if _, ok := oses[0].(map[string]any)[k]; !ok {
			t.Errorf("per-OS counts lack %q: %s", k, sum.raw)
		}
	}
	f := e.must(t, 200, "GET", "~/compute/instances/updates_summary?filter=updateStatusIndicator%3DSTATUS_INDICATION_ERROR", tokRO, nil)
	if f.num("total") != 1 || len(f.items("operatingSystems")) != 1 {
		t.Fatalf("filtered summary: %s", f.raw)
	}
	wantError(t, e.do(t, "GET", "~/compute/instances/updates_summary?filter=bogus%3D1", tokRO, nil), 400, "InvalidArgument", "bogus")
	wantError(t, e.do(t, "GET", "~/compute/instances/updates_summary", "", nil), 401, "Unauthenticated")
	// The instance path next to it still serves instances.
	e.must(t, 200, "GET", "~/compute/instances/"+inst, tokRO, nil)
	wantError(t, e.do(t, "DELETE", "~/compute/instances/updates_summary", tokRW, nil), 400, "InvalidArgument", "resourceId")
}
