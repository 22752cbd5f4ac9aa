package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// A project and its settings (EIM's own endpoints; the original kept these
// choices elsewhere): GET /v1/projects/{projectName} and PATCH
// /v1/projects/{projectName}/settings. Readers of the project may read
// them; changing them needs eim-admin or the project's _im-rw role.

// projectView is the wire shape of a project with its settings. The
// enrollment token's hash is never shown, only whether there is one.
type projectView struct {
	Name      string   `json:"name"`
	ID        string   `json:"id"`
	CreatedAt eim.Time `json:"createdAt"`
	// Spec is the original tenant manager's spec (its description).
	Spec     tenancySpec         `json:"spec"`
	Settings projectSettingsView `json:"settings"`
	// EnrollmentToken is set once, in the answer to the change that
	// generated it.
	EnrollmentToken string `json:"enrollmentToken,omitempty"`
	// Status is shown by every answer (see viewWithStatus).
	Status *projectStatusView `json:"status,omitempty"`
}

// projectStatusView is a project's readiness: the conditions of the
// modules that initialise projects and run in the deployment, and while
// it is being deleted the deletion's progress.
type projectStatusView struct {
	// ProjectStatus is the status as the original's tenant manager
	// showed it, for its clients (see tenancy.go).
	ProjectStatus tenancyStatus   `json:"projectStatus"`
	Ready         bool            `json:"ready"`
	Conditions    []conditionView `json:"conditions"`
	Deletion      *deletionView   `json:"deletion,omitempty"`
}

type conditionView struct {
	Module  string   `json:"module"`
	Ready   bool     `json:"ready"`
	Message string   `json:"message"`
	Since   eim.Time `json:"since"`
}

// deletionView is a deletion's progress: its phase (the Step-th of
// Steps), how much of the phase is left (null: not counted yet), since
// when it runs and the last error met (it is retried).
type deletionView struct {
	Phase     string   `json:"phase"`
	Step      int      `json:"step"`
	Steps     int      `json:"steps"`
	Remaining *int     `json:"remaining"`
	StartedAt eim.Time `json:"startedAt"`
	UpdatedAt eim.Time `json:"updatedAt"`
	Error     string   `json:"error,omitempty"`
}

// initialisers returns the modules initialising projects that run in the
// deployment.
func (h *handler) initialisers() []string {
	var out []string
	for _, m := range h.inits {
		if slices.Contains(h.modules(), m) {
			out = append(out, m)
		}
	}
	return out
}

// projectWithStatus returns the view of a project with its status.
func (h *handler) projectWithStatus(ctx context.Context, name string) (*projectView, error) {
	// Read afresh: the handler's project cache may be older than the last
	// change of the settings.
	p, err := h.inv.FindProject(ctx, name)
	if err != nil {
		return nil, err
	}
	return h.viewWithStatus(ctx, p)
}

// viewWithStatus returns the view of p with its status.
func (h *handler) viewWithStatus(ctx context.Context, p *eim.Project) (*projectView, error) {
	st, err := h.inv.ProjectStatus(ctx, p.Name, h.initialisers())
	if err != nil {
		return nil, err
	}
	v := viewProject(p)
	v.Status = &projectStatusView{ProjectStatus: tenancyStatusOf(p, st), Ready: st.Ready, Conditions: make([]conditionView, len(st.Conditions))}
	for i, c := range st.Conditions {
		v.Status.Conditions[i] = conditionView(c)
	}
	if d := st.Deletion; d != nil {
		dv := &deletionView{Phase: d.Phase, Steps: len(inventory.DeletionPhases), StartedAt: d.Started, UpdatedAt: d.Updated, Error: d.Error}
		dv.Step = 1 + slices.IndexFunc(inventory.DeletionPhases, func(p inventory.DeletionPhase) bool { return p.Name == d.Phase })
		if d.Remaining >= 0 {
			n := d.Remaining
			dv.Remaining = &n
		}
		v.Status.Deletion = dv
	}
	return v, nil
}

type projectSettingsView struct {
	DefaultOSID            string   `json:"defaultOsId"`
	DefaultLocalAccountID  string   `json:"defaultLocalAccountId"`
	DefaultCustomConfigIDs []string `json:"defaultCustomConfigIds"`
	Enrollment             bool     `json:"enrollment"`
	AutoOnboardEnrolled    bool     `json:"autoOnboardEnrolled"`
	// 0: the server's default.
	HeartbeatIntervalSeconds uint32 `json:"heartbeatIntervalSeconds"`
	HeartbeatTimeoutSeconds  uint32 `json:"heartbeatTimeoutSeconds"`
	OSSecurityFeatureEnable  bool   `json:"osSecurityFeatureEnable"`
	ExporterPerHostOff       bool   `json:"exporterPerHostOff"`
	// EdgeWorkloadsAllowPrivileged admits privileged containers and the
	// host's network in the project's edge workloads.
	EdgeWorkloadsAllowPrivileged bool `json:"edgeWorkloadsAllowPrivileged"`
	// PowerPolicy is the project's power policy (ALWAYS_ON, REPORT; ""
	// unset: REPORT), which a site's or a BMC's overrides.
	PowerPolicy string `json:"powerPolicy"`
}

// viewProject returns the wire shape of p (which may be shown to anyone
// who may read the project).
func viewProject(p *eim.Project) *projectView {
	ids := p.Settings.DefaultCustomConfigIDs
	if ids == nil {
		ids = []string{}
	}
	return &projectView{
		Name:      p.Name,
		ID:        p.ID,
		CreatedAt: p.CreatedAt,
		Spec:      tenancySpec{Description: p.Settings.Description},
		Settings: projectSettingsView{
			DefaultOSID:            p.Settings.DefaultOSID,
			DefaultLocalAccountID:  p.Settings.DefaultLocalAccountID,
			DefaultCustomConfigIDs: ids,
			Enrollment:             p.Settings.EnrollmentTokenHash != "",
			AutoOnboardEnrolled:    p.Settings.AutoOnboardEnrolled,

			HeartbeatIntervalSeconds:     p.Settings.HeartbeatIntervalSeconds,
			HeartbeatTimeoutSeconds:      p.Settings.HeartbeatTimeoutSeconds,
			OSSecurityFeatureEnable:      p.Settings.OSSecurityFeatureEnable,
			ExporterPerHostOff:           p.Settings.ExporterPerHostOff,
			EdgeWorkloadsAllowPrivileged: p.Settings.EdgeWorkloadsAllowPrivileged,
			PowerPolicy:                  string(p.Settings.PowerPolicy),
		},
	}
}

// projectSettingsRoutes registers the project and settings endpoints.
func (h *handler) projectSettingsRoutes() {
	h.handle("GET ", h.getProject) // GET /v1/projects/{projectName}
	h.handle("PATCH /settings", h.updateProjectSettings)
}

func (h *handler) getProject(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := h.projectWithStatus(r.Context(), c.project)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, v)
	return nil
}

func (h *handler) updateProjectSettings(w http.ResponseWriter, r *http.Request, c *call) error {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	ch, err := decodeSettingsChange(buf.Bytes())
	if err != nil {
		return err
	}
	p, token, err := h.inv.UpdateProjectSettings(r.Context(), c.project, ch)
	if err != nil {
		return err
	}
	h.forgetProject(c.project)
	out, err := h.viewWithStatus(r.Context(), p)
	if err != nil {
		return err
	}
	out.EnrollmentToken = token
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// settingsFields maps the body's member names (camelCase and snake_case)
// to one canonical name each.
var settingsFields = map[string]string{
	"defaultOsId":                     "defaultOsId",
	"default_os_id":                   "defaultOsId",
	"defaultLocalAccountId":           "defaultLocalAccountId",
	"default_local_account_id":        "defaultLocalAccountId",
	"defaultCustomConfigIds":          "defaultCustomConfigIds",
	"default_custom_config_ids":       "defaultCustomConfigIds",
	"autoOnboardEnrolled":             "autoOnboardEnrolled",
	"auto_onboard_enrolled":           "autoOnboardEnrolled",
	"heartbeatIntervalSeconds":        "heartbeatIntervalSeconds",
	"heartbeat_interval_seconds":      "heartbeatIntervalSeconds",
	"heartbeatTimeoutSeconds":         "heartbeatTimeoutSeconds",
	"heartbeat_timeout_seconds":       "heartbeatTimeoutSeconds",
	"osSecurityFeatureEnable":         "osSecurityFeatureEnable",
	"os_security_feature_enable":      "osSecurityFeatureEnable",
	"exporterPerHostOff":              "exporterPerHostOff",
	"exporter_per_host_off":           "exporterPerHostOff",
	"edgeWorkloadsAllowPrivileged":    "edgeWorkloadsAllowPrivileged",
	"edge_workloads_allow_privileged": "edgeWorkloadsAllowPrivileged",
	"powerPolicy":                     "powerPolicy",
	"power_policy":                    "powerPolicy",
	"enrollmentToken":                 "enrollmentToken",
	"enrollment_token":                "enrollmentToken",
}

// decodeSettingsChange decodes a PATCH …/settings body. Members absent keep
// their value; null or "" clears an ID, null or [] the list; enrollmentToken
// must be "new" or "none". Unknown members are 400.
func decodeSettingsChange(body []byte) (inventory.SettingsChange, error) {
	var ch inventory.SettingsChange
	var seen []string
	err := decodeObject(body, func(key string, raw json.RawMessage) error {
		name, ok := settingsFields[key]
		if !ok {
			if key == "enrollment" || key == "enrollmentTokenHash" || key == "enrollment_token_hash" {
				return eim.Errorf(eim.EINVALID, "%s: read-only; set enrollmentToken to \"new\" or \"none\"", key)
			}
			return eim.Errorf(eim.EINVALID, "unknown field %q", key)
		}
		if slices.Contains(seen, name) {
			return eim.Errorf(eim.EINVALID, "field %q is given twice", name)
		}
		seen = append(seen, name)
		switch name {
		case "defaultOsId":
			ch.DefaultOSID = new(string)
			return decodeString(name, raw, ch.DefaultOSID)
		case "defaultLocalAccountId":
			ch.DefaultLocalAccountID = new(string)
			return decodeString(name, raw, ch.DefaultLocalAccountID)
		case "defaultCustomConfigIds":
			ids := []string{}
			ch.DefaultCustomConfigIDs = &ids
			return setField(name, reflect.ValueOf(ch.DefaultCustomConfigIDs).Elem(), raw)
		case "autoOnboardEnrolled":
			ch.AutoOnboardEnrolled = new(bool)
			return decodeBool(name, raw, ch.AutoOnboardEnrolled)
		case "heartbeatIntervalSeconds":
			ch.HeartbeatIntervalSeconds = new(uint32)
			return setField(name, reflect.ValueOf(ch.HeartbeatIntervalSeconds).Elem(), raw)
		case "osSecurityFeatureEnable":
			ch.OSSecurityFeatureEnable = new(bool)
			return decodeBool(name, raw, ch.OSSecurityFeatureEnable)
		case "heartbeatTimeoutSeconds":
			ch.HeartbeatTimeoutSeconds = new(uint32)
			return setField(name, reflect.ValueOf(ch.HeartbeatTimeoutSeconds).Elem(), raw)
		case "exporterPerHostOff":
			ch.ExporterPerHostOff = new(bool)
			return decodeBool(name, raw, ch.ExporterPerHostOff)
		case "edgeWorkloadsAllowPrivileged":
			ch.EdgeWorkloadsAllowPrivileged = new(bool)
			return decodeBool(name, raw, ch.EdgeWorkloadsAllowPrivileged)
		case "powerPolicy":
			var v string
			if err := decodeString(name, raw, &v); err != nil {
				return err
			}
			p, err := eim.ParsePowerPolicy(name, v)
			if err != nil {
				return err
			}
			ch.PowerPolicy = &p
			return nil
		}
		// enrollmentToken: "" (or null) would silently keep the token.
		if err := decodeString(name, raw, &ch.EnrollmentToken); err != nil {
			return err
		}
		if ch.EnrollmentToken != inventory.EnrollmentTokenNew && ch.EnrollmentToken != inventory.EnrollmentTokenNone {
			return eim.Errorf(eim.EINVALID, "enrollmentToken: want %q or %q", inventory.EnrollmentTokenNew, inventory.EnrollmentTokenNone)
		}
		return nil
	})
	return ch, err
}
