package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
)

// BMCInput is the body of PUT …/compute/hosts/{hostId}/bmc (the oob
// module): a nil Password keeps the stored one.
type BMCInput struct {
	Protocol string  `json:"protocol"`
	Address  string  `json:"address"`
	SystemID string  `json:"systemId,omitempty"`
	Username string  `json:"username"`
	Password *string `json:"password,omitempty"`
	CACert   string  `json:"caCert,omitempty"`
	Insecure bool    `json:"insecure,omitempty"`
}

// BMC is a host's BMC as the API answers it (never its password).
type BMC struct {
	HostID       string              `json:"hostId"`
	Protocol     string              `json:"protocol"`
	Address      string              `json:"address"`
	SystemID     string              `json:"systemId,omitempty"`
	Username     string              `json:"username"`
	PasswordSet  bool                `json:"passwordSet"`
	CACert       string              `json:"caCert,omitempty"`
	Insecure     bool                `json:"insecure"`
	Capabilities eim.BMCCapabilities `json:"capabilities"`
	Reachable    eim.BMCReachable    `json:"reachable"`
	Timestamps   eim.Timestamps      `json:"timestamps"`
}

func bmcPath(project, host string) string {
	return ProjectPath(project) + "/compute/hosts/" + url.PathEscape(host) + "/bmc"
}

// PutBMC creates or replaces a host's BMC.
func (c *Client) PutBMC(ctx context.Context, project, host string, in BMCInput) (*BMC, error) {
	var out BMC
	if err := c.Do(ctx, http.MethodPut, bmcPath(project, host), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetBMC reads a host's BMC.
func (c *Client) GetBMC(ctx context.Context, project, host string) (*BMC, error) {
	var out BMC
	if err := c.Do(ctx, http.MethodGet, bmcPath(project, host), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteBMC removes a host's BMC.
func (c *Client) DeleteBMC(ctx context.Context, project, host string) error {
	return c.Do(ctx, http.MethodDelete, bmcPath(project, host), nil, nil)
}
