package spec

import "github.com/eimhq/eim"

// The enrollment lobby: the onboarding module's requests of unknown
// devices and its auto-approval rules (package onboarding, docs/enrollment.md).

func addEnrollment(ps *pathSet) {
	reqID := o("name", "id", "in", "path", "required", true, "description", "ID of the enrollment request.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindEnrollment)))
	ruleID := o("name", "id", "in", "path", "required", true, "description", "ID of the rule.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindEnrollmentRule)))
	const module = " An operation of the onboarding module (served where it runs); an EIM addition (docs/enrollment.md)."
	str := func(name, desc string) *obj {
		return o("name", name, "in", "query", "description", desc, "schema", o("type", "string", "maxLength", 64))
	}
	ps.add("/enrollmentrequests",
		op{method: "get", id: "listEnrollmentRequests", tag: tagHosts, summary: "List the devices in the enrollment lobby",
			desc: "The project's enrollment requests — devices that called home with its enrollment token and match no host — " +
				"newest first. Needs a role on the project." + module,
			params: []any{str("state", "PENDING, APPROVED or DENIED."), str("serialNumber", "Only this serial number."), str("uuid", "Only this UUID."),
				pref("pageSize"), pref("offset")},
			ok: okJSON("A page of requests.", ref("ListEnrollmentRequestsResponse"))})
	ps.add("/enrollmentrequests/{id}",
		op{method: "get", id: "getEnrollmentRequest", tag: tagHosts, summary: "Get an enrollment request", params: []any{reqID},
			desc: "One request. Needs a role on the project." + module, ok: okJSON("The request.", ref("EnrollmentRequest"))},
		op{method: "delete", id: "deleteEnrollmentRequest", tag: tagHosts, summary: "Forget an enrollment request", params: []any{reqID}, write: true,
			desc: "Removes the request; the device, calling again, makes a new one (deny it to keep it out). Needs the project's _im-rw role." + module,
			ok:   o("$ref", "#/components/responses/Deleted")})
	ps.add("/enrollmentrequests/{id}/approve",
		op{method: "post", id: "approveEnrollmentRequest", tag: tagHosts, summary: "Approve a device", params: []any{reqID}, write: true,
			desc: "Creates the device's host — onboarded, named, at the site, with the labels as its metadata — in one transaction with " +
				"the decision; the device onboards at its next call. 412 when it is approved already. Needs the project's _im-rw role." + module,
			body: ref("EnrollmentApproval"), ok: okJSON("The request, approved, with its hostId.", ref("EnrollmentRequest"))})
	ps.add("/enrollmentrequests/{id}/deny",
		op{method: "post", id: "denyEnrollmentRequest", tag: tagHosts, summary: "Deny a device", params: []any{reqID}, write: true,
			desc: "The device is told \"enrollment denied by project P: reason\" and backs off. Needs the project's _im-rw role." + module,
			body: ref("EnrollmentDenial"), ok: okJSON("The request, denied.", ref("EnrollmentRequest"))})
	ps.add("/enrollmentrules",
		op{method: "get", id: "listEnrollmentRules", tag: tagHosts, summary: "List the auto-approval rules",
			desc: "The project's rules, oldest first. Needs a role on the project." + module,
			ok:   okJSON("The rules.", ref("ListEnrollmentRulesResponse"))},
		op{method: "post", id: "createEnrollmentRule", tag: tagHosts, summary: "Create an auto-approval rule", write: true,
			desc: "A rule approves matching requests without a person, audited as the rule. A TOKEN rule's token is answered " +
				"this once. A bad field is 400 naming it; a name in use 409. Needs the project's _im-rw role." + module,
			body: ref("EnrollmentRuleInput"), ok: okJSON("The rule (with a TOKEN rule's token).", ref("EnrollmentRule"))})
	ps.add("/enrollmentrules/{id}",
		op{method: "get", id: "getEnrollmentRule", tag: tagHosts, summary: "Get an auto-approval rule", params: []any{ruleID},
			desc: "One rule. Needs a role on the project." + module, ok: okJSON("The rule.", ref("EnrollmentRule"))},
		op{method: "delete", id: "deleteEnrollmentRule", tag: tagHosts, summary: "Delete an auto-approval rule", params: []any{ruleID}, write: true,
			desc: "Needs the project's _im-rw role." + module, ok: o("$ref", "#/components/responses/Deleted")})
}

func enrollmentSchemas(into *obj) {
	s := func(desc string) *obj { return o("type", "string", "description", desc) }
	labels := func(desc string) *obj {
		return o("type", "array", "maxItems", eim.MaxEnrollmentLabels, "items", ref("MetadataItem"), "description", desc)
	}
	into.set("EnrollmentApproval", o("type", "object", "additionalProperties", false,
		"description", "What an approval gives the device's host (all optional).",
		"properties", o(
			"name", o("type", "string", "maxLength", 20, "description", "The host's name (default: the serial number or UUID)."),
			"siteId", o("type", "string", "pattern", idPattern(eim.KindSite), "description", "The host's site."),
			"metadata", labels("The host's labels (its metadata)."))))
	into.set("EnrollmentDenial", o("type", "object", "additionalProperties", false,
		"properties", o("reason", o("type", "string", "maxLength", eim.MaxEnrollmentReason, "description", "What the device is told."))))
	into.set("EnrollmentRequest", o("type", "object", "additionalProperties", false,
		"description", "A device in the project's enrollment lobby: one per device (its UUID, else its serial number).",
		"properties", o(
			"resourceId", o("type", "string", "pattern", idPattern(eim.KindEnrollment)),
			"uuid", s("SMBIOS UUID."), "serialNumber", s("Serial number."),
			"macAddresses", o("type", "array", "items", o("type", "string")),
			"hostname", s("The device's host name."),
			"hardware", o("type", "object", "additionalProperties", false, "description", "What the device says of its hardware.",
				"properties", o("cpuModel", s(""), "cpuCores", o("type", "integer"), "memoryBytes", o("type", "integer"),
					"productName", s(""), "architecture", s(""), "os", s("The running OS of an installed device."))),
			"labels", labels("What the device reports (rules match on them)."),
			"installed", o("type", "boolean", "description", "The device runs its OS already: no provisioning."),
			"state", o("type", "string", "enum", []string{"PENDING", "APPROVED", "DENIED"}),
			"reason", s("A denial's reason, or why the request was opened again."),
			"decidedBy", s("user:… or rule:<id> (<name>)."),
			"decidedAt", o("type", "string", "format", "date-time"),
			"ruleId", o("type", "string", "pattern", idPattern(eim.KindEnrollmentRule)),
			"hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The host an approval created."),
			"approval", ref("EnrollmentApproval"),
			"attempts", o("type", "integer", "description", "The device's calls (saved at most once a minute)."),
			"firstSeen", o("type", "string", "format", "date-time"),
			"lastSeen", o("type", "string", "format", "date-time")),
		"required", []string{"resourceId", "macAddresses", "hardware", "labels", "installed", "state", "approval", "attempts", "firstSeen", "lastSeen"}))
	into.set("ListEnrollmentRequestsResponse", o("type", "object", "additionalProperties", false,
		"properties", o("enrollmentRequests", o("type", "array", "items", ref("EnrollmentRequest")),
			"totalElements", o("type", "integer"), "hasNext", o("type", "boolean")),
		"required", []string{"enrollmentRequests", "totalElements", "hasNext"}))
	kind := o("type", "string", "enum", []string{"SERIAL", "LABELS", "TOKEN", "ANY"},
		"description", "SERIAL: a serial number in serialNumbers; LABELS: every label of matchLabels reported; TOKEN: the rule's own token (a site's); ANY: every device with the project's token.")
	ruleProps := func() *obj {
		return o("name", o("type", "string", "minLength", 1, "maxLength", 50), "kind", kind,
			"serialNumbers", o("type", "array", "maxItems", eim.MaxRuleSerials, "items", o("type", "string")),
			"matchLabels", labels("LABELS: what the device must report."),
			"siteId", o("type", "string", "pattern", idPattern(eim.KindSite), "description", "The site of the hosts it approves (required for TOKEN)."),
			"metadata", labels("The labels of the hosts it approves."))
	}
	into.set("EnrollmentRuleInput", o("type", "object", "additionalProperties", false, "properties", ruleProps(), "required", []string{"name", "kind"}))
	props := ruleProps()
	props.set("resourceId", o("type", "string", "pattern", idPattern(eim.KindEnrollmentRule)))
	props.set("createdAt", o("type", "string", "format", "date-time"))
	props.set("token", o("type", "string", "description", "A TOKEN rule's token, answered once, at its creation."))
	into.set("EnrollmentRule", o("type", "object", "additionalProperties", false, "properties", props,
		"required", []string{"resourceId", "name", "kind", "serialNumbers", "matchLabels", "metadata", "createdAt"}))
	into.set("ListEnrollmentRulesResponse", o("type", "object", "additionalProperties", false,
		"properties", o("enrollmentRules", o("type", "array", "items", ref("EnrollmentRule")),
			"totalElements", o("type", "integer"), "hasNext", o("type", "boolean")),
		"required", []string{"enrollmentRules", "totalElements", "hasNext"}))
}
