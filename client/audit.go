package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/eimhq/eim"
)

// AuditPage is a page of a project's audit log, newest first.
type AuditPage struct {
	Records       []eim.AuditRecord `json:"auditRecords"`
	TotalElements int               `json:"totalElements"`
	HasNext       bool              `json:"hasNext"`
}

// Audit returns a page of the project's audit log matching filter (AIP-160
// over resourceId, kind, principal, action, time).
func (c *Client) Audit(ctx context.Context, project, filter string, pageSize, offset int) (*AuditPage, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	p := ProjectPath(project) + "/audit"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out AuditPage
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Webhook is a webhook as the API shows it; Secret only in the answer to
// a create that let the server generate it.
type Webhook struct {
	eim.Webhook
	Secret string `json:"secret,omitempty"`
}

// WebhookInput creates a webhook; an empty Secret lets the server make one.
type WebhookInput struct {
	URL        string   `json:"url"`
	EventTypes []string `json:"eventTypes"`
	Secret     string   `json:"secret,omitempty"`
}

func webhooksPath(project string) string { return ProjectPath(project) + "/webhooks" }

// CreateWebhook creates a webhook.
func (c *Client) CreateWebhook(ctx context.Context, project string, in WebhookInput) (*Webhook, error) {
	var out Webhook
	if err := c.Do(ctx, http.MethodPost, webhooksPath(project), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WebhookChange changes a webhook: absent members keep their value;
// Secret "new" makes the server generate one (returned once).
type WebhookChange struct {
	URL        *string   `json:"url,omitempty"`
	EventTypes *[]string `json:"eventTypes,omitempty"`
	Secret     *string   `json:"secret,omitempty"`
}

// UpdateWebhook changes a webhook.
func (c *Client) UpdateWebhook(ctx context.Context, project, id string, ch WebhookChange) (*Webhook, error) {
	var out Webhook
	if err := c.Do(ctx, http.MethodPatch, webhooksPath(project)+"/"+url.PathEscape(id), ch, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhooks returns the project's webhooks.
func (c *Client) ListWebhooks(ctx context.Context, project string) ([]*Webhook, error) {
	var out struct {
		Webhooks []*Webhook `json:"webhooks"`
	}
	if err := c.Do(ctx, http.MethodGet, webhooksPath(project), nil, &out); err != nil {
		return nil, err
	}
	return out.Webhooks, nil
}

// GetWebhook returns one webhook.
func (c *Client) GetWebhook(ctx context.Context, project, id string) (*Webhook, error) {
	var out Webhook
	if err := c.Do(ctx, http.MethodGet, webhooksPath(project)+"/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook deletes a webhook and its pending deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, project, id string) error {
	return c.Do(ctx, http.MethodDelete, webhooksPath(project)+"/"+url.PathEscape(id), nil, nil)
}

// DeliveryPage is a page of a webhook's deliveries, newest first.
type DeliveryPage struct {
	Deliveries    []*eim.Delivery `json:"deliveries"`
	TotalElements int             `json:"totalElements"`
	HasNext       bool            `json:"hasNext"`
}

// Deliveries returns a page of a webhook's deliveries.
func (c *Client) Deliveries(ctx context.Context, project, id string, pageSize, offset int) (*DeliveryPage, error) {
	q := url.Values{}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	p := webhooksPath(project) + "/" + url.PathEscape(id) + "/deliveries"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out DeliveryPage
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
