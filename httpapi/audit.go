package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// EIM's own endpoints (the original had neither): the project's audit log,
// GET /v1/projects/{projectName}/audit, and its webhooks,
// …/webhooks[/{webhookId}[/deliveries]]. Readers of the project may read
// them; creating and deleting webhooks needs the project's _im-rw role.
// A webhook's secret is write-only: never in an answer, except the one
// the server generated, once, in the answer to the create.

// ModuleWebhooks delivers the webhooks' events; creating a webhook is its
// operation.
const ModuleWebhooks = "webhooks"

func (h *handler) auditRoutes() {
	h.handle("GET /audit", h.listAudit)
	h.handle("GET /webhooks", h.listWebhooks)
	h.handle("GET /webhooks/{webhookId}", h.getWebhook)
	h.handle("DELETE /webhooks/{webhookId}", h.deleteWebhook)
	h.handle("GET /webhooks/{webhookId}/deliveries", h.listDeliveries)
	h.in(ModuleWebhooks, func() {
		h.handle("POST /webhooks", h.createWebhook)
		h.handle("PATCH /webhooks/{webhookId}", h.updateWebhook)
	})
}

type auditBody struct {
	AuditRecords  []eim.AuditRecord `json:"auditRecords"`
	TotalElements int               `json:"totalElements"`
	HasNext       bool              `json:"hasNext"`
}

func (h *handler) listAudit(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	size, off, err := paging(q)
	if err != nil {
		return err
	}
	recs, total, err := h.inv.Audit(r.Context(), c.project, inventory.AuditQuery{Filter: q.Get("filter"), PageSize: size, Offset: off})
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []eim.AuditRecord{}
	}
	h.writeJSON(w, http.StatusOK, auditBody{AuditRecords: recs, TotalElements: total, HasNext: off+len(recs) < total})
	return nil
}

// webhookView is a webhook as the API shows it. Secret is set only in the
// answer to a create whose secret the server generated.
type webhookView struct {
	*eim.Webhook
	Secret string `json:"secret,omitempty"`
}

type webhooksBody struct {
	Webhooks      []webhookView `json:"webhooks"`
	TotalElements int           `json:"totalElements"`
	HasNext       bool          `json:"hasNext"`
}

func (h *handler) listWebhooks(w http.ResponseWriter, r *http.Request, c *call) error {
	hooks, err := h.inv.ListWebhooks(r.Context(), c.project)
	if err != nil {
		return err
	}
	out := webhooksBody{Webhooks: []webhookView{}, TotalElements: len(hooks)}
	for _, wh := range hooks {
		out.Webhooks = append(out.Webhooks, webhookView{Webhook: wh})
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) getWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	wh, err := h.inv.FindWebhook(r.Context(), c.project, r.PathValue("webhookId"))
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, webhookView{Webhook: wh})
	return nil
}

func (h *handler) deleteWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := h.inv.DeleteWebhook(r.Context(), c.project, r.PathValue("webhookId")); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (h *handler) createWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	in, err := decodeWebhook(buf.Bytes())
	if err != nil {
		return err
	}
	wh, secret, err := h.inv.CreateWebhook(r.Context(), c.project, in)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, webhookView{Webhook: wh, Secret: secret})
	return nil
}

// decodeWebhook decodes a POST …/webhooks body: url and eventTypes
// required, secret optional. Unknown members are 400.
func decodeWebhook(body []byte) (inventory.WebhookInput, error) {
	var in inventory.WebhookInput
	var seen []string
	err := decodeObject(body, func(key string, raw json.RawMessage) error {
		if slices.Contains(seen, key) {
			return eim.Errorf(eim.EINVALID, "field %q is given twice", key)
		}
		seen = append(seen, key)
		switch key {
		case "url":
			return decodeString(key, raw, &in.URL)
		case "secret":
			return decodeString(key, raw, &in.Secret)
		case "eventTypes", "event_types":
			if err := json.Unmarshal(raw, &in.EventTypes); err != nil {
				return eim.Errorf(eim.EINVALID, "eventTypes: want a list of strings")
			}
			return nil
		case "webhookId", "createdAt":
			return eim.Errorf(eim.EINVALID, "%s: read-only", key)
		}
		return eim.Errorf(eim.EINVALID, "unknown field %q", key)
	})
	return in, err
}

func (h *handler) updateWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	ch, err := decodeWebhookChange(buf.Bytes())
	if err != nil {
		return err
	}
	wh, secret, err := h.inv.UpdateWebhook(r.Context(), c.project, r.PathValue("webhookId"), ch)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, webhookView{Webhook: wh, Secret: secret})
	return nil
}

// decodeWebhookChange decodes a PATCH …/webhooks/{id} body: members absent
// keep their value; secret "new" generates one. Unknown members are 400.
func decodeWebhookChange(body []byte) (inventory.WebhookChange, error) {
	var ch inventory.WebhookChange
	var seen []string
	err := decodeObject(body, func(key string, raw json.RawMessage) error {
		if slices.Contains(seen, key) {
			return eim.Errorf(eim.EINVALID, "field %q is given twice", key)
		}
		seen = append(seen, key)
		switch key {
		case "url":
			ch.URL = new(string)
			return decodeString(key, raw, ch.URL)
		case "secret":
			ch.Secret = new(string)
			return decodeString(key, raw, ch.Secret)
		case "eventTypes", "event_types":
			var types []string
			if err := json.Unmarshal(raw, &types); err != nil {
				return eim.Errorf(eim.EINVALID, "eventTypes: want a list of strings")
			}
			ch.EventTypes = &types
			return nil
		case "webhookId", "createdAt":
			return eim.Errorf(eim.EINVALID, "%s: read-only", key)
		}
		return eim.Errorf(eim.EINVALID, "unknown field %q", key)
	})
	return ch, err
}

type deliveriesBody struct {
	Deliveries    []*eim.Delivery `json:"deliveries"`
	TotalElements int             `json:"totalElements"`
	HasNext       bool            `json:"hasNext"`
}

func (h *handler) listDeliveries(w http.ResponseWriter, r *http.Request, c *call) error {
	size, off, err := paging(r.URL.Query())
	if err != nil {
		return err
	}
	ds, total, err := h.inv.Deliveries(r.Context(), c.project, r.PathValue("webhookId"), size, off)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []*eim.Delivery{}
	}
	h.writeJSON(w, http.StatusOK, deliveriesBody{Deliveries: ds, TotalElements: total, HasNext: off+len(ds) < total})
	return nil
}
