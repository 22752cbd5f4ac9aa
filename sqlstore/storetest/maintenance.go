package storetest

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

// An instance's OS update policy is a reference within its project: one
// of another project is refused like a policy that does not exist, and a
// policy in use (by an instance or a run) or an OS a policy targets cannot
// be deleted.
func testOSUpdateReferences(t *testing.T, s eim.Store) {
	p, other := project(t, s), project(t, s)
	os := create(t, s, p, &eim.OS{Name: "emt"}).(*eim.OS)
	pol := create(t, s, p, &eim.OSUpdatePolicy{Name: "to emt", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: os.ResourceID}).(*eim.OSUpdatePolicy)
	foreign := create(t, s, other, &eim.OSUpdatePolicy{Name: "elsewhere"}).(*eim.OSUpdatePolicy)
	host := create(t, s, p, &eim.Host{}).(*eim.Host)

	for _, id := range []string{"osupdatepolicy-00000000", foreign.ResourceID} {
		err := s.Update(ctx(t), p, func(tx eim.Tx) error {
			return tx.Create(ctx(t), &eim.Instance{HostID: host.ResourceID, OSUpdatePolicyID: id})
		})
		wantCode(t, err, eim.EINVALID)
		mustContain(t, err, "osUpdatePolicyID", id)
	}
	inst := create(t, s, p, &eim.Instance{HostID: host.ResourceID, OSUpdatePolicyID: pol.ResourceID}).(*eim.Instance)
	got, err := get(t, s, p, eim.KindInstance, inst.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*eim.Instance).OSUpdatePolicyID; g != pol.ResourceID {
		t.Fatalf("instance's policy: got %q, want %s", g, pol.ResourceID)
	}
	// Changing the reference to another project's policy is refused too.
	inst.OSUpdatePolicyID = foreign.ResourceID
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Update(ctx(t), inst) })
	wantCode(t, err, eim.EINVALID)
	mustContain(t, err, "osUpdatePolicyID")

	// In use by the instance: the policy and its target OS stay.
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOSUpdatePolicy, pol.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
	mustContain(t, err, pol.ResourceID)
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOS, os.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)

	// Freed by the instance, still applied by a run.
	inst.OSUpdatePolicyID = ""
	update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), inst) })
	run := create(t, s, p, &eim.OSUpdateRun{InstanceID: inst.ResourceID, AppliedPolicyID: pol.ResourceID, HostID: host.ResourceID}).(*eim.OSUpdateRun)
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOSUpdatePolicy, pol.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
	mustContain(t, err, pol.ResourceID)
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOSUpdateRun, run.ResourceID) })
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOSUpdatePolicy, pol.ResourceID) })
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindOS, os.ResourceID) })

	// A run's references stay within the project as well.
	err = s.Update(ctx(t), p, func(tx eim.Tx) error {
		return tx.Create(ctx(t), &eim.OSUpdateRun{InstanceID: inst.ResourceID, AppliedPolicyID: foreign.ResourceID})
	})
	wantCode(t, err, eim.EINVALID)
}

// The runs of an instance are its history: they go with it, and with its
// host, each with a delete event. The references of a run are hidden from
// the wire but reachable in filters through their edges, never by column.
func testOSUpdateRuns(t *testing.T, s eim.Store) {
	p := project(t, s)
	h1 := create(t, s, p, &eim.Host{}).(*eim.Host)
	h2 := create(t, s, p, &eim.Host{}).(*eim.Host)
	i1 := create(t, s, p, &eim.Instance{HostID: h1.ResourceID}).(*eim.Instance)
	i2 := create(t, s, p, &eim.Instance{HostID: h2.ResourceID}).(*eim.Instance)
	pol := create(t, s, p, &eim.OSUpdatePolicy{UpdatePolicy: eim.UpdatePolicyLatest}).(*eim.OSUpdatePolicy)
	run := func(in *eim.Instance, policy string, start, end uint64) string {
		return create(t, s, p, &eim.OSUpdateRun{InstanceID: in.ResourceID, HostID: in.HostID, AppliedPolicyID: policy,
			StartTime: start, EndTime: end}).Base().ResourceID
	}
	r1a := run(i1, pol.ResourceID, 10, 20)
	r1b := run(i1, "", 30, 0)
	r2 := run(i2, pol.ResourceID, 40, 0)

	got, err := get(t, s, p, eim.KindOSUpdateRun, r1a)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*eim.OSUpdateRun); g.InstanceID != i1.ResourceID || g.HostID != h1.ResourceID || g.AppliedPolicyID != pol.ResourceID {
		t.Fatalf("run references: got %+v", g)
	}
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{`instance.resourceId="` + i1.ResourceID + `"`, []string{r1a, r1b}},
		{`host.resourceId="` + h2.ResourceID + `"`, []string{r2}},
		{`appliedPolicy.resourceId="` + pol.ResourceID + `"`, []string{r1a, r2}},
		{`NOT has(appliedPolicy)`, []string{r1b}},
		{`endTime=0`, []string{r1b, r2}},
		{`instance.resourceId="` + i1.ResourceID + `" AND endTime=0`, []string{r1b}},
	} {
		items, total := list(t, s, p, eim.KindOSUpdateRun, eim.Query{Filter: c.filter})
		if got, want := ids(items), sorted(c.want...); !slices.Equal(got, want) || total != len(want) {
			t.Errorf("filter %s: got %v (total %d), want %v", c.filter, got, total, want)
		}
	}
	for _, f := range []string{`instance_id="` + i1.ResourceID + `"`, `instanceId="` + i1.ResourceID + `"`, `applied_policy_id=""`} {
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			_, _, err := tx.List(ctx(t), eim.KindOSUpdateRun, eim.Query{Filter: f})
			return err
		})
		wantCode(t, err, eim.EINVALID)
	}

	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, i1.ResourceID) })
	for _, id := range []string{r1a, r1b} {
		if _, err := get(t, s, p, eim.KindOSUpdateRun, id); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Errorf("run %s of a deleted instance: got %v, want not found", id, err)
		}
	}
	if _, err := get(t, s, p, eim.KindOSUpdateRun, r2); err != nil {
		t.Fatalf("run of another instance: %v", err)
	}
	evs, err := s.Events(ctx(t), rev, 100)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]eim.Op{}
	for _, e := range evs {
		ops[e.ID] = e.Op
	}
	for _, id := range []string{i1.ResourceID, r1a, r1b} {
		if ops[id] != eim.OpDeleted {
			t.Errorf("event of %s: got %q, want DELETED (events %+v)", id, ops[id], evs)
		}
	}
	// A run whose instance reference was cleared still goes with its host.
	update(t, s, p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindOSUpdateRun, r2)
		if err != nil {
			return err
		}
		r.(*eim.OSUpdateRun).InstanceID = ""
		return tx.Update(ctx(t), r)
	})
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, i2.ResourceID) })
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, h2.ResourceID) })
	if _, err := get(t, s, p, eim.KindOSUpdateRun, r2); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("run of a deleted host: got %v, want not found", err)
	}
}

// CountBy counts per combination of values, with the query's conditions
// and filter and within the project; an absent reference groups as "".
func testCountBy(t *testing.T, s eim.Store) {
	p, other := project(t, s), project(t, s)
	os1 := create(t, s, p, &eim.OS{Name: "a"}).(*eim.OS)
	os2 := create(t, s, p, &eim.OS{Name: "b"}).(*eim.OS)
	mk := func(project, os string, ind eim.StatusIndication, available string) {
		h := create(t, s, project, &eim.Host{}).(*eim.Host)
		create(t, s, project, &eim.Instance{HostID: h.ResourceID, OSID: os, UpdateStatusIndicator: ind, OsUpdateAvailable: available})
	}
	mk(p, os1.ResourceID, eim.StatusIdle, "")
	mk(p, os1.ResourceID, eim.StatusIdle, `{"os":"b"}`)
	mk(p, os1.ResourceID, eim.StatusError, "")
	mk(p, os2.ResourceID, eim.StatusInProgress, "")
	mk(p, "", eim.StatusUnspecified, "")
	mk(other, "", eim.StatusIdle, "")
	count := func(q eim.Query, fields ...string) (map[string]int, error) {
		var gs []eim.Group
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			var err error
			gs, err = tx.CountBy(ctx(t), eim.KindInstance, q, fields...)
			return err
		})
		out := map[string]int{}
		for _, g := range gs {
			if len(g.Values) != len(fields) {
				t.Fatalf("group %+v: want %d values", g, len(fields))
			}
			out[strings.Join(g.Values, "|")] += g.Count
		}
		return out, err
	}
	for _, c := range []struct {
		name   string
		q      eim.Query
		fields []string
		want   map[string]int
	}{
		{"two fields", eim.Query{}, []string{"osID", "updateStatusIndicator"}, map[string]int{
			os1.ResourceID + "|STATUS_INDICATION_IDLE": 2, os1.ResourceID + "|STATUS_INDICATION_ERROR": 1,
			os2.ResourceID + "|STATUS_INDICATION_IN_PROGRESS": 1, "|STATUS_INDICATION_UNSPECIFIED": 1}},
		{"one field", eim.Query{}, []string{"os_id"}, map[string]int{os1.ResourceID: 3, os2.ResourceID: 1, "": 1}},
		{"where", eim.Query{Where: []eim.Cond{{Field: "osUpdateAvailable", Value: nil}}}, []string{"osID"},
			map[string]int{os1.ResourceID: 2, os2.ResourceID: 1, "": 1}},
		{"filter", eim.Query{Filter: `os.name="a"`}, []string{"updateStatusIndicator"},
			map[string]int{"STATUS_INDICATION_IDLE": 2, "STATUS_INDICATION_ERROR": 1}},
		{"none", eim.Query{Filter: `name="nothing"`}, []string{"osID"}, map[string]int{}},
	} {
		got, err := count(c.q, c.fields...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	for _, fields := range [][]string{nil, {"nosuch"}, {"updateStatusTimestamp"}, {"host"}} {
		_, err := count(eim.Query{}, fields...)
		wantCode(t, err, eim.EINVALID)
	}
	_, err := count(eim.Query{Filter: "name=("}, "osID")
	wantCode(t, err, eim.EINVALID)

	// A JSON field groups by its stored JSON: equal lists together.
	md := func(kv ...string) eim.Metadata {
		var m eim.Metadata
		for i := 0; i+1 < len(kv); i += 2 {
			m = append(m, eim.MetadataItem{Key: kv[i], Value: kv[i+1]})
		}
		return m
	}
	for _, m := range []eim.Metadata{md("a", "1"), md("a", "1"), md("a", "1", "b", "2"), nil} {
		create(t, s, p, &eim.Region{Name: "r", Metadata: m})
	}
	create(t, s, other, &eim.Region{Name: "r", Metadata: md("c", "3")})
	var gs []eim.Group
	if err := s.View(ctx(t), p, func(tx eim.Tx) error {
		var err error
		gs, err = tx.CountBy(ctx(t), eim.KindRegion, eim.Query{}, "metadata")
		return err
	}); err != nil {
		t.Fatalf("count by metadata: %v", err)
	}
	byLabels := map[string]int{}
	for _, g := range gs {
		var m eim.Metadata
		if err := json.Unmarshal([]byte(g.Values[0]), &m); err != nil {
			t.Fatalf("count by metadata: group %q: %v", g.Values[0], err)
		}
		key := ""
		for _, it := range m {
			key += it.Key + "=" + it.Value + ";"
		}
		byLabels[key] += g.Count
	}
	if want := map[string]int{"a=1;": 2, "a=1;b=2;": 1, "": 1}; !maps.Equal(byLabels, want) {
		t.Errorf("count by metadata: got %v, want %v", byLabels, want)
	}
}

// Metadata pairs are recorded per project, once each, and go with it.
func testMetadataPairs(t *testing.T, s eim.Store) {
	p, other := project(t, s), project(t, s)
	pairs := func(project string) string {
		got, err := s.MetadataPairs(ctx(t), project)
		if err != nil {
			t.Fatalf("metadata pairs: %v", err)
		}
		out := ""
		for _, it := range got {
			out += it.Key + "=" + it.Value + ";"
		}
		return out
	}
	rec := func(project string, kv ...string) error {
		var m []eim.MetadataItem
		for i := 0; i+1 < len(kv); i += 2 {
			m = append(m, eim.MetadataItem{Key: kv[i], Value: kv[i+1]})
		}
		return s.RecordMetadataPairs(ctx(t), project, m)
	}
	if err := rec(p, "zone", "b", "zone", "a", "customer", "x"); err != nil {
		t.Fatal(err)
	}
	if err := rec(p, "zone", "a", "customer", ""); err != nil {
		t.Fatal(err)
	}
	if err := rec(other, "zone", "c"); err != nil {
		t.Fatal(err)
	}
	if got, want := pairs(p), "customer=;customer=x;zone=a;zone=b;"; got != want {
		t.Errorf("pairs: got %s, want %s", got, want)
	}
	wantCode(t, rec("no-such-project", "a", "b"), eim.ENOTFOUND)
	if err := s.ForgetMetadataPair(ctx(t), p, eim.MetadataItem{Key: "zone", Value: "a"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.ForgetMetadataPair(ctx(t), p, eim.MetadataItem{Key: "zone", Value: "a"}), eim.ENOTFOUND)
	wantCode(t, s.ForgetMetadataPair(ctx(t), p, eim.MetadataItem{Key: "zone", Value: "c"}), eim.ENOTFOUND)
	if got, want := pairs(p), "customer=;customer=x;zone=b;"; got != want {
		t.Errorf("pairs after forgetting zone=a: got %s, want %s", got, want)
	}
	if err := s.DeleteProject(ctx(t), other); err != nil {
		t.Fatal(err)
	}
	if got := pairs(other); got != "" {
		t.Errorf("pairs of a deleted project: got %s, want none", got)
	}
}
