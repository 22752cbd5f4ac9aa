package inventory_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestProjects(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
		name := e.proj + "-x"
		p := ok(e.svc.CreateProject(e.ctx, name, "")).get(t)
		if !v4.MatchString(p.ID) {
			t.Errorf("generated id: got %q, want a v4 UUID", p.ID)
		}
		u := newUUID()
		p2 := ok(e.svc.CreateProject(e.ctx, e.proj+"-y", strings.ToUpper(u))).get(t)
		if p2.ID != u {
			t.Errorf("given id: got %q, want %q", p2.ID, u)
		}
		found := ok(e.svc.FindProject(e.ctx, name)).get(t)
		if found.ID != p.ID {
			t.Errorf("find: got %q, want %q", found.ID, p.ID)
		}
		bad := []struct{ name, id, msg string }{
			{"Upper", "", "name"},
			{"-lead", "", "name"},
			{"trail-", "", "name"},
			{strings.Repeat("a", 64), "", "name"},
			{"", "", "name"},
			{"ok-name", "not-a-uuid", "id"},
		}
		for _, c := range bad {
			_, err := e.svc.CreateProject(e.ctx, c.name, c.id)
			wantErr(t, err, eim.EINVALID, c.msg)
		}
		_, err := e.svc.CreateProject(e.ctx, name, "")
		wantErr(t, err, eim.ECONFLICT)

		// Not empty: refused with counts, unless forced.
		e2 := *e
		e2.proj = name
		h := e2.host("h", "")
		e2.site("s", "")
		e2.site("s2", "")
		wantErr(t, e.svc.DeleteProject(e.ctx, name, false), eim.EPRECONDITION, "2 sites", "1 hosts", "force")
		e2.get(eim.KindHost, h.ResourceID)
		noErr(t, e.svc.DeleteProject(e.ctx, name, true))
		_, err = e.svc.FindProject(e.ctx, name)
		wantErr(t, err, eim.ENOTFOUND)
		noErr(t, e.svc.DeleteProject(e.ctx, e.proj+"-y", false))
		wantErr(t, e.svc.DeleteProject(e.ctx, "no-such-project", false), eim.ENOTFOUND)

		list := ok(e.svc.ListProjects(e.ctx)).get(t)
		for _, p := range list {
			if p.Name == name {
				t.Errorf("deleted project %s still listed", name)
			}
		}
	})
}
