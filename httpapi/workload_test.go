package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
)

func (e *env) workload(t *testing.T, name, externalID string) string {
	t.Helper()
	return e.must(t, 200, "POST", "~/compute/workloads", tokRW, map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "name": name, "externalId": externalID}).str("resourceId")
}

func (e *env) member(t *testing.T, workload, instance string) resp {
	t.Helper()
	return e.must(t, 200, "POST", "~/workload_members", tokRW, map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": workload, "instanceId": instance})
}

func q(filter string) string { return "?filter=" + url.QueryEscape(filter) }

// Workloads under both of the original's paths: create, read, replace,
// patch, list with filters, order and pages, delete; errors name the field.
func TestWorkloadCRUD(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	for _, base := range []string{"/compute/workloads", "/workloads"} {
		t.Run(base, func(t *testing.T) {
			ext := "ext" + base[1:4]
			c := e.must(t, 200, "POST", "~"+base, tokRW, map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "name": "blue", "externalId": ext,
				"status": "Provisioning: 1/3 (ok)"})
			id := c.str("resourceId")
			if !eim.ValidID(eim.KindWorkload, id) || c.str("workloadId") != id || c.str("kind") != "WORKLOAD_KIND_CLUSTER" ||
				c.str("externalId") != ext || c.str("status") != "Provisioning: 1/3 (ok)" {
				t.Fatalf("create: %s", c.raw)
			}
			if m, ok := c.obj["members"].([]any); !ok || len(m) != 0 {
				t.Errorf("members of a new workload: got %v, want []", c.obj["members"])
			}
			if ts, _ := c.obj["timestamps"].(map[string]any); ts == nil || ts["createdAt"] == nil {
				t.Errorf("timestamps: %s", c.raw)
			}
			got := e.must(t, 200, "GET", "~"+base+"/"+id, tokRO, nil)
			if string(got.raw) != string(c.raw) {
				t.Errorf("get: got %s, want %s", got.raw, c.raw)
			}
			// PUT replaces the writable fields; read-only ones sent back are ignored.
			put := e.must(t, 200, "PUT", "~"+base+"/"+id, tokRW, map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "name": "green",
				"members": []any{}, "workloadId": id, "resourceId": id})
			if put.str("name") != "green" || put.str("externalId") != "" || put.str("status") != "" {
				t.Errorf("put: %s", put.raw)
			}
			patch := e.must(t, 200, "PATCH", "~"+base+"/"+id+"?fieldMask=status", tokRW, map[string]any{"status": "Ready", "name": "ignored"})
			if patch.str("status") != "Ready" || patch.str("name") != "green" {
				t.Errorf("patch with fieldMask: %s", patch.raw)
			}
			patch = e.must(t, 200, "PATCH", "~"+base+"/"+id, tokRW, map[string]any{"external_id": ext})
			if patch.str("externalId") != ext || patch.str("status") != "Ready" {
				t.Errorf("patch without fieldMask: %s", patch.raw)
			}
			e.must(t, 200, "DELETE", "~"+base+"/"+id, tokRW, nil)
			wantError(t, e.do(t, "GET", "~"+base+"/"+id, tokRO, nil), 404, "NotFound", id)
		})
	}

	a, b, c := e.workload(t, "alpha", "c-a"), e.workload(t, "beta", "c-b"), e.workload(t, "gamma", "")
	for _, lc := range []struct {
		query   string
		want    []string
		total   int
		hasNext bool
	}{
		{"?orderBy=" + url.QueryEscape("name desc"), []string{c, b, a}, 3, false},
		{q(`externalId="c-*"`) + "&orderBy=name", []string{a, b}, 2, false},
		{q(`external_id = "c-b" OR name="gamma"`) + "&orderBy=name", []string{b, c}, 2, false},
		{q(`NOT has(members)`) + "&orderBy=name&pageSize=1&offset=1", []string{b}, 3, true},
		{q(`kind=WORKLOAD_KIND_CLUSTER AND resourceId="` + a + `"`), []string{a}, 1, false},
	} {
		for _, base := range []string{"/compute/workloads", "/workloads"} {
			r := e.must(t, 200, "GET", "~"+base+lc.query, tokRO, nil)
			items := r.items("workloads")
			var got []string
			for _, it := range items {
				got = append(got, it.(map[string]any)["resourceId"].(string))
			}
			if len(r.obj) != 3 || r.obj["hasNext"] != lc.hasNext {
				t.Errorf("%s%s: envelope %s", base, lc.query, r.raw)
			}
			if r.num("totalElements") != lc.total || len(got) != len(lc.want) {
				t.Fatalf("%s%s: got %v (total %d), want %v (total %d)", base, lc.query, got, r.num("totalElements"), lc.want, lc.total)
			}
			for i := range got {
				if got[i] != lc.want[i] {
					t.Errorf("%s%s: got %v, want %v", base, lc.query, got, lc.want)
					break
				}
			}
		}
	}

	for _, ec := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
		words  []string
	}{
		{"no kind", "POST", "~/compute/workloads", map[string]any{"name": "x"}, 400, "InvalidArgument", []string{"kind", "required"}},
		{"unspecified kind", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_UNSPECIFIED"}, 400, "InvalidArgument", []string{"kind"}},
		{"bad kind", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_VM"}, 400, "InvalidArgument", []string{"kind", "WORKLOAD_KIND_CLUSTER"}},
		{"long name", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "name": "n23456789012345678901234567890123456789012345678901"}, 400, "InvalidArgument", []string{"name"}},
		{"bad external id", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "externalId": "a;b"}, 400, "InvalidArgument", []string{"externalId"}},
		{"bad status", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "status": "a\"b"}, 400, "InvalidArgument", []string{"status"}},
		{"unknown field", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "desiredState": "WORKLOAD_STATE_PROVISIONED"}, 400, "InvalidArgument", []string{"desiredState"}},
		{"duplicate external id", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "externalId": "c-a"}, 409, "AlreadyExists", []string{"externalId", "c-a"}},
		{"patch into a duplicate", "PATCH", "~/workloads/" + c, map[string]any{"externalId": "c-b"}, 409, "AlreadyExists", []string{"externalId"}},
		{"put without kind", "PUT", "~/workloads/" + c, map[string]any{"name": "x"}, 400, "InvalidArgument", []string{"kind"}},
		{"malformed id (a known prefix: not found, as in the original)", "GET", "~/workloads/workload-xyz", nil, 404, "NotFound", []string{"workload-xyz"}},
		{"wrong prefix", "GET", "~/workloads/host-12345678", nil, 400, "InvalidArgument", []string{"host-12345678"}},
		{"other kind's id", "GET", "~/compute/workloads/" + e.host(t, "h"), nil, 400, "InvalidArgument", nil},
		{"missing", "DELETE", "~/workloads/workload-00000000", nil, 404, "NotFound", []string{"workload-00000000"}},
		{"read-only token", "POST", "~/workloads", map[string]any{"kind": "WORKLOAD_KIND_CLUSTER"}, 403, "PermissionDenied", nil},
		{"bad filter field", "GET", "~/workloads" + q(`desired_state=1`), nil, 400, "InvalidArgument", []string{"desired_state"}},
		{"bad order field", "GET", "~/workloads?orderBy=bogus", nil, 400, "InvalidArgument", []string{"bogus"}},
	} {
		t.Run(ec.name, func(t *testing.T) {
			tok := tokRW
			if ec.name == "read-only token" {
				tok = tokRO
			}
			wantError(t, e.do(t, ec.method, ec.path, tok, ec.body), ec.status, ec.code, ec.words...)
		})
	}
	// Another project does not see them, and may reuse an external ID.
	wantError(t, e.do(t, "GET", "/v1/projects/p2/workloads/"+a, tokRW2, nil), 404, "NotFound")
	e.must(t, 200, "POST", "/v1/projects/p2/workloads", tokRW2, map[string]any{"kind": "WORKLOAD_KIND_CLUSTER", "externalId": "c-a"})
}

// Members link instances to workloads: created and deleted, never changed;
// both ends show them; an instance is in one workload at most; a workload
// with members cannot be deleted; a member goes with its instance.
func TestWorkloadMembers(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	w1, w2 := e.workload(t, "one", "cluster-1"), e.workload(t, "two", "cluster-2")
	i1, i2, i3 := e.instance(t, "i1"), e.instance(t, "i2"), e.instance(t, "i3")

	m := e.member(t, w1, i1)
	mid := m.str("resourceId")
	wl, _ := m.obj["workload"].(map[string]any)
	inst, _ := m.obj["instance"].(map[string]any)
	mem, _ := m.obj["member"].(map[string]any)
	if !eim.ValidID(eim.KindWorkloadMember, mid) || m.str("workloadMemberId") != mid || m.str("kind") != "WORKLOAD_MEMBER_KIND_CLUSTER_NODE" ||
		m.str("workloadId") != w1 || m.str("instanceId") != i1 {
		t.Fatalf("create member: %s", m.raw)
	}
	if wl == nil || wl["resourceId"] != w1 || wl["externalId"] != "cluster-1" || inst == nil || inst["resourceId"] != i1 ||
		mem == nil || mem["resourceId"] != i1 || inst["host"] == nil || inst["os"] == nil {
		t.Fatalf("member's workload and instance: %s", m.raw)
	}
	if got := e.must(t, 200, "GET", "~/workload_members/"+mid, tokRO, nil); string(got.raw) != string(m.raw) {
		t.Errorf("get member: got %s, want %s", got.raw, m.raw)
	}
	m2 := e.member(t, w1, i2).str("resourceId")

	// The workload shows its members, each with its instance.
	for _, base := range []string{"/compute/workloads/", "/workloads/"} {
		w := e.must(t, 200, "GET", "~"+base+w1, tokRO, nil)
		members := w.items("members")
		if len(members) != 2 {
			t.Fatalf("workload members: %s", w.raw)
		}
		for _, x := range members {
			xm := x.(map[string]any)
			in, _ := xm["instance"].(map[string]any)
			if in == nil || (in["resourceId"] != i1 && in["resourceId"] != i2) || xm["workloadMemberId"] != xm["resourceId"] {
				t.Errorf("workload member: %v", xm)
			}
		}
	}
	// The instance shows its membership, with the workload.
	for _, path := range []string{"~/compute/instances/" + i1, "~/compute/instances" + q(`resourceId="`+i1+`"`)} {
		r := e.must(t, 200, "GET", path, tokRO, nil)
		obj := r.obj
		if list := r.items("instances"); list != nil {
			obj = list[0].(map[string]any)
		}
		wms, _ := obj["workloadMembers"].([]any)
		if len(wms) != 1 {
			t.Fatalf("%s: workloadMembers: %s", path, r.raw)
		}
		wm := wms[0].(map[string]any)
		wwl, _ := wm["workload"].(map[string]any)
		if wm["resourceId"] != mid || wm["kind"] != "WORKLOAD_MEMBER_KIND_CLUSTER_NODE" || wwl == nil || wwl["resourceId"] != w1 || wwl["name"] != "one" {
			t.Errorf("%s: workload member: %v", path, wm)
		}
	}
	if r := e.must(t, 200, "GET", "~/compute/instances/"+i3, tokRO, nil); fmt.Sprint(r.obj["workloadMembers"]) != "[]" {
		t.Errorf("instance in no workload: workloadMembers %v, want [] (as the original sends)", r.obj["workloadMembers"])
	}

	// Filters over the memberships, from either end, as the original's.
	ids := func(r resp, list string) map[string]bool {
		out := map[string]bool{}
		for _, it := range r.items(list) {
			out[it.(map[string]any)["resourceId"].(string)] = true
		}
		return out
	}
	for _, fc := range []struct {
		path string
		list string
		want []string
	}{
		{"~/compute/instances" + q("has(workload_members)"), "instances", []string{i1, i2}},
		{"~/compute/instances" + q("has(workloadMembers)"), "instances", []string{i1, i2}},
		{"~/compute/instances" + q("NOT has(workload_members)"), "instances", []string{i3}},
		{"~/compute/instances" + q(`workload_members.workload.external_id="cluster-1"`), "instances", []string{i1, i2}},
		{"~/compute/instances" + q(`workloadMembers.workload.resourceId="`+w2+`"`), "instances", nil},
		{"~/compute/instances" + q(`workload_members.kind=WORKLOAD_MEMBER_KIND_CLUSTER_NODE AND name="i2"`), "instances", []string{i2}},
		{"~/workload_members" + q(`workload.externalId="cluster-1"`), "workloadMembers", []string{mid, m2}},
		{"~/workload_members" + q(`instance.resourceId="`+i2+`"`), "workloadMembers", []string{m2}},
		{"~/workload_members" + q(`instance.name="i1"`) + "&orderBy=resourceId", "workloadMembers", []string{mid}},
		{"~/workload_members" + q(`has(instance) AND kind=WORKLOAD_MEMBER_KIND_CLUSTER_NODE`), "workloadMembers", []string{mid, m2}},
		{"~/workloads" + q("has(members)"), "workloads", []string{w1}},
		{"~/workloads" + q(`members.instance.name="i2"`), "workloads", []string{w1}},
	} {
		r := e.must(t, 200, "GET", fc.path, tokRO, nil)
		got := ids(r, fc.list)
		if len(got) != len(fc.want) || r.num("totalElements") != len(fc.want) {
			t.Errorf("%s: got %v, want %v", fc.path, got, fc.want)
			continue
		}
		for _, id := range fc.want {
			if !got[id] {
				t.Errorf("%s: got %v, want %v", fc.path, got, fc.want)
			}
		}
	}
	list := e.must(t, 200, "GET", "~/workload_members?orderBy="+url.QueryEscape("resourceId desc")+"&pageSize=1", tokRO, nil)
	if len(list.obj) != 3 || list.num("totalElements") != 2 || list.obj["hasNext"] != true || len(list.items("workloadMembers")) != 1 {
		t.Errorf("member list: %s", list.raw)
	}

	for _, ec := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
		words  []string
	}{
		{"second workload for an instance", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": w2, "instanceId": i1},
			409, "AlreadyExists", []string{"instanceId", i1, w1}},
		{"no kind", "POST", "~/workload_members", map[string]any{"workloadId": w2, "instanceId": i3}, 400, "InvalidArgument", []string{"kind"}},
		{"no workload", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "instanceId": i3}, 400, "InvalidArgument", []string{"workloadId"}},
		{"no instance", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workload_id": w2}, 400, "InvalidArgument", []string{"instanceId"}},
		{"bad instance id", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": w2, "instanceId": "host-00000000"},
			400, "InvalidArgument", []string{"instanceId"}},
		{"missing workload", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": "workload-00000000", "instanceId": i3},
			404, "NotFound", []string{"workloadId", "workload-00000000"}},
		{"missing instance", "POST", "~/workload_members", map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": w2, "instanceId": "inst-00000000"},
			404, "NotFound", []string{"instanceId", "inst-00000000"}},
		{"no PUT", "PUT", "~/workload_members/" + mid, map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}, 404, "NotFound", []string{"no operation"}},
		{"no PATCH", "PATCH", "~/workload_members/" + mid, map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}, 404, "NotFound", []string{"no operation"}},
		{"workload with members", "DELETE", "~/workloads/" + w1, nil, 400, "FailedPrecondition", []string{w1, "workload members", mid}},
		{"bad filter", "GET", "~/workload_members" + q("has(host)"), nil, 400, "InvalidArgument", []string{"host"}},
	} {
		t.Run(ec.name, func(t *testing.T) {
			wantError(t, e.do(t, ec.method, ec.path, tokRW, ec.body), ec.status, ec.code, ec.words...)
		})
	}

	// A client PUTs back an instance as it GETs it, memberships included.
	got := e.must(t, 200, "GET", "~/compute/instances/"+i1, tokRO, nil)
	body := got.obj
	body["name"] = "renamed"
	if r := e.must(t, 200, "PUT", "~/compute/instances/"+i1, tokRW, body); r.str("name") != "renamed" || len(r.items("workloadMembers")) != 1 {
		t.Errorf("put back: %s", r.raw)
	}

	// Deleting a member frees its instance for another workload.
	e.must(t, 200, "DELETE", "~/workload_members/"+m2, tokRW, nil)
	wantError(t, e.do(t, "GET", "~/workload_members/"+m2, tokRO, nil), 404, "NotFound", m2)
	e.member(t, w2, i2)

	// An instance being deleted takes no new membership, and its
	// membership goes with it.
	e.must(t, 200, "DELETE", "~/compute/instances/"+i3, tokRW, nil)
	wantError(t, e.do(t, "POST", "~/workload_members", tokRW, map[string]any{"kind": "WORKLOAD_MEMBER_KIND_CLUSTER_NODE", "workloadId": w1, "instanceId": i3}),
		400, "FailedPrecondition", "instanceId", i3, "being deleted")
	e.must(t, 200, "DELETE", "~/compute/instances/"+i1, tokRW, nil)
	e.must(t, 200, "GET", "~/workload_members/"+mid, tokRO, nil) // still there while the instance is cleaned up
	if err := e.inv.ConfirmDeleted(context.Background(), "p1", eim.KindInstance, i1); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do(t, "GET", "~/workload_members/"+mid, tokRO, nil), 404, "NotFound", mid)
	if w := e.must(t, 200, "GET", "~/workloads/"+w1, tokRO, nil); len(w.items("members")) != 0 {
		t.Errorf("workload after its member's instance went: %s", w.raw)
	}
	e.must(t, 200, "DELETE", "~/workloads/"+w1, tokRW, nil)
}
