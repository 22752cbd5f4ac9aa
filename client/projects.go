package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
)

// ListProjects returns the projects the caller can read (all of them for an
// administrator). It asks for EIM's list (view=eim): without it the server
// answers as the original's tenant manager did, a JSON array.
func (c *Client) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	var out struct {
		Projects []*eim.Project `json:"projects"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/projects?view=eim", nil, &out); err != nil {
		return nil, err
	}
	return out.Projects, nil
}

// CreateProject creates a project (administrators only).
func (c *Client) CreateProject(ctx context.Context, name string) (*eim.Project, error) {
	var out eim.Project
	if err := c.Do(ctx, http.MethodPost, "/v1/projects", map[string]string{"name": name}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteProject deletes a project; without force the server refuses while
// it holds resources other than its defaults. Where the tenant module
// runs, the server starts the deletion and answers at once: the project
// is returned, its Status.Deletion showing the progress (GetProject
// follows it; ENOTFOUND once it is done); elsewhere the project is gone
// when this returns, and nil is returned.
func (c *Client) DeleteProject(ctx context.Context, name string, force bool) (*Project, error) {
	p := "/v1/projects/" + url.PathEscape(name)
	if force {
		p += "?force=true"
	}
	var out Project
	if err := c.Do(ctx, http.MethodDelete, p, nil, &out); err != nil {
		return nil, err
	}
	if out.Name == "" {
		return nil, nil // deleted at once ({})
	}
	return &out, nil
}

// ProjectSettings are a project's onboarding settings as the API shows
// them: whether an enrollment token is set, never the token or its hash.
type ProjectSettings struct {
	DefaultOSID            string   `json:"defaultOsId"`
	DefaultLocalAccountID  string   `json:"defaultLocalAccountId"`
	DefaultCustomConfigIDs []string `json:"defaultCustomConfigIds"`
	Enrollment             bool     `json:"enrollment"`
	AutoOnboardEnrolled    bool     `json:"autoOnboardEnrolled"`
	// 0: the server's default.
	HeartbeatIntervalSeconds uint32 `json:"heartbeatIntervalSeconds"`
	HeartbeatTimeoutSeconds  uint32 `json:"heartbeatTimeoutSeconds"`
	// ExporterPerHostOff: the exporter shows no per-host series of the
	// project's hosts.
	ExporterPerHostOff bool `json:"exporterPerHostOff"`
	// EdgeWorkloadsAllowPrivileged: the project's edge workloads may run
	// privileged containers and use the host's network.
	EdgeWorkloadsAllowPrivileged bool `json:"edgeWorkloadsAllowPrivileged"`
	// PowerPolicy: ALWAYS_ON or REPORT, or "" (unset: REPORT).
	PowerPolicy string `json:"powerPolicy"`
}

// Project is a project with its settings (GET /v1/projects/{name}).
type Project struct {
	Name      string          `json:"name"`
	ID        string          `json:"id"`
	CreatedAt eim.Time        `json:"createdAt"`
	Settings  ProjectSettings `json:"settings"`
	// EnrollmentToken is set only in the answer to the change that
	// generated it; the server does not show it again.
	EnrollmentToken string `json:"enrollmentToken,omitempty"`
	// Status is the project's readiness and deletion (GET and DELETE).
	Status *ProjectStatus `json:"status,omitempty"`
}

// ProjectStatus says whether every module that initialises projects and
// runs in the deployment has initialised the project (Conditions), and
// how far its deletion is, while it is being deleted.
type ProjectStatus struct {
	Ready      bool               `json:"ready"`
	Conditions []ProjectCondition `json:"conditions"`
	Deletion   *ProjectDeletion   `json:"deletion,omitempty"`
}

// ProjectCondition is a module's readiness for a project.
type ProjectCondition struct {
	Module  string   `json:"module"`
	Ready   bool     `json:"ready"`
	Message string   `json:"message"`
	Since   eim.Time `json:"since"`
}

// ProjectDeletion is the progress of a project's deletion: its phase (the
// Step-th of Steps) and what is left of it (nil: not counted yet).
type ProjectDeletion struct {
	Phase     string   `json:"phase"`
	Step      int      `json:"step"`
	Steps     int      `json:"steps"`
	Remaining *int     `json:"remaining"`
	StartedAt eim.Time `json:"startedAt"`
	UpdatedAt eim.Time `json:"updatedAt"`
	Error     string   `json:"error,omitempty"`
}

// SettingsChange is a change of a project's settings: nil fields keep
// their value; "" (an ID) or an empty list clears the setting.
type SettingsChange struct {
	DefaultOSID            *string   `json:"defaultOsId,omitempty"`
	DefaultLocalAccountID  *string   `json:"defaultLocalAccountId,omitempty"`
	DefaultCustomConfigIDs *[]string `json:"defaultCustomConfigIds,omitempty"`
	AutoOnboardEnrolled    *bool     `json:"autoOnboardEnrolled,omitempty"`
	// Heartbeat settings in seconds; 0 restores the server's default.
	HeartbeatIntervalSeconds     *uint32 `json:"heartbeatIntervalSeconds,omitempty"`
	HeartbeatTimeoutSeconds      *uint32 `json:"heartbeatTimeoutSeconds,omitempty"`
	ExporterPerHostOff           *bool   `json:"exporterPerHostOff,omitempty"`
	EdgeWorkloadsAllowPrivileged *bool   `json:"edgeWorkloadsAllowPrivileged,omitempty"`
	// PowerPolicy: ALWAYS_ON, REPORT or "" (unset).
	PowerPolicy *string `json:"powerPolicy,omitempty"`
	// EnrollmentToken is "" (keep), "new" (generate one; the answer holds
	// it) or "none" (clear: unknown devices are refused).
	EnrollmentToken string `json:"enrollmentToken,omitempty"`
}

// GetProject returns a project with its settings.
func (c *Client) GetProject(ctx context.Context, name string) (*Project, error) {
	if name == "" {
		return nil, eim.Errorf(eim.EINVALID, "project name is required")
	}
	var out Project
	if err := c.Do(ctx, http.MethodGet, "/v1/projects/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateProjectSettings changes a project's settings (eim-admin or the
// project's read-write role) and returns the project after the change,
// with EnrollmentToken set when ch asked for a new one.
func (c *Client) UpdateProjectSettings(ctx context.Context, name string, ch SettingsChange) (*Project, error) {
	if name == "" {
		return nil, eim.Errorf(eim.EINVALID, "project name is required")
	}
	var out Project
	if err := c.Do(ctx, http.MethodPatch, "/v1/projects/"+url.PathEscape(name)+"/settings", ch, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
