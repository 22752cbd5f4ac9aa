package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
)

// HostRegistration is the body of a host registration (the API's
// HostRegister): UUID or serial number is required.
type HostRegistration struct {
	Name         string `json:"name,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
	UUID         string `json:"uuid,omitempty"`
	AutoOnboard  bool   `json:"autoOnboard,omitempty"`
	EnableVpro   bool   `json:"enableVpro,omitempty"`
	UserLvmSize  uint32 `json:"userLvmSize,omitempty"`
}

// HostSummary counts a project's hosts.
type HostSummary struct {
	Total       int `json:"total"`
	Error       int `json:"error"`
	Running     int `json:"running"`
	Unallocated int `json:"unallocated"`
}

// RegisterHost pre-registers a host; it waits in REGISTERED until
// onboarded, or is ONBOARDED at once with AutoOnboard.
func (c *Client) RegisterHost(ctx context.Context, project string, reg HostRegistration) (*eim.Host, error) {
	var out eim.Host
	if err := c.Do(ctx, http.MethodPost, ProjectPath(project)+"/compute/hosts/register", reg, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OnboardHost moves a registered host to ONBOARDED.
func (c *Client) OnboardHost(ctx context.Context, project, id string) error {
	p, err := item(project, eim.KindHost, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPatch, p+"/onboard", nil, nil)
}

// InvalidateHost marks a host UNTRUSTED, with an optional note.
func (c *Client) InvalidateHost(ctx context.Context, project, id, note string) error {
	p, err := item(project, eim.KindHost, id)
	if err != nil {
		return err
	}
	p += "/invalidate"
	if note != "" {
		p += "?note=" + url.QueryEscape(note)
	}
	return c.Do(ctx, http.MethodPut, p, nil, nil)
}

// HostSummary counts the project's hosts matching filter ("" for all).
func (c *Client) HostSummary(ctx context.Context, project, filter string) (*HostSummary, error) {
	p := ProjectPath(project) + "/compute/hosts/summary"
	if filter != "" {
		p += "?filter=" + url.QueryEscape(filter)
	}
	var out HostSummary
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
