package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
)

// ListProjects returns the projects the caller can read (all of them for an
// administrator).
func (c *Client) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	var out struct {
		Projects []*eim.Project `json:"projects"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/projects", nil, &out); err != nil {
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
// it holds resources.
func (c *Client) DeleteProject(ctx context.Context, name string, force bool) error {
	p := "/v1/projects/" + url.PathEscape(name)
	if force {
		p += "?force=true"
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}
