package compat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The original's tenant manager (its /v1/projects paths) is not in the
// reference document, so the generated client does not cover it: these
// tests send the requests the original's web UI sends, over raw HTTP.

// tmProject is a project as the original's web UI reads it (its generated
// tenancy client: ProjectProjectGet with name).
type tmProject struct {
	Name *string `json:"name"`
	Spec *struct {
		Description *string `json:"description"`
	} `json:"spec"`
	Status *struct {
		ProjectStatus *struct {
			StatusIndicator *string `json:"statusIndicator"`
			Message         *string `json:"message"`
			TimeStamp       *int64  `json:"timeStamp"`
			UID             *string `json:"uID"`
		} `json:"projectStatus"`
	} `json:"status"`
}

// uiRequest sends a request with the headers the original's web UI sends
// (its RTK Query base query: the bearer token, JSON).
func uiRequest(t *testing.T, tok, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

// listTM is GET /v1/projects as the UI's project switcher sends it.
func listTM(t *testing.T, tok string) []tmProject {
	t.Helper()
	st, raw := uiRequest(t, tok, "GET", "/v1/projects?member-role=true", nil)
	if st != 200 {
		t.Fatalf("GET /v1/projects?member-role=true: got %d %s, want 200", st, raw)
	}
	var list []tmProject
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("GET /v1/projects?member-role=true: not the tenant manager's array (%v): %s", err, raw)
	}
	return list
}

func findTM(list []tmProject, name string) *tmProject {
	for i := range list {
		if list[i].Name != nil && *list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// TestTenantManagerProjects sends the original web UI's project calls:
// the project switcher's list (a plain array of the tenant manager's
// projects, the uID its roles are keyed with), and the Projects page's
// create (PUT with a description), rename (PUT again), get and delete,
// with the status indicator in progress while the project is set up or
// deleted.
func TestTenantManagerProjects(t *testing.T) {
	p := newProject(t)

	// The switcher, with the project's read-write token: its project,
	// with its ID as uID.
	list := listTM(t, p.tok)
	got := findTM(list, p.name)
	if got == nil || len(list) != 1 {
		t.Fatalf("list with %s's token: got %d projects, want %s alone", p.name, len(list), p.name)
	}
	ps := got.Status.ProjectStatus
	if str(ps.UID) != p.id {
		t.Errorf("uID: got %q, want the project's ID %q", str(ps.UID), p.id)
	}
	if ps.TimeStamp == nil || *ps.TimeStamp < time.Now().Add(-time.Hour).Unix() || *ps.TimeStamp > time.Now().Unix()+1 {
		t.Errorf("timeStamp: got %v, want the Unix time in seconds of the status", ps.TimeStamp)
	}
	if got.Spec == nil {
		t.Errorf("no spec")
	}
	// The admin's list (the Projects page, no member-role) holds it too.
	if st, raw := uiRequest(t, srv.admin, "GET", "/v1/projects", nil); st != 200 || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		t.Fatalf("GET /v1/projects as admin: got %d %.200s, want 200 and an array", st, raw)
	}

	// Create as the Projects page does: PUT with the display name.
	name := p.name + "-ui"
	st, raw := uiRequest(t, srv.admin, "PUT", "/v1/projects/"+name, map[string]string{"description": "Shop floor"})
	if st != 200 {
		t.Fatalf("PUT /v1/projects/%s: got %d %s, want 200", name, st, raw)
	}
	var created tmProject
	if err := json.Unmarshal(raw, &created); err != nil || created.Status == nil || created.Status.ProjectStatus == nil {
		t.Fatalf("PUT answer: %v: %s", err, raw)
	}
	uid := str(created.Status.ProjectStatus.UID)
	if len(uid) != 36 {
		t.Errorf("created project's uID %q is not a UUID", uid)
	}
	// Set up by the modules that initialise projects: in progress, then
	// idle.
	if ind := str(created.Status.ProjectStatus.StatusIndicator); ind != "STATUS_INDICATION_IN_PROGRESS" && ind != "STATUS_INDICATION_IDLE" {
		t.Errorf("statusIndicator after create: got %q", ind)
	}
	eventually(t, name+" set up", func() bool {
		g := findTM(listTM(t, srv.admin), name)
		if g == nil {
			t.Fatalf("%s not in the admin's list", name)
		}
		s := g.Status.ProjectStatus
		if str(s.StatusIndicator) == "STATUS_INDICATION_IDLE" {
			if str(g.Spec.Description) != "Shop floor" || str(s.UID) != uid {
				t.Errorf("listed: got description %q uID %q, want Shop floor %s", str(g.Spec.Description), str(s.UID), uid)
			}
			return true
		}
		if str(s.StatusIndicator) != "STATUS_INDICATION_IN_PROGRESS" || !strings.HasPrefix(str(s.Message), "waiting for: ") {
			t.Fatalf("while set up: got %q %q, want in progress, waiting for modules", str(s.StatusIndicator), str(s.Message))
		}
		return false
	})

	// Rename: PUT again with another description; update_if_exists=false
	// refuses an existing project.
	if st, raw := uiRequest(t, srv.admin, "PUT", "/v1/projects/"+name, map[string]string{"description": "Shop floor 2"}); st != 200 {
		t.Fatalf("rename: got %d %s", st, raw)
	}
	if st, raw := uiRequest(t, srv.admin, "PUT", "/v1/projects/"+name+"?update_if_exists=false", map[string]string{"description": "x"}); st != 409 {
		t.Errorf("PUT update_if_exists=false on an existing project: got %d %s, want 409", st, raw)
	}
	if st, raw := uiRequest(t, srv.admin, "PUT", "/v1/projects/"+name, map[string]string{"name": "x"}); st != 400 || !strings.Contains(string(raw), "name") {
		t.Errorf("PUT with an unknown field: got %d %s, want 400 naming it", st, raw)
	}
	if st, raw := uiRequest(t, p.tok, "PUT", "/v1/projects/"+name+"-x", map[string]string{"description": "x"}); st != 403 {
		t.Errorf("PUT by a project's writer: got %d %s, want 403", st, raw)
	}
	st, raw = uiRequest(t, srv.admin, "GET", "/v1/projects/"+name, nil)
	var one tmProject
	if st != 200 || json.Unmarshal(raw, &one) != nil || one.Spec == nil || str(one.Spec.Description) != "Shop floor 2" || str(one.Status.ProjectStatus.UID) != uid {
		t.Fatalf("GET /v1/projects/%s after rename: got %d %s", name, st, raw)
	}

	// Delete as the Projects page does: the deletion is under way (in
	// progress), then the project is gone.
	if st, raw := uiRequest(t, srv.admin, "DELETE", "/v1/projects/"+name, nil); st/100 != 2 {
		t.Fatalf("DELETE: got %d %s", st, raw)
	}
	eventually(t, name+" deleted", func() bool {
		g := findTM(listTM(t, srv.admin), name)
		if g == nil {
			return true
		}
		if s := g.Status.ProjectStatus; str(s.StatusIndicator) != "STATUS_INDICATION_IN_PROGRESS" || !strings.HasPrefix(str(s.Message), "deleting: ") {
			t.Fatalf("while deleted: got %q %q, want in progress, deleting", str(s.StatusIndicator), str(s.Message))
		}
		return false
	})
	if st, _ := uiRequest(t, srv.admin, "GET", "/v1/projects/"+name, nil); st != 404 {
		t.Errorf("GET after the deletion: got %d, want 404", st)
	}

	// EIM's own list, which its CLI and Go client ask for.
	st, raw = uiRequest(t, p.tok, "GET", "/v1/projects?view=eim", nil)
	var env struct {
		Projects      []struct{ Name, ID string }
		TotalElements *int
	}
	if st != 200 || json.Unmarshal(raw, &env) != nil || env.TotalElements == nil || len(env.Projects) != 1 || env.Projects[0].ID != p.id {
		t.Errorf("GET /v1/projects?view=eim: got %d %s, want EIM's envelope with %s", st, raw, p.name)
	}
	if st, raw := uiRequest(t, p.tok, "GET", "/v1/projects?view=x", nil); st != 400 || !strings.Contains(string(raw), "view") {
		t.Errorf("view=x: got %d %s, want 400 naming view", st, raw)
	}
}
