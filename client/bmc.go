package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
)

// BMCInput is the body of PutBMC (the oob module's): a nil Password keeps
// the stored one.
type BMCInput = eim.BMCInput

// BMC is a host's BMC as the API answers it (never its password).
type BMC = eim.BMCView

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
