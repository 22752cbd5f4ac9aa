package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/eimhq/eim"
)

// The enrollment lobby (the onboarding module's API, docs/enrollment.md).

// EnrollmentRequest is a device waiting in (or decided in) a project's
// enrollment lobby.
type EnrollmentRequest = eim.EnrollmentRequest

// EnrollmentRule is an auto-approval rule; Token is a TOKEN rule's token,
// answered once, when it is created.
type EnrollmentRule struct {
	eim.EnrollmentRule
	Token string `json:"token,omitempty"`
}

// EnrollmentRequests is one page of a project's requests.
type EnrollmentRequests struct {
	EnrollmentRequests []*EnrollmentRequest `json:"enrollmentRequests"`
	TotalElements      int                  `json:"totalElements"`
	HasNext            bool                 `json:"hasNext"`
}

// EnrollmentListOptions select requests ("" / 0: any, the first page of 20).
type EnrollmentListOptions struct {
	State, UUID, SerialNumber string
	PageSize, Offset          int
}

// Approval is the body of an approval: the host's name, site and labels
// (metadata), all optional.
type Approval struct {
	Name     string       `json:"name,omitempty"`
	SiteID   string       `json:"siteId,omitempty"`
	Metadata eim.Metadata `json:"metadata,omitempty"`
}

// RuleInput is the body of a rule's creation.
type RuleInput struct {
	Name          string       `json:"name"`
	Kind          string       `json:"kind"`
	SerialNumbers []string     `json:"serialNumbers,omitempty"`
	MatchLabels   eim.Metadata `json:"matchLabels,omitempty"`
	SiteID        string       `json:"siteId,omitempty"`
	Metadata      eim.Metadata `json:"metadata,omitempty"`
}

func requestsPath(project string) string { return ProjectPath(project) + "/enrollmentrequests" }
func rulesPath(project string) string    { return ProjectPath(project) + "/enrollmentrules" }

// ListEnrollmentRequests returns a page of the project's requests, newest
// first.
func (c *Client) ListEnrollmentRequests(ctx context.Context, project string, o EnrollmentListOptions) (*EnrollmentRequests, error) {
	q := url.Values{}
	for k, v := range map[string]string{"state": o.State, "uuid": o.UUID, "serialNumber": o.SerialNumber} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(o.PageSize))
	}
	if o.Offset > 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	p := requestsPath(project)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out EnrollmentRequests
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEnrollmentRequest reads one request.
func (c *Client) GetEnrollmentRequest(ctx context.Context, project, id string) (*EnrollmentRequest, error) {
	var out EnrollmentRequest
	if err := c.Do(ctx, http.MethodGet, requestsPath(project)+"/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ApproveEnrollment approves a request: its host is created at once and
// the device onboards at its next call.
func (c *Client) ApproveEnrollment(ctx context.Context, project, id string, a Approval) (*EnrollmentRequest, error) {
	var out EnrollmentRequest
	if err := c.Do(ctx, http.MethodPost, requestsPath(project)+"/"+url.PathEscape(id)+"/approve", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DenyEnrollment denies a request; the device is told reason.
func (c *Client) DenyEnrollment(ctx context.Context, project, id, reason string) (*EnrollmentRequest, error) {
	var out EnrollmentRequest
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
	if err := c.Do(ctx, http.MethodPost, requestsPath(project)+"/"+url.PathEscape(id)+"/deny", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEnrollmentRequest forgets a request (the device, calling again,
// makes a new one).
func (c *Client) DeleteEnrollmentRequest(ctx context.Context, project, id string) error {
	return c.Do(ctx, http.MethodDelete, requestsPath(project)+"/"+url.PathEscape(id), nil, nil)
}

// CreateEnrollmentRule creates an auto-approval rule.
func (c *Client) CreateEnrollmentRule(ctx context.Context, project string, in RuleInput) (*EnrollmentRule, error) {
	var out EnrollmentRule
	if err := c.Do(ctx, http.MethodPost, rulesPath(project), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEnrollmentRules returns the project's rules, oldest first.
func (c *Client) ListEnrollmentRules(ctx context.Context, project string) ([]*EnrollmentRule, error) {
	var out struct {
		EnrollmentRules []*EnrollmentRule `json:"enrollmentRules"`
	}
	if err := c.Do(ctx, http.MethodGet, rulesPath(project), nil, &out); err != nil {
		return nil, err
	}
	return out.EnrollmentRules, nil
}

// DeleteEnrollmentRule removes a rule.
func (c *Client) DeleteEnrollmentRule(ctx context.Context, project, id string) error {
	return c.Do(ctx, http.MethodDelete, rulesPath(project)+"/"+url.PathEscape(id), nil, nil)
}
