package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testTenantRecords: the tenant module's records of a project (applied
// defaults, conditions, a deletion) are read back as written, refused for
// a project that does not exist, show in the project (Deleting), and go
// with the project, so that a project of the same name starts afresh.
func testTenantRecords(t *testing.T, s eim.Store) {
	c := ctx(t)
	if err := s.CreateProject(c, &eim.Project{Name: "p", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	if v, a, err := s.AppliedDefaults(c, "p"); err != nil || v != 0 || len(a) != 0 {
		t.Fatalf("AppliedDefaults of a new project: got %d %v %v, want 0 and none", v, a, err)
	}
	applied := []eim.AppliedDefault{{Key: "a", ResourceID: "telemetrygroup-00000001", Digest: "d1"}, {Key: "b", ResourceID: "provider-00000002"}}
	if err := s.SaveAppliedDefaults(c, "p", 3, applied); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveAppliedDefaults(c, "p", 4, applied[:1]); err != nil {
		t.Fatal(err)
	}
	if v, a, err := s.AppliedDefaults(c, "p"); err != nil || v != 4 || !slices.Equal(a, applied[:1]) {
		t.Errorf("AppliedDefaults: got %d %v %v, want 4 %v", v, a, err, applied[:1])
	}
	if err := s.SaveAppliedDefaults(c, "nope", 1, nil); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("SaveAppliedDefaults of a missing project: got %v, want ENOTFOUND", err)
	}

	set := func(module string, ready bool, msg string) {
		t.Helper()
		if err := s.SetCondition(c, "p", eim.Condition{Module: module, Ready: ready, Message: msg}); err != nil {
			t.Fatalf("SetCondition(%s): %v", module, err)
		}
	}
	conds := func() []eim.Condition {
		t.Helper()
		cs, err := s.Conditions(c, "p")
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	set("tenant", false, "waiting")
	set("os", true, "loaded")
	cs := conds()
	if len(cs) != 2 || cs[0].Module != "os" || !cs[0].Ready || cs[1].Module != "tenant" || cs[1].Ready || cs[1].Message != "waiting" {
		t.Fatalf("Conditions: got %+v", cs)
	}
	since := cs[1].Since
	time.Sleep(5 * time.Millisecond)
	set("tenant", false, "still waiting")
	if cs := conds(); !cs[1].Since.Equal(since.Time) || cs[1].Message != "still waiting" {
		t.Errorf("a condition unchanged: got %+v, want since %v kept", cs[1], since)
	}
	set("tenant", true, "done")
	if cs := conds(); !cs[1].Ready || !cs[1].Since.After(since.Time) {
		t.Errorf("a condition that changed: got %+v, want a later since than %v", cs[1], since)
	}
	if err := s.SetCondition(c, "nope", eim.Condition{Module: "os"}); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("SetCondition of a missing project: got %v, want ENOTFOUND", err)
	}

	if _, err := s.FindProjectDeletion(c, "p"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("FindProjectDeletion before: got %v, want ENOTFOUND", err)
	}
	if p, err := s.FindProject(c, "p"); err != nil || p.Deleting {
		t.Errorf("project before its deletion: got %+v, %v", p, err)
	}
	d, err := s.StartProjectDeletion(c, "p", "first")
	if err != nil || d.Phase != "first" || d.Remaining != -1 || d.Started.IsZero() {
		t.Fatalf("StartProjectDeletion: got %+v, %v", d, err)
	}
	if again, err := s.StartProjectDeletion(c, "p", "other"); err != nil || again.Phase != "first" || !again.Started.Equal(d.Started.Time) {
		t.Errorf("StartProjectDeletion again: got %+v, %v; want the one under way", again, err)
	}
	if p, err := s.FindProject(c, "p"); err != nil || !p.Deleting {
		t.Errorf("FindProject while deleting: got %+v, %v; want Deleting", p, err)
	}
	if ps, err := s.ListProjects(c); err != nil || len(ps) != 1 || !ps[0].Deleting {
		t.Errorf("ListProjects while deleting: got %v, %v", ps, err)
	}
	d.Phase, d.Remaining, d.Error = "second", 12, "boom"
	if err := s.SaveProjectDeletion(c, d); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FindProjectDeletion(c, "p"); err != nil || got.Phase != "second" || got.Remaining != 12 || got.Error != "boom" {
		t.Errorf("FindProjectDeletion: got %+v, %v", got, err)
	}
	if ds, err := s.ProjectDeletions(c); err != nil || len(ds) != 1 || ds[0].Project != "p" {
		t.Errorf("ProjectDeletions: got %+v, %v", ds, err)
	}
	if _, err := s.StartProjectDeletion(c, "nope", "first"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("StartProjectDeletion of a missing project: got %v, want ENOTFOUND", err)
	}
	if err := s.SaveProjectDeletion(c, &eim.ProjectDeletion{Project: "nope", Phase: "x"}); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("SaveProjectDeletion of a missing project: got %v, want ENOTFOUND", err)
	}

	// The deletion finishes only with its own start: a project that took
	// the name since is not its.
	if err := s.FinishProjectDeletion(c, "p", eim.NewTime(d.Started.Add(-time.Second))); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("FinishProjectDeletion of another deletion: got %v, want ENOTFOUND", err)
	}
	if _, err := s.FindProject(c, "p"); err != nil {
		t.Fatalf("the project after another deletion's finish: %v", err)
	}
	// The records go with the project; the name starts afresh.
	if err := s.FinishProjectDeletion(c, "p", d.Started); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FindProject(c, "p"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("the project after its deletion's finish: got %v, want ENOTFOUND", err)
	}
	if err := s.FinishProjectDeletion(c, "p", d.Started); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("FinishProjectDeletion again: got %v, want ENOTFOUND", err)
	}
	if err := s.CreateProject(c, &eim.Project{Name: "p", ID: "00000000-0000-4000-8000-000000000002"}); err != nil {
		t.Fatalf("create the name again: %v", err)
	}
	v, a, err := s.AppliedDefaults(c, "p")
	cs, cerr := s.Conditions(c, "p")
	ds, derr := s.ProjectDeletions(c)
	p, perr := s.FindProject(c, "p")
	if err != nil || v != 0 || len(a) != 0 || cerr != nil || len(cs) != 0 || derr != nil || len(ds) != 0 || perr != nil || p.Deleting {
		t.Errorf("the name again: version %d %v %v, conditions %v %v, deletions %v %v, project %+v %v; want nothing of the old one",
			v, a, err, cs, cerr, ds, derr, p, perr)
	}
}
