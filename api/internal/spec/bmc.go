package spec

import "github.com/eimhq/eim"

// A host's BMC: the oob module's resource (package oob).

func addBMC(ps *pathSet) {
	host := o("name", "hostId", "in", "path", "required", true, "description", "ID of the host.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindHost)))
	const module = " An operation of the oob module (served where it runs). An EIM addition: the original kept a host's BMC " +
		"credentials in its inventory and showed only bmcKind and bmcIp."
	ps.add("/compute/hosts/{hostId}/bmc",
		op{method: "get", id: "getHostBMC", tag: tagHosts, summary: "Get a host's BMC", params: []any{host},
			desc: "The host's BMC: how EIM reaches it, never its password (passwordSet says one is stored), and what EIM found " +
				"there (capabilities, reachable: empty until the module reads them from the BMC). 404 when the host has none " +
				"or the project has no such host. Needs a role on the project." + module,
			ok: okJSON("The BMC.", ref("BMC"))},
		op{method: "put", id: "putHostBMC", tag: tagHosts, summary: "Create or replace a host's BMC", params: []any{host}, write: true,
			desc: "Sets the host's BMC. The password is required when the host has none yet; left out on a replace, the stored " +
				"one is kept. It is stored sealed under the deployment's secrets key, never answered, and shown as redacted in " +
				"the audit log. A replace clears capabilities and reachable. A bad field is 400 naming it. Needs the project's " +
				"_im-rw role." + module,
			body: ref("BMCInput"),
			ok:   okJSON("The BMC as stored.", ref("BMC"))},
		op{method: "delete", id: "deleteHostBMC", tag: tagHosts, summary: "Delete a host's BMC", params: []any{host}, write: true,
			desc: "Removes the host's BMC (a BMC also goes with its host). Needs the project's _im-rw role." + module,
			ok:   o("$ref", "#/components/responses/Deleted")},
	)
}

func bmcSchemas(into *obj) {
	str := func(desc string) *obj { return o("type", "string", "description", desc) }
	protocol := o("type", "string", "enum", eim.BMCProtocols(), "description", "How EIM talks to the BMC (AMT: Intel AMT/ISM).")
	address := o("type", "string", "maxLength", eim.MaxBMCAddress,
		"description", "host[:port] (a name or an IP address; IPv6 in brackets with a port), or for REDFISH and AMT an https or "+
			"http URL with only a host and port.")
	systemID := o("type", "string", "maxLength", 128, "pattern", `^[A-Za-z0-9._~-]*$`,
		"description", "The Redfish ComputerSystem to act on (REDFISH only); empty: the BMC's only system.")
	username := o("type", "string", "minLength", 1, "maxLength", eim.MaxBMCUsername, "description", "The BMC account.")
	ca := o("type", "string", "maxLength", eim.MaxBMCCACert,
		"description", "PEM bundle of the certificates the BMC's TLS certificate is checked against (REDFISH, AMT); empty: the system's roots.")
	insecure := o("type", "boolean", "description", "Skip the check of the BMC's TLS certificate (REDFISH, AMT); not with caCert.")
	into.set("BMCInput", o("type", "object", "additionalProperties", false,
		"description", "A host's BMC settings; they replace those stored.",
		"properties", o(
			"protocol", protocol, "address", address, "systemId", systemID, "username", username,
			"password", o("type", "string", "maxLength", eim.MaxBMCPassword, "writeOnly", true,
				"description", "The account's password (IPMI: at most 20 bytes). Required for a new BMC; absent on a replace: the stored one is kept."),
			"caCert", ca, "insecure", insecure),
		"required", []string{"protocol", "address", "username"}))
	into.set("BMCCapabilities", o("type", "object", "additionalProperties", false,
		"description", "What the BMC says it can do, read by the oob module (empty until it has).",
		"properties", o(
			"resetTypes", o("type", "array", "items", o("type", "string"), "description", "The power actions it allows (Redfish ResetType values)."),
			"bootTargets", o("type", "array", "items", o("type", "string"), "description", "The boot override targets it allows."),
			"virtualMedia", o("type", "boolean", "description", "Whether it can insert virtual media."))))
	into.set("BMCReachable", o("type", "object", "additionalProperties", false,
		"description", "The outcome of the last time EIM talked to the BMC (empty: it has not yet).",
		"properties", o(
			"status", o("type", "string", "enum", []string{"REACHABLE", "UNREACHABLE"}),
			"lastError", str("Why the last attempt failed."),
			"checkedAt", o("type", "string", "format", "date-time", "description", "When."))))
	into.set("BMC", o("type", "object", "additionalProperties", false,
		"description", "A host's BMC, without its password.",
		"properties", o(
			"hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The host."),
			"protocol", protocol, "address", address, "systemId", systemID, "username", username,
			"passwordSet", o("type", "boolean", "description", "Whether a password is stored (it is never answered)."),
			"caCert", ca, "insecure", insecure,
			"capabilities", ref("BMCCapabilities"),
			"reachable", ref("BMCReachable"),
			"timestamps", ref("Timestamps")),
		"required", []string{"hostId", "protocol", "address", "username", "passwordSet", "insecure", "capabilities", "reachable", "timestamps"}))
}
