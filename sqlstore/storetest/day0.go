package storetest

import (
	"reflect"
	"testing"

	"github.com/eimhq/eim"
)

// Project settings are stored with the project and replaced by UpdateProject.
func testProjectSettings(t *testing.T, s eim.Store) {
	c := ctx(t)
	want := eim.ProjectSettings{
		DefaultOSID:            "os-12345678",
		DefaultLocalAccountID:  "localaccount-12345678",
		DefaultCustomConfigIDs: []string{"customconfig-12345678", "customconfig-87654321"},
		EnrollmentTokenHash:    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		AutoOnboardEnrolled:    true,
		Description:            "Shop floor: line 2",
	}
	p := &eim.Project{Name: "settings", ID: "44444444-4444-4444-8444-444444444444", Settings: want}
	if err := s.CreateProject(c, p); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindProject(c, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Settings, want) {
		t.Fatalf("settings after CreateProject: got %+v, want %+v", got.Settings, want)
	}

	// Zero settings for a project created without them.
	plain := project(t, s)
	got, err = s.FindProject(c, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Settings, eim.ProjectSettings{}) {
		t.Fatalf("settings of a new project: got %+v, want zero", got.Settings)
	}

	want = eim.ProjectSettings{DefaultOSID: "os-aaaaaaaa"}
	upd := &eim.Project{Name: p.Name, Settings: want}
	if err := s.UpdateProject(c, upd); err != nil {
		t.Fatalf("UpdateProject: %v", err)
	}
	got, err = s.FindProject(c, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Settings, want) || got.ID != p.ID || !got.CreatedAt.Equal(p.CreatedAt.Time) {
		t.Fatalf("after UpdateProject: got %+v, want %+v with the same ID and creation time", got, want)
	}
	all, err := s.ListProjects(c)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, lp := range all {
		if lp.Name == p.Name {
			found = true
			if !reflect.DeepEqual(lp.Settings, want) {
				t.Errorf("ListProjects settings: got %+v, want %+v", lp.Settings, want)
			}
		}
	}
	if !found {
		t.Errorf("ListProjects: %s missing", p.Name)
	}
	wantCode(t, s.UpdateProject(c, &eim.Project{Name: "nosuch"}), eim.ENOTFOUND)
}

// Fields with json:"-" and a column (node credentials) are stored but not
// reachable by filters or conditions.
func testHiddenFields(t *testing.T, s eim.Store) {
	p := project(t, s)
	h := create(t, s, p, &eim.Host{Name: "n", NodeSecretHash: "abc", NodeCredGen: 7}).(*eim.Host)
	got, err := get(t, s, p, eim.KindHost, h.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*eim.Host); g.NodeSecretHash != "abc" || g.NodeCredGen != 7 {
		t.Fatalf("node credentials: got %q/%d, want abc/7", g.NodeSecretHash, g.NodeCredGen)
	}
	h.NodeSecretHash, h.NodeCredGen = "", 8
	update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), h) })
	got, _ = get(t, s, p, eim.KindHost, h.ResourceID)
	if g := got.(*eim.Host); g.NodeSecretHash != "" || g.NodeCredGen != 8 {
		t.Fatalf("node credentials after revoke: got %q/%d, want \"\"/8", g.NodeSecretHash, g.NodeCredGen)
	}
	for _, f := range []string{`nodeSecretHash = ""`, `node_secret_hash = ""`, `nodeCredGen = 8`, `node_cred_gen = 8`} {
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			_, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{Filter: f})
			return err
		})
		wantCode(t, err, eim.EINVALID)
	}
	for _, field := range []string{"nodeSecretHash", "node_secret_hash", "nodeCredGen"} {
		err := s.View(ctx(t), p, func(tx eim.Tx) error {
			_, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{Where: []eim.Cond{{Field: field, Value: ""}}})
			return err
		})
		if err == nil {
			t.Errorf("Where %s: got nil error, want the field refused", field)
		}
	}
}

// A workflow belongs to one instance (at most one per instance) and goes
// with its instance or its host, with a delete event.
func testWorkflowCascade(t *testing.T, s eim.Store) {
	p := project(t, s)
	h1 := create(t, s, p, &eim.Host{Name: "h1"}).(*eim.Host)
	i1 := create(t, s, p, &eim.Instance{Name: "i1", HostID: h1.ResourceID}).(*eim.Instance)
	w1 := create(t, s, p, &eim.Workflow{InstanceID: i1.ResourceID, HostID: h1.ResourceID, Attempt: 1, State: eim.WorkflowRunning}).(*eim.Workflow)
	h2 := create(t, s, p, &eim.Host{Name: "h2"}).(*eim.Host)
	w2 := create(t, s, p, &eim.Workflow{HostID: h2.ResourceID, Attempt: 1}).(*eim.Workflow)

	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		return tx.Create(ctx(t), &eim.Workflow{InstanceID: i1.ResourceID, HostID: h1.ResourceID})
	})
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "instanceId")

	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindInstance, i1.ResourceID) })
	_, err = get(t, s, p, eim.KindWorkflow, w1.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)
	if _, err := get(t, s, p, eim.KindWorkflow, w2.ResourceID); err != nil {
		t.Fatalf("workflow of another host after deleting an instance: %v", err)
	}
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, h2.ResourceID) })
	_, err = get(t, s, p, eim.KindWorkflow, w2.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)

	evs, err := s.Events(ctx(t), rev, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]eim.Op{}
	for _, e := range evs {
		got[e.ID] = e.Op
	}
	for _, id := range []string{w1.ResourceID, i1.ResourceID, w2.ResourceID, h2.ResourceID} {
		if got[id] != eim.OpDeleted {
			t.Errorf("event of %s: got %q, want DELETED (events %+v)", id, got[id], evs)
		}
	}

	// Another project does not see the workflow.
	other := project(t, s)
	w3 := create(t, s, p, &eim.Workflow{HostID: h1.ResourceID}).(*eim.Workflow)
	_, err = get(t, s, other, eim.KindWorkflow, w3.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)
}
