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
	job := o("name", "jobId", "in", "path", "required", true, "description", "ID of the power job.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindPowerJob)))
	ps.add("/compute/hosts/{hostId}/bmc/jobs",
		op{method: "get", id: "listHostPowerJobs", tag: tagHosts, summary: "List a host's power jobs", params: []any{host, pref("pageSize"), pref("offset")},
			desc: "The host's power jobs through its BMC, newest first: each change of desiredPowerState of a host with a BMC " +
				"(and each POST here) is a job of steps, confirmed from the BMC's state. Needs a role on the project." + module,
			ok: okJSON("A page of jobs.", ref("PowerJobList"))},
		op{method: "post", id: "createHostPowerJob", tag: tagHosts, summary: "Power a host through its BMC", params: []any{host}, write: true,
			desc: "Adds a power job (after the host's jobs still to end, or cancelling them with powerCommandPolicy IMMEDIATE), " +
				"with an optional boot override set first, and sets the host's desiredPowerState. 404 when the host has no BMC. " +
				"Needs the project's _im-rw role." + module,
			body: ref("PowerRequest"),
			ok:   okJSON("The job created.", ref("PowerJob"))},
	)
	ps.add("/compute/hosts/{hostId}/bmc/jobs/{jobId}",
		op{method: "get", id: "getHostPowerJob", tag: tagHosts, summary: "Get a host's power job", params: []any{host, job},
			desc: "One power job: its steps, state, attempts and last error. Needs a role on the project." + module,
			ok:   okJSON("The job.", ref("PowerJob"))},
		op{method: "delete", id: "deleteHostPowerJob", tag: tagHosts, summary: "Cancel a host's power job", params: []any{host, job}, write: true,
			desc: "Cancels a job that has not ended (409 when it has); the job stays listed as CANCELLED. Needs the project's _im-rw role." + module,
			ok:   okJSON("The job, cancelled.", ref("PowerJob"))},
	)
	ps.add("/compute/hosts/{hostId}/bmc/jobs/{jobId}/cancel",
		op{method: "post", id: "cancelHostPowerJob", tag: tagHosts, summary: "Cancel a host's power job", params: []any{host, job}, write: true,
			alias: "deleteHostPowerJob",
			desc:  "As DELETE of the job." + module,
			ok:    okJSON("The job, cancelled.", ref("PowerJob"))},
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
	policy := o("type", "string", "enum", append(eim.PowerPolicies(), ""),
		"description", "The host's power policy: ALWAYS_ON powers it on again when the BMC finds it off while its desiredPowerState is ON; "+
			"REPORT shows the mismatch only; empty: the site's, else the project's (REPORT when none is set).")
	into.set("BMCInput", o("type", "object", "additionalProperties", false,
		"description", "A host's BMC settings; they replace those stored.",
		"properties", o(
			"protocol", protocol, "address", address, "systemId", systemID, "username", username,
			"password", o("type", "string", "maxLength", eim.MaxBMCPassword, "writeOnly", true,
				"description", "The account's password (IPMI: at most 20 bytes). Required for a new BMC; absent on a replace: the stored one is kept."),
			"caCert", ca, "insecure", insecure, "powerPolicy", policy),
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
			"caCert", ca, "insecure", insecure, "powerPolicy", policy,
			"capabilities", ref("BMCCapabilities"),
			"reachable", ref("BMCReachable"),
			"timestamps", ref("Timestamps")),
		"required", []string{"hostId", "protocol", "address", "username", "passwordSet", "insecure", "powerPolicy", "capabilities", "reachable", "timestamps"}))

	power := o("type", "string", "enum", eim.PowerState("").Values(), "description", "A host's power state.")
	into.set("PowerRequest", o("type", "object", "additionalProperties", false,
		"description", "A power change asked through the host's BMC; with boot NETWORK or VIRTUAL_MEDIA, Day 0 started through it (a network-boot or virtual-media job).",
		"properties", o("desiredPowerState", o("type", "string", "enum", eim.PowerState("").Values(),
			"description", "A host's power state (required, but with boot NETWORK or VIRTUAL_MEDIA, where it may only be POWER_STATE_ON)."),
			"boot", o("type", "string", "enum", []string{"PXE", "HTTP", "CD", "DISK", "BIOS", "NETWORK", "VIRTUAL_MEDIA"},
				"description", "A boot override set before the power action (ON, RESET, POWER_CYCLE); NETWORK: a network-boot job (a one-time PXE or UEFI HTTP boot, on if off or reset if on, done when the node calls home, the override cleared); "+
					"VIRTUAL_MEDIA: a virtual-media job (EIM's micro-OS CD image, --oob-virtual-media-url, inserted as the BMC's virtual CD, a one-time boot from it, on if off or reset if on, done when the node calls home, the image ejected and the override cleared; a BMC without virtual media fails the job at once)."),
			"bootOnce", o("type", "boolean", "description", "The override is for the next boot only (not with NETWORK or VIRTUAL_MEDIA, always once)."))))
	into.set("PowerStep", o("type", "object", "additionalProperties", false,
		"description", "A step of a power job and how far it got.",
		"properties", o("kind", o("type", "string", "enum", []string{eim.PowerStepSetBoot, eim.PowerStepPower, "BOOT_POWER", "CALL_HOME", "CLEAR_BOOT", "INSERT_MEDIA", "EJECT_MEDIA"},
			"description", "SET_BOOT, POWER; a network-boot job's BOOT_POWER (on or reset, chosen from the state), CALL_HOME (the node calling home), CLEAR_BOOT; a virtual-media job's INSERT_MEDIA and EJECT_MEDIA besides."),
			"action", o("type", "string", "description", "The power action: ON, GRACEFUL_OFF, FORCE_OFF, RESET, POWER_CYCLE, SLEEP, HIBERNATE."),
			"boot", o("type", "string", "description", "The boot override of a SET_BOOT step."),
			"once", o("type", "boolean"),
			"image", o("type", "string", "description", "The URL of the CD image an INSERT_MEDIA step inserts."),
			"timeoutMs", o("type", "integer", "description", "How long the step's confirmation is awaited (ms)."),
			"sends", o("type", "integer", "description", "Times the action was sent."),
			"sentAt", o("type", "string", "format", "date-time"),
			"done", o("type", "boolean", "description", "Confirmed from the BMC's state."),
			"skipped", o("type", "boolean", "description", "Not needed, or given up for the next step (a graceful shutdown that timed out)."),
			"note", o("type", "string"),
			"bootId", o("type", "string", "description", "A RESET or POWER_CYCLE step's: the boot ID the host's agent reported before the action was sent; "+
				"a new one reported after it confirms the step (absent when the host had no connected agent: the BMC's state confirms it)."),
			"queued", o("type", "string", "description", "While the step waits for a power-on slot of its site (--oob-site-limit): "+
				"\"waiting for a site slot: N ahead\" and the site's limit; absent otherwise. The wait does not count against the job's deadline.")),
		"required", []string{"kind"}))
	into.set("PowerJob", o("type", "object", "additionalProperties", false,
		"description", "A power change of a host through its BMC.",
		"properties", o(
			"jobId", o("type", "string", "pattern", idPattern(eim.KindPowerJob)),
			"hostId", o("type", "string", "pattern", idPattern(eim.KindHost)),
			"desiredPowerState", power,
			"reason", o("type", "string", "description", "Why the job was made when no user asked for it "+
				"(\"restored by power policy ALWAYS_ON: the BMC reported OFF\"); absent for a user's request."),
			"state", o("type", "string", "enum", []string{"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}),
			"steps", o("type", "array", "items", ref("PowerStep")),
			"step", o("type", "integer", "description", "The step being carried out."),
			"attempts", o("type", "integer", "description", "Times a worker took the job up."),
			"lastError", o("type", "string", "description", "The last failure, or why the job failed or was cancelled."),
			"deadline", o("type", "string", "format", "date-time", "description", "The job fails if it has not ended by then."),
			"endedAt", o("type", "string", "format", "date-time"),
			"timestamps", ref("Timestamps")),
		"required", []string{"jobId", "hostId", "desiredPowerState", "state", "steps", "step", "attempts", "deadline", "timestamps"}))
	into.set("PowerJobList", o("type", "object", "additionalProperties", false,
		"properties", o("jobs", o("type", "array", "items", ref("PowerJob")),
			"totalElements", o("type", "integer"), "hasNext", o("type", "boolean")),
		"required", []string{"jobs", "totalElements", "hasNext"}))
}
