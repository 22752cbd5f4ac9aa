package eim_test

import (
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
