package eim_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestPrincipalRoles(t *testing.T) {
	proj := &eim.Project{Name: "acme", ID: "0b7f1a52-6a55-4b8e-9a57-3c2d43e1b2a1"}
	other := &eim.Project{Name: "other", ID: "9d7f1a52-6a55-4b8e-9a57-3c2d43e1b2a1"}
	cases := []struct {
		name        string
		roles       []string
		read, write bool
	}{
		{"none", nil, false, false},
		{"read by id", []string{proj.ID + "_im-r"}, true, false},
		{"write by id", []string{proj.ID + "_im-rw"}, true, true},
		{"read by name", []string{"acme_im-r"}, true, false},
		{"other project", []string{other.ID + "_im-rw"}, false, false},
		{"admin", []string{eim.RoleAdmin}, true, true},
		{"lookalike", []string{proj.ID + "_im-rwx", "x" + proj.ID + "_im-rw"}, false, false},
	}
	for _, c := range cases {
		p := &eim.Principal{Subject: "u", Roles: c.roles}
		if got := p.CanRead(proj); got != c.read {
			t.Errorf("%s: CanRead got %v, want %v", c.name, got, c.read)
		}
		if got := p.CanWrite(proj); got != c.write {
			t.Errorf("%s: CanWrite got %v, want %v", c.name, got, c.write)
		}
	}
	var nilP *eim.Principal
	if nilP.CanRead(proj) || nilP.IsAdmin() {
		t.Error("nil principal must have no access")
	}
	if got := eim.ProjectRole(proj, true); got != proj.ID+"_im-rw" {
		t.Errorf("ProjectRole got %q", got)
	}
}

// TestProjectRoles checks the role set minted for a project's writer and
// reader: the original web UI's roles keyed by the project's ID (it looks
// for "<uID>_<role>"), write roles only for the writer, and the principal
// EIM makes of them a writer or a reader as it should.
func TestProjectRoles(t *testing.T) {
	proj := &eim.Project{Name: "acme", ID: "0b7f1a52-6a55-4b8e-9a57-3c2d43e1b2a1"}
	id := proj.ID
	writer := eim.ProjectRoles(proj, true)
	for _, want := range []string{"_im-rw", "_im-r", "_cl-rw", "_cl-tpl-rw", "_alrt-rw", "_cat-rw", "_ao-rw", "_tc-r"} {
		if !slices.Contains(writer, id+want) {
			t.Errorf("writer's roles %v: no %s", writer, id+want)
		}
	}
	reader := eim.ProjectRoles(proj, false)
	for _, want := range []string{"_im-r", "_cl-r", "_cl-tpl-r", "_alrt-r", "_cat-r", "_tc-r"} {
		if !slices.Contains(reader, id+want) {
			t.Errorf("reader's roles %v: no %s", reader, id+want)
		}
	}
	for _, r := range reader {
		if strings.HasSuffix(r, "-rw") || !strings.HasPrefix(r, id+"_") {
			t.Errorf("reader's roles %v: %s is a write role or not the project's", reader, r)
		}
	}
	w := &eim.Principal{Subject: "w", Roles: writer}
	r := &eim.Principal{Subject: "r", Roles: reader}
	if !w.CanWrite(proj) || !w.CanWriteClusters(proj) {
		t.Errorf("writer's roles %v: got no write access", writer)
	}
	if !r.CanRead(proj) || !r.CanReadClusters(proj) || r.CanWrite(proj) || r.CanWriteClusters(proj) {
		t.Errorf("reader's roles %v: got read %v clusters %v, write %v clusters %v; want read only",
			reader, r.CanRead(proj), r.CanReadClusters(proj), r.CanWrite(proj), r.CanWriteClusters(proj))
	}
}
