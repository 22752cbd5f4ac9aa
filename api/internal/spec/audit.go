package spec

import "github.com/eimhq/eim"

// EIM's additions: the audit log and webhooks (docs/audit.md).

const tagAudit = "Audit and webhooks"

func addAudit(ps *pathSet) {
	ps.add("/audit", op{method: "get", id: "listAuditRecords", tag: tagAudit, summary: "List the project's audit log",
		desc: "Every change of the project's resources, newest first: who made it (user:<subject>, node:<host ID>, " +
			"module:<name>, system), the action, the resource and the fields old → new, secrets redacted. Recorded in " +
			"the transaction of the change. The filter (AIP-160) reaches resourceId, kind, principal, action, time and seq. " +
			"Any role on the project may read it. An EIM addition.",
		params: []any{pref("filter"), pref("pageSize"), pref("offset")},
		ok:     okJSON("A page of records.", ref("ListAuditRecordsResponse"))})
	ps.add("/webhooks",
		op{method: "get", id: "listWebhooks", tag: tagAudit, summary: "List the project's webhooks",
			desc: "The project's webhooks. Their secrets are never shown. An EIM addition.",
			ok:   okJSON("The webhooks.", ref("ListWebhooksResponse"))},
		op{method: "post", id: "createWebhook", tag: tagAudit, summary: "Create a webhook", write: true,
			desc: "Creates a webhook: the project's events of the types named are posted to the URL, signed " +
				"(EIM-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>), at least once, in order per " +
				"resource, retried with exponential back-off for a day. A URL that is not http(s), carries user information, " +
				"or points at a link-local or cloud metadata address (unless the server allows it), an unknown event type, " +
				"or a secret of the wrong length is 400 naming the field. Needs the project's _im-rw role; an operation " +
				"of the webhooks module. An EIM addition.",
			body: ref("WebhookCreate"),
			ok:   okJSON("The created webhook; secret only when the server generated it.", ref("Webhook"))},
	)
	id := o("name", "webhookId", "in", "path", "required", true, "description", "ID of the webhook.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindWebhook)))
	ps.add("/webhooks/{webhookId}",
		op{method: "get", id: "getWebhook", tag: tagAudit, summary: "Get a webhook", params: []any{id},
			desc: "A webhook of the project; its secret is never shown. An EIM addition.",
			ok:   okJSON("The webhook.", ref("Webhook"))},
		op{method: "patch", id: "updateWebhook", tag: tagAudit, summary: "Change a webhook", write: true, params: []any{id},
			desc: "Changes a webhook's URL, event types or secret; members absent keep their value. secret \"new\" generates " +
				"one, returned once. Pending deliveries go to the new URL with the new secret. Checked as on create. Needs the " +
				"project's _im-rw role; an operation of the webhooks module. An EIM addition.",
			body: ref("WebhookChange"),
			ok:   okJSON("The webhook; secret only when the server generated it.", ref("Webhook"))},
		op{method: "delete", id: "deleteWebhook", tag: tagAudit, summary: "Delete a webhook", write: true, params: []any{id},
			desc: "Deletes a webhook and its pending deliveries. Needs the project's _im-rw role. An EIM addition.",
			ok:   o("$ref", "#/components/responses/Deleted")},
	)
	ps.add("/webhooks/{webhookId}/deliveries", op{method: "get", id: "listWebhookDeliveries", tag: tagAudit,
		summary: "List a webhook's deliveries", params: []any{id, pref("pageSize"), pref("offset")},
		desc: "The webhook's deliveries, newest first: each event's state (PENDING, DELIVERED, FAILED once given up " +
			"a day after the event), attempts, next attempt, last HTTP status and last error. An EIM addition.",
		ok: okJSON("A page of deliveries.", ref("ListWebhookDeliveriesResponse"))})
}

func auditSchemas(into *obj) {
	str := func(desc string) *obj { return o("type", "string", "description", desc) }
	into.set("AuditRecord", o(
		"type", "object",
		"description", "One change of one resource.",
		"properties", o(
			"seq", o("type", "integer", "format", "int64", "description", "Number of the record in its project, from 1, whatever other projects write (higher is later); records become visible in this order, so filter=seq>N resumes after N without missing one."),
			"time", o("type", "string", "format", "date-time", "description", "When the change committed."),
			"principal", str("Who made it: user:<token subject>, node:<host ID>, module:<name> or system."),
			"action", o("type", "string", "enum", []string{string(eim.OpCreated), string(eim.OpUpdated), string(eim.OpDeleted)}),
			"kind", str("The resource's kind (its ID prefix; project for the project itself)."),
			"resourceId", str("The resource's ID (the project's name for kind project)."),
			"changes", o("type", "object", "description", "The fields written, by JSON name: old and new values (null when absent); secrets are \"[redacted]\".",
				"additionalProperties", o("type", "object", "properties", o("old", o(), "new", o()))),
		),
		"required", []string{"seq", "time", "principal", "action", "kind", "resourceId", "changes"},
	))
	into.set("ListAuditRecordsResponse", o("type", "object",
		"properties", o("auditRecords", o("type", "array", "items", ref("AuditRecord")),
			"totalElements", o("type", "integer", "format", "int32"), "hasNext", o("type", "boolean")),
		"required", []string{"auditRecords", "totalElements", "hasNext"}))
	into.set("Webhook", o(
		"type", "object",
		"description", "A receiver of the project's events.",
		"properties", o(
			"webhookId", o("type", "string", "pattern", idPattern(eim.KindWebhook), "readOnly", true),
			"url", o("type", "string", "format", "uri", "maxLength", eim.MaxWebhookURL),
			"eventTypes", o("type", "array", "items", o("type", "string", "enum", eim.EventTypes)),
			"createdAt", o("type", "string", "format", "date-time", "readOnly", true),
			"secret", o("type", "string", "readOnly", true, "description", "Only in the answer to a create that let the server generate it."),
		),
		"required", []string{"webhookId", "url", "eventTypes", "createdAt"},
	))
	into.set("WebhookCreate", o(
		"type", "object",
		"additionalProperties", false,
		"properties", o(
			"url", o("type", "string", "format", "uri", "maxLength", eim.MaxWebhookURL, "description", "http or https, no user information."),
			"eventTypes", o("type", "array", "minItems", 1, "uniqueItems", true, "items", o("type", "string", "enum", eim.EventTypes)),
			"secret", o("type", "string", "minLength", eim.MinWebhookSecret, "maxLength", eim.MaxWebhookSecret, "writeOnly", true,
				"description", "Key of the deliveries' HMAC; absent: the server generates one and returns it once."),
		),
		"required", []string{"url", "eventTypes"},
	))
	into.set("WebhookChange", o(
		"type", "object",
		"additionalProperties", false,
		"properties", o(
			"url", o("type", "string", "format", "uri", "maxLength", eim.MaxWebhookURL),
			"eventTypes", o("type", "array", "minItems", 1, "uniqueItems", true, "items", o("type", "string", "enum", eim.EventTypes)),
			"secret", o("type", "string", "maxLength", eim.MaxWebhookSecret, "writeOnly", true,
				"description", "A new secret (16 to 256 characters), or \"new\" to have the server generate one."),
		),
	))
	into.set("ListWebhooksResponse", o("type", "object",
		"properties", o("webhooks", o("type", "array", "items", ref("Webhook")),
			"totalElements", o("type", "integer", "format", "int32"), "hasNext", o("type", "boolean")),
		"required", []string{"webhooks", "totalElements", "hasNext"}))
	into.set("WebhookDelivery", o(
		"type", "object",
		"properties", o(
			"deliveryId", str("The delivery's ID (header EIM-Delivery-Id); the event's ID (EIM-Event-Id) is its prefix."),
			"webhookId", str("The webhook."),
			"eventType", o("type", "string", "enum", eim.EventTypes),
			"resourceId", str("The resource the event is about."),
			"state", o("type", "string", "enum", []string{string(eim.DeliveryPending), string(eim.DeliveryDelivered), string(eim.DeliveryFailed)}),
			"attempts", o("type", "integer"),
			"createdAt", o("type", "string", "format", "date-time"),
			"nextAttemptAt", o("type", "string", "format", "date-time"),
			"lastStatusCode", o("type", "integer", "description", "HTTP status of the last attempt; 0 when none came."),
			"lastError", str("What went wrong in the last attempt; \"\" after a success."),
		),
		"required", []string{"deliveryId", "webhookId", "eventType", "resourceId", "state", "attempts", "createdAt", "nextAttemptAt", "lastStatusCode", "lastError"},
	))
	into.set("ListWebhookDeliveriesResponse", o("type", "object",
		"properties", o("deliveries", o("type", "array", "items", ref("WebhookDelivery")),
			"totalElements", o("type", "integer", "format", "int32"), "hasNext", o("type", "boolean")),
		"required", []string{"deliveries", "totalElements", "hasNext"}))
}
