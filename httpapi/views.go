package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The read-only views that are not a list of one kind: locations and the
// combined schedule list.

func (h *handler) locations(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	lq := inventory.LocationQuery{Name: q.Get("name")}
	var err error
	if lq.ShowSites, err = boolParam(q, "showSites"); err != nil {
		return err
	}
	if lq.ShowRegions, err = boolParam(q, "showRegions"); err != nil {
		return err
	}
	locs, err := h.inv.Locations(r.Context(), c.project, lq)
	if err != nil {
		return err
	}
	if locs.Nodes == nil {
		locs.Nodes = []inventory.LocationNode{}
	}
	h.writeJSON(w, http.StatusOK, locs)
	return nil
}

// schedulesBody is the wire shape of the combined schedule list.
type schedulesBody struct {
	Single        []*eim.SingleSchedule   `json:"singleSchedules"`
	Repeated      []*eim.RepeatedSchedule `json:"repeatedSchedules"`
	TotalElements int                     `json:"totalElements"`
	HasNext       bool                    `json:"hasNext"`
}

func (h *handler) listSchedules(w http.ResponseWriter, r *http.Request, c *call) error {
	sq, err := scheduleQuery(r.URL.Query())
	if err != nil {
		return err
	}
	s, err := h.inv.ListSchedules(r.Context(), c.project, sq)
	if err != nil {
		return err
	}
	out := schedulesBody{Single: s.Single, Repeated: s.Repeated, TotalElements: s.Total, HasNext: s.HasNext}
	refs := new(emitRefs)
	for _, r := range out.Single {
		refs.resource(r)
	}
	for _, r := range out.Repeated {
		refs.resource(r)
	}
	if out.Single == nil {
		out.Single = []*eim.SingleSchedule{}
	}
	if out.Repeated == nil {
		out.Repeated = []*eim.RepeatedSchedule{}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// projectsBody is the wire shape of GET /v1/projects?view=eim.
type projectsBody struct {
	Projects      []*projectView `json:"projects"`
	TotalElements int            `json:"totalElements"`
	HasNext       bool           `json:"hasNext"`
}

// listProjects lists every project to an administrator and the projects a
// caller can read to anyone else, each with its status: as the original's
// tenant manager answered (a JSON array), or with view=eim in EIM's list
// envelope (see tenancy.go).
func (h *handler) listProjects(w http.ResponseWriter, r *http.Request, p *eim.Principal) error {
	q := r.URL.Query()
	eimView, err := projectsView(q)
	if err != nil {
		return err
	}
	// member-role=true (the original UI's project switcher) asks for the
	// projects the caller is a member of: in EIM those it has a role on,
	// which is the list anyway. org names the original's organisation:
	// EIM has one.
	if _, err := boolParam(q, "member-role"); err != nil {
		return err
	}
	all, err := h.inv.ListProjects(r.Context())
	if err != nil {
		return err
	}
	list := make([]*projectView, 0, len(all))
	for _, proj := range all {
		if !p.CanRead(proj) {
			continue
		}
		// The view, never the stored project: it holds the enrollment
		// token's hash.
		v, err := h.viewWithStatus(r.Context(), proj)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			continue // deleted since it was listed
		}
		if err != nil {
			return err
		}
		list = append(list, v)
	}
	if !eimView {
		h.writeJSON(w, http.StatusOK, list)
		return nil
	}
	h.writeJSON(w, http.StatusOK, projectsBody{Projects: list, TotalElements: len(list)})
	return nil
}

func (h *handler) createProject(w http.ResponseWriter, r *http.Request, p *eim.Principal) error {
	if !p.IsAdmin() {
		return eim.Errorf(eim.EFORBIDDEN, "creating projects needs the %s role", eim.RoleAdmin)
	}
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	var name, id string
	err := decodeObject(buf.Bytes(), func(key string, raw json.RawMessage) error {
		switch key {
		case "name":
			return decodeString(key, raw, &name)
		case "id":
			return decodeString(key, raw, &id)
		case "createdAt", "created_at":
			return nil // read-only
		}
		return eim.Errorf(eim.EINVALID, "unknown field %q", key)
	})
	if err != nil {
		return err
	}
	proj, err := h.inv.CreateProject(r.Context(), name, id)
	if err != nil {
		return err
	}
	h.forgetProject(name)
	v, err := h.viewWithStatus(r.Context(), proj)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, v)
	return nil
}

// deleteProject deletes a project. While the tenant module runs in the
// deployment it starts the project's deletion (a persisted job: the
// cascade, see package tenant) and answers 202 Accepted with the project
// and its status, whose deletion shows the progress; GET answers 404 once
// it is done, and the name may be used again. Without it the project is
// deleted at once (200). Either way a project that holds resources other
// than its defaults is refused (400 FailedPrecondition) unless force is
// set.
func (h *handler) deleteProject(w http.ResponseWriter, r *http.Request, p *eim.Principal) error {
	if !p.IsAdmin() {
		return eim.Errorf(eim.EFORBIDDEN, "deleting projects needs the %s role", eim.RoleAdmin)
	}
	force, err := boolParam(r.URL.Query(), "force")
	if err != nil {
		return err
	}
	name := r.PathValue("projectName")
	h.forgetProject(name)
	if slices.Contains(h.modules(), ModuleTenant) {
		if _, err := h.inv.StartProjectDeletion(r.Context(), name, force); err != nil {
			return err
		}
		h.forgetProject(name)
		view, err := h.projectWithStatus(r.Context(), name)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusAccepted, view)
		return nil
	}
	if err := h.inv.DeleteProject(r.Context(), name, force); err != nil {
		return err
	}
	h.forgetProject(name)
	h.writeEmpty(w)
	return nil
}
