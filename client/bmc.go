package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

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

// PowerRequest is the body of RequestPower: a power state, and a boot
// override set first.
type PowerRequest struct {
	DesiredPowerState eim.PowerState `json:"desiredPowerState"`
	Boot              string         `json:"boot,omitempty"`
	BootOnce          bool           `json:"bootOnce,omitempty"`
}

// PowerJob is a host's power job through its BMC.
type PowerJob = eim.PowerJobView

// PowerJobList is a page of a host's power jobs.
type PowerJobList = eim.PowerJobList

// RequestPower adds a power job for a host with a BMC (and sets its
// desiredPowerState).
func (c *Client) RequestPower(ctx context.Context, project, host string, in PowerRequest) (*PowerJob, error) {
	var out PowerJob
	if err := c.Do(ctx, http.MethodPost, bmcPath(project, host)+"/jobs", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PowerJobs lists a page of a host's power jobs, newest first.
func (c *Client) PowerJobs(ctx context.Context, project, host string, pageSize, offset int) (*PowerJobList, error) {
	q := url.Values{}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	path := bmcPath(project, host) + "/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out PowerJobList
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PowerJob reads one of a host's power jobs.
func (c *Client) PowerJob(ctx context.Context, project, host, id string) (*PowerJob, error) {
	var out PowerJob
	if err := c.Do(ctx, http.MethodGet, bmcPath(project, host)+"/jobs/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelPowerJob cancels a power job that has not ended.
func (c *Client) CancelPowerJob(ctx context.Context, project, host, id string) (*PowerJob, error) {
	var out PowerJob
	if err := c.Do(ctx, http.MethodPost, bmcPath(project, host)+"/jobs/"+url.PathEscape(id)+"/cancel", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
