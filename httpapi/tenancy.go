package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The original's tenant manager served the projects on the paths EIM
// serves them on: GET /v1/projects (a JSON array), and PUT, GET and DELETE
// /v1/projects/{name}. Its web UI and CLI read them, so EIM answers them
// in its shape: each project carries the tenant manager's spec
// ({description}) and status.projectStatus ({statusIndicator, message,
// timeStamp, uID}) besides EIM's own fields. Only the list's envelope
// cannot be both: it is the tenant manager's array unless the caller asks
// for EIM's object with view=eim, which the original's clients never send
// (EIM's CLI and Go client do). See docs/compatibility.md, "Projects".

// The tenant manager's status indicators.
const (
	statusIdle       = "STATUS_INDICATION_IDLE"
	statusInProgress = "STATUS_INDICATION_IN_PROGRESS"
	statusError      = "STATUS_INDICATION_ERROR"
)

// viewEIM is the value of the view parameter that selects EIM's list.
const viewEIM = "eim"

// tenancySpec is the tenant manager's spec of a project.
type tenancySpec struct {
	// Description is the display name its web UI shows ("" is left out:
	// the UI then shows the name).
	Description string `json:"description,omitempty"`
}

// tenancyStatus is the tenant manager's status of a project.
type tenancyStatus struct {
	StatusIndicator string `json:"statusIndicator"`
	Message         string `json:"message"`
	// TimeStamp is the Unix time in seconds of the status's last change.
	TimeStamp int64 `json:"timeStamp"`
	// UID is the project's ID: the original's web UI keys the roles it
	// looks for with it ("<uID>_im-rw").
	UID string `json:"uID"`
}

// tenancyStatusOf maps a project's status to the tenant manager's: in
// progress while a module that initialises projects has not done so
// ("waiting for: os, tenant") or while it is being deleted ("deleting:
// <phase>", an error when the phase's last attempt failed; it is
// retried), idle otherwise.
func tenancyStatusOf(p *eim.Project, st *inventory.ProjectStatus) tenancyStatus {
	out := tenancyStatus{StatusIndicator: statusIdle, UID: p.ID}
	at := p.CreatedAt.Time
	later := func(t eim.Time) {
		if t.After(at) {
			at = t.Time
		}
	}
	if d := st.Deletion; d != nil {
		out.StatusIndicator, out.Message = statusInProgress, "deleting: "+d.Phase
		if d.Error != "" {
			out.StatusIndicator, out.Message = statusError, out.Message+": "+d.Error
		}
		later(d.Updated)
	} else {
		var waiting []string
		for _, c := range st.Conditions {
			later(c.Since)
			if !c.Ready {
				waiting = append(waiting, c.Module)
			}
		}
		if len(waiting) > 0 {
			out.StatusIndicator, out.Message = statusInProgress, "waiting for: "+strings.Join(waiting, ", ")
		}
	}
	out.TimeStamp = at.Unix()
	return out
}

// projectsView reads the view parameter of GET /v1/projects: true for
// EIM's list envelope.
func projectsView(q url.Values) (bool, error) {
	switch v := q.Get("view"); v {
	case "":
		return false, nil
	case viewEIM:
		return true, nil
	default:
		return false, eim.Errorf(eim.EINVALID, "view: %q is not %q (EIM's list envelope; without it the list is a JSON array)", v, viewEIM)
	}
}

// putProject is the tenant manager's create-or-update of a project, PUT
// /v1/projects/{name} with an optional body {"description"}: it creates
// the project, or changes the description of an existing one, unless
// update_if_exists=false (then an existing project is 409). The answer is
// the project with its status, as GET shows it. Needs eim-admin, as
// creating projects does.
func (h *handler) putProject(w http.ResponseWriter, r *http.Request, p *eim.Principal) error {
	if !p.IsAdmin() {
		return eim.Errorf(eim.EFORBIDDEN, "creating and changing projects needs the %s role", eim.RoleAdmin)
	}
	name := r.PathValue("projectName")
	update := true
	if r.URL.Query().Has("update_if_exists") {
		b, err := boolParam(r.URL.Query(), "update_if_exists")
		if err != nil {
			return err
		}
		update = b
	}
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	var desc *string
	if len(strings.TrimSpace(buf.String())) > 0 {
		err := decodeObject(buf.Bytes(), func(key string, raw json.RawMessage) error {
			if key != "description" {
				return eim.Errorf(eim.EINVALID, "unknown field %q (the body is {\"description\": …})", key)
			}
			var d string
			if err := decodeString(key, raw, &d); err != nil {
				return err
			}
			desc = &d
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := inventory.CheckDescription(desc); err != nil {
		return err
	}
	ctx := r.Context()
	proj, err := h.inv.FindProject(ctx, name)
	switch {
	case err == nil:
		if !update {
			return eim.Errorf(eim.ECONFLICT, "project %q already exists (update_if_exists=false)", name)
		}
		if proj.Deleting {
			return eim.Errorf(eim.ECONFLICT, "project %s is being deleted", name)
		}
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		if proj, err = h.inv.CreateProject(ctx, name, ""); err != nil {
			return err
		}
	default:
		return err
	}
	if desc != nil && *desc != proj.Settings.Description {
		if _, _, err := h.inv.UpdateProjectSettings(ctx, name, inventory.SettingsChange{Description: desc}); err != nil {
			return err
		}
	}
	h.forgetProject(name)
	v, err := h.projectWithStatus(ctx, name)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, v)
	return nil
}
