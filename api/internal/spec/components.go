package spec

import (
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// sharedSchemas are the component schemas that are not a resource kind:
// value types, envelopes and the bodies of the special operations.
func sharedSchemas(into *obj) {
	into.set("MetadataItem", o(
		"type", "object",
		"description", "A label. Keys are unique within one list.",
		"properties", o(
			"key", o("type", "string", "description", "Label key, optionally with a DNS-style prefix and a slash.", "maxLength", 316,
				"pattern", `^$|^[a-z.]+/$|^[a-z.]+/[a-z0-9][a-z0-9-_.]*[a-z0-9]$|^[a-z.]+/[a-z0-9]$|^[a-z]$|^[a-z0-9][a-z0-9-_.]*[a-z0-9]$`),
			"value", o("type", "string", "description", "Label value.", "maxLength", 63,
				"pattern", `^$|^[a-z0-9]$|^[a-z0-9][a-z0-9._-]*[a-z0-9]$`),
		),
		"required", []string{"key", "value"},
	))
	ts := o("type", "string", "format", "date-time", "readOnly", true,
		"description", "UTC, ISO 8601 with exactly three fractional digits.", "examples", []string{"2026-11-21T10:00:00.000Z"})
	into.set("Timestamps", o(
		"type", "object",
		"description", "Set by the system: when a resource was created and when any of its fields last changed.",
		"properties", o("createdAt", ts, "updatedAt", ts),
	))
	into.set("HostRegister", o(
		"type", "object",
		"description", "Pre-registers a machine by its UUID or serial number (at least one) so that it is recognised when it first calls home.",
		"properties", o(
			"name", o("type", "string", "description", "Name of the host.", "maxLength", 20, "pattern", namePat),
			"serialNumber", o("type", "string", "description", "Serial number of the machine.", "pattern", `^([A-Za-z0-9]{5,20})?$`),
			"uuid", o("type", "string", "description", "SMBIOS UUID of the machine.", "maxLength", 36, "pattern", uuidPat),
			"autoOnboard", o("type", "boolean", "description", "Onboard the machine as soon as it calls home, without a separate onboard call."),
			"enableVpro", o("type", "boolean", "description", "Provision Intel AMT (vPro) on the machine."),
			"userLvmSize", o("type", "integer", "minimum", 0, "maximum", int64(1<<32-1), "description", "Size in GB of the user LVM volume to create."),
		),
	))
	into.set("GetHostSummaryResponse", o(
		"type", "object",
		"description", "Host counts of a project (of the hosts matching the filter, if one was given).",
		"properties", o(
			"total", o("type", "integer", "readOnly", true, "description", "All hosts."),
			"error", o("type", "integer", "readOnly", true, "description", "Hosts whose host status indicator is ERROR."),
			"running", o("type", "integer", "readOnly", true, "description", "Hosts whose status is Running."),
			"unallocated", o("type", "integer", "readOnly", true, "description", "Hosts without a site."),
		),
	))
	counts := func() *obj {
		return o(
			"total", o("type", "integer", "readOnly", true, "description", "All instances (matching the filter)."),
			"upToDate", o("type", "integer", "readOnly", true, "description",
				"Instances whose update status indicator is IDLE: the last update completed (\"Update completed\") or found nothing new (\"No new updates available\")."),
			"updating", o("type", "integer", "readOnly", true, "description", "Instances whose update status indicator is IN_PROGRESS (\"Updating\" and the steps before it)."),
			"failed", o("type", "integer", "readOnly", true, "description", "Instances whose update status indicator is ERROR (\"Update failed\")."),
			"unknown", o("type", "integer", "readOnly", true, "description",
				"Instances nothing was reported for yet (\"No Current Update\", indicator UNSPECIFIED). upToDate + updating + failed + unknown = total."),
			"osUpdateAvailable", o("type", "integer", "readOnly", true, "description",
				"Instances whose osUpdateAvailable is not empty (a newer OS is known for them), whatever their update status."),
		)
	}
	perOS := counts()
	perOS.set("osResourceId", o("type", "string", "description", "ID of the OS profile the instances run; \"\" for instances without one.",
		"pattern", "^$|"+idPattern(eim.KindOS)))
	perOS.set("name", o("type", "string", "description", "Name of the OS profile."))
	perOS.set("profileName", o("type", "string", "description", "Profile name of the OS profile."))
	perOS.set("imageId", o("type", "string", "description", "Image version of the OS profile."))
	into.set("OSUpdateCounts", o(
		"type", "object",
		"description", "Update counts of the instances of one OS profile.",
		"properties", perOS,
		"required", []string{"osResourceId", "name", "total", "upToDate", "updating", "failed", "unknown", "osUpdateAvailable"},
	))
	all := counts()
	all.set("operatingSystems", o("type", "array", "items", ref("OSUpdateCounts"),
		"description", "The counts per OS profile the instances run, ordered by name."))
	into.set("GetInstanceUpdatesSummaryResponse", o(
		"type", "object",
		"description", "EIM's own fleet-wide view of OS updates: the project's instances (those matching the filter) counted by update state, in all and per OS profile.",
		"properties", all,
		"required", []string{"total", "upToDate", "updating", "failed", "unknown", "osUpdateAvailable", "operatingSystems"},
	))
	into.set("ListLocationsResponse.ResourceKind", o(
		"type", "string", "description", "Whether a location node is a region or a site.",
		"enum", []string{"RESOURCE_KIND_UNSPECIFIED", "RESOURCE_KIND_REGION", "RESOURCE_KIND_SITE"},
	))
	into.set("ListLocationsResponse.LocationNode", o(
		"type", "object",
		"description", "A region or site whose name matched, or an ancestor of one.",
		"properties", o(
			"resourceId", o("type", "string", "description", "ID of the region or site."),
			"parentId", o("type", "string", "description", "ID of the parent region; empty at the root."),
			"name", o("type", "string", "description", "Name of the region or site."),
			"type", ref("ListLocationsResponse.ResourceKind"),
		),
		"required", []string{"resourceId", "parentId", "name", "type"},
	))
	into.set("ListLocationsResponse", o(
		"type", "object",
		"description", "The location tree nodes that match a name search, with the ancestors needed to place them.",
		"properties", o(
			"nodes", o("type", "array", "items", ref("ListLocationsResponse.LocationNode")),
			"totalElements", o("type", "integer", "format", "int32", "description", "How many nodes matched."),
			"outputElements", o("type", "integer", "format", "int32", "description", "How many nodes are in this response."),
		),
		"required", []string{"nodes"},
	))
	into.set("ListSchedulesResponse", o(
		"type", "object",
		"description", "Single and repeated schedules together; one page over both.",
		"properties", o(
			"singleSchedules", o("type", "array", "items", ref("SingleScheduleResource")),
			"repeatedSchedules", o("type", "array", "items", ref("RepeatedScheduleResource")),
			"totalElements", o("type", "integer", "format", "int32", "description", "Matching schedules of both kinds."),
			"hasNext", o("type", "boolean", "description", "Whether a later page has more."),
		),
		"required", []string{"singleSchedules", "repeatedSchedules", "totalElements", "hasNext"},
	))
	into.set("Empty", o("type", "object", "description", "The empty object {}.", "additionalProperties", false))
	into.set("Error", o(
		"type", "object",
		"description", "Every error has this body.",
		"properties", o(
			"code", o("type", "string", "description", "The gRPC code name of the error.",
				"enum", []string{"InvalidArgument", "FailedPrecondition", "NotFound", "AlreadyExists", "Unauthenticated",
					"PermissionDenied", "ResourceExhausted", "Unavailable", "Internal"}),
			"message", o("type", "string", "description", "What went wrong, for people; names the field at fault."),
		),
		"required", []string{"code", "message"},
	))
	into.set("Project", o(
		"type", "object",
		"description", "A tenant. Its name appears in the paths; its ID is what project roles name.",
		"properties", o(
			"name", o("type", "string", "description", "Name of the project, unique: lowercase letters, digits and '-'.",
				"minLength", 1, "maxLength", 63, "pattern", projectNamePat),
			"id", o("type", "string", "format", "uuid", "description", "ID of the project; a new UUID unless given on create."),
			"createdAt", o("type", "string", "format", "date-time", "readOnly", true, "description", "When the project was created."),
		),
		"required", []string{"name"},
	))
	idOrEmpty := func(k eim.Kind) *obj {
		return o("type", "string", "pattern", "^$|"+idPattern(k))
	}
	into.set("ProjectSettings", o(
		"type", "object",
		"description", "A project's onboarding settings. An empty ID means the setting is off.",
		"properties", o(
			"defaultOsId", withDesc(idOrEmpty(eim.KindOS), "OS profile of the instance zero-touch provisioning creates for an onboarded host without one; \"\" turns zero-touch provisioning off."),
			"defaultLocalAccountId", withDesc(idOrEmpty(eim.KindLocalAccount), "Local account of those instances."),
			"defaultCustomConfigIds", o("type", "array", "maxItems", 100, "description", "Custom configs of those instances.",
				"items", o("type", "string", "pattern", idPattern(eim.KindCustomConfig))),
			"enrollment", o("type", "boolean", "readOnly", true, "description", "Whether an enrollment token is set: devices presenting it enrol in the project."),
			"autoOnboardEnrolled", o("type", "boolean", "description", "Onboard enrolled devices at once; otherwise they are created registered and wait for onboardHost."),
			"heartbeatIntervalSeconds", heartbeatInterval(),
			"heartbeatTimeoutSeconds", heartbeatTimeout(),
			"osSecurityFeatureEnable", osSecurityFeatureEnable(),
			"exporterPerHostOff", exporterPerHostOff(),
			"edgeWorkloadsAllowPrivileged", edgeWorkloadsAllowPrivileged(),
			"powerPolicy", powerPolicy(),
		),
		"required", []string{"defaultOsId", "defaultLocalAccountId", "defaultCustomConfigIds", "enrollment", "autoOnboardEnrolled",
			"heartbeatIntervalSeconds", "heartbeatTimeoutSeconds", "osSecurityFeatureEnable", "exporterPerHostOff",
			"edgeWorkloadsAllowPrivileged", "powerPolicy"},
	))
	into.set("ProjectDetail", o(
		"type", "object",
		"description", "A project with its settings; spec and status.projectStatus are the original tenant manager's, for its clients.",
		"properties", o(
			"name", o("type", "string", "description", "Name of the project."),
			"id", o("type", "string", "format", "uuid", "description", "ID of the project."),
			"createdAt", o("type", "string", "format", "date-time", "readOnly", true, "description", "When the project was created."),
			"spec", o("type", "object", "description", "The tenant manager's spec.", "properties", o(
				"description", o("type", "string", "description", "Display name (set by putProject); absent when none is set."))),
			"settings", ref("ProjectSettings"),
			"enrollmentToken", o("type", "string", "readOnly", true,
				"description", "Only in the answer to the change that generated it (enrollmentToken \"new\"); never shown again."),
			"status", ref("ProjectStatus"),
		),
		"required", []string{"name", "id", "createdAt", "settings"},
	))
	into.set("ProjectStatus", o(
		"type", "object", "readOnly", true,
		"description", "A project's readiness and deletion, and its status as the original's tenant manager showed it.",
		"properties", o(
			"projectStatus", o("type", "object", "description", "The status as the original's tenant manager showed it.", "properties", o(
				"statusIndicator", o("type", "string", "enum", []string{"STATUS_INDICATION_IDLE", "STATUS_INDICATION_IN_PROGRESS", "STATUS_INDICATION_ERROR"},
					"description", "In progress while a module that initialises projects has not done so, or while the project is being deleted; "+
						"error when the deletion's last attempt failed (it is retried); idle otherwise."),
				"message", o("type", "string", "description", "\"waiting for: <modules>\", \"deleting: <phase>[: <error>]\", or empty."),
				"timeStamp", o("type", "integer", "format", "int64", "description", "Unix time in seconds of the status's last change."),
				"uID", o("type", "string", "format", "uuid", "description", "The project's ID, which its roles are keyed with."),
			), "required", []string{"statusIndicator", "message", "timeStamp", "uID"}),
			"ready", o("type", "boolean", "description", "Every condition is ready and the project is not being deleted."),
			"conditions", o("type", "array", "description", "One per module that initialises projects and runs in the deployment, by module.",
				"items", ref("ProjectCondition")),
			"deletion", ref("ProjectDeletion"),
		),
		"required", []string{"projectStatus", "ready", "conditions"},
	))
	into.set("ProjectCondition", o(
		"type", "object",
		"description", "Whether a module has initialised the project; one that has not said yet shows not ready, waiting for it.",
		"properties", o(
			"module", o("type", "string", "description", "The module (os, tenant)."),
			"ready", o("type", "boolean"),
			"message", o("type", "string", "description", "What the module did, or what it waits for."),
			"since", o("type", "string", "format", "date-time", "description", "Since when ready has had its value."),
		),
		"required", []string{"module", "ready", "message", "since"},
	))
	into.set("ProjectDeletion", o(
		"type", "object",
		"description", "The progress of a project's deletion.",
		"properties", o(
			"phase", o("type", "string", "description", "The phase under way.",
				"enum", []string{"deauthorize", "telemetry", "schedules", "workloads", "hosts", "os", "sites", "regions",
					"providers", "localaccounts", "customconfigs", "project"}),
			"step", o("type", "integer", "minimum", 1, "description", "The phase's place in the order (1 = the first)."),
			"steps", o("type", "integer", "description", "How many phases there are."),
			"remaining", o("type", []string{"integer", "null"}, "description", "Resources of the phase left (hosts and instances until their managers removed them); null: not counted yet."),
			"startedAt", o("type", "string", "format", "date-time"),
			"updatedAt", o("type", "string", "format", "date-time", "description", "When the deletion last moved on."),
			"error", o("type", "string", "description", "The last error met; the phase is tried again."),
		),
		"required", []string{"phase", "step", "steps", "remaining", "startedAt", "updatedAt"},
	))
	into.set("ProjectSettingsChange", o(
		"type", "object",
		"description", "A change of a project's settings: members absent keep their value; \"\" or null clears an ID, [] or null the list. Unknown members are 400.",
		"additionalProperties", false,
		"properties", o(
			"defaultOsId", withDesc(idOrEmpty(eim.KindOS), "OS profile for zero-touch provisioning; \"\" turns it off."),
			"defaultLocalAccountId", withDesc(idOrEmpty(eim.KindLocalAccount), "Local account of the instances zero-touch provisioning creates."),
			"defaultCustomConfigIds", o("type", "array", "maxItems", 100, "uniqueItems", true,
				"description", "Custom configs of the instances zero-touch provisioning creates.",
				"items", o("type", "string", "pattern", idPattern(eim.KindCustomConfig))),
			"autoOnboardEnrolled", o("type", "boolean", "description", "Onboard enrolled devices at once."),
			"heartbeatIntervalSeconds", heartbeatInterval(),
			"heartbeatTimeoutSeconds", heartbeatTimeout(),
			"osSecurityFeatureEnable", osSecurityFeatureEnable(),
			"exporterPerHostOff", exporterPerHostOff(),
			"edgeWorkloadsAllowPrivileged", edgeWorkloadsAllowPrivileged(),
			"powerPolicy", powerPolicy(),
			"enrollmentToken", o("type", "string", "enum", []string{"new", "none"},
				"description", "new: generate an enrollment token (returned once); none: remove it."),
		),
	))
	into.set("WorkflowLogEntry", o(
		"type", "object",
		"description", "One entry of a provisioning log: a state change (state, message) or a chunk of what the node printed (output).",
		"properties", o(
			"seq", o("type", "integer", "description", "Number of the entry, from 1 within a workflow."),
			"time", o("type", "string", "format", "date-time", "description", "When the server recorded it."),
			"attempt", o("type", "integer", "description", "Attempt of the workflow the entry belongs to."),
			"action", o("type", "integer", "description", "Index of the action (from 0), or -1 for the workflow itself."),
			"name", o("type", "string", "description", "Name of the action (erase-disk, stream-image …)."),
			"state", o("type", "string", "description", "The action's new state, on a state change.",
				"enum", []string{string(eim.ActionPending), string(eim.ActionRunning), string(eim.ActionSucceeded), string(eim.ActionFailed)}),
			"message", o("type", "string", "description", "Why, on a state change."),
			"output", o("type", "string", "description", "A chunk of the action's output."),
		),
		"required", []string{"seq", "time", "attempt", "action"},
	))
	into.set("ProvisioningLog", o(
		"type", "object",
		"description", "A page of an instance's provisioning log.",
		"properties", o(
			"instanceId", o("type", "string", "pattern", idPattern(eim.KindInstance), "description", "The instance."),
			"workflowId", o("type", "string", "description", "Its provisioning workflow; \"\" until the node first asks for it."),
			"attempt", o("type", "integer", "description", "The workflow's attempt."),
			"state", o("type", "string", "description", "The workflow's state; \"\" until there is a workflow.",
				"enum", []string{"", string(eim.WorkflowPending), string(eim.WorkflowRunning), string(eim.WorkflowSucceeded), string(eim.WorkflowFailed)}),
			"message", o("type", "string", "description", "Why a failed workflow failed."),
			"totalActions", o("type", "integer", "description", "How many actions the workflow has."),
			"entries", o("type", "array", "items", ref("WorkflowLogEntry"), "description", "The entries after the requested seq, oldest first."),
			"next", o("type", "integer", "description", "The seq to pass as after to read on."),
		),
		"required", []string{"instanceId", "workflowId", "attempt", "state", "totalActions", "entries", "next"},
	))
	into.set("RecoveryKey", o(
		"type", "object",
		"description", "The escrowed recovery key of an instance's encrypted disk.",
		"properties", o(
			"instanceId", o("type", "string", "pattern", idPattern(eim.KindInstance), "description", "The instance."),
			"hostId", o("type", "string", "description", "The host whose node escrowed it."),
			"volumeUuid", o("type", "string", "description", "The LUKS2 UUID of the volume it opens (cryptsetup luksUUID)."),
			"recoveryKey", o("type", "string", "description", "The passphrase of the volume's recovery keyslot."),
			"escrowedAt", o("type", "string", "format", "date-time", "description", "When the node escrowed it."),
		),
		"required", []string{"instanceId", "hostId", "volumeUuid", "recoveryKey", "escrowedAt"},
	))
	into.set("AttestationKey", o(
		"type", "object",
		"description", "The TPM keys pinned to a host at its first verified quote.",
		"properties", o(
			"hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The host."),
			"akName", o("type", "string", "description", "The attestation key's TPM name (hex: 000b and the SHA-256 of its public area)."),
			"ekName", o("type", "string", "description", "The endorsement key's TPM name (hex)."),
			"pinnedAt", o("type", "string", "format", "date-time", "description", "When the host's first verified quote pinned them."),
			"trust", o("type", "string", "enum", []string{"EK_CERTIFICATE", "FIRST_USE"},
				"description", "What the endorsement key was believed on: its maker's certificate, checked against the TPM makers' CAs the deployment configures, or the host's first quote alone."),
			"trustNote", o("type", "string", "description", "The same in words, and what follows for this host."),
			"ekCertificate", o("type", "object", "description", "The endorsement key's certificate it was checked with (EK_CERTIFICATE only).",
				"properties", o(
					"issuer", o("type", "string", "description", "The issuer's distinguished name."),
					"serial", o("type", "string", "description", "The serial number, in hex."),
				),
				"required", []string{"issuer", "serial"}),
		),
		"required", []string{"hostId", "akName", "ekName", "pinnedAt", "trust", "trustNote"},
	))
	into.set("ListProjectsResponse", o(
		"type", "object",
		"description", "The projects the caller may read (all of them for eim-admin).",
		"properties", o(
			"projects", o("type", "array", "items", ref("ProjectDetail")),
			"totalElements", o("type", "integer", "format", "int32"),
			"hasNext", o("type", "boolean", "description", "Always false: the list is not paged."),
		),
		"required", []string{"projects", "totalElements", "hasNext"},
	))
	into.set("Health", o(
		"type", "object",
		"properties", o("status", o("type", "string", "enum", []string{"ok", "ready"})),
		"required", []string{"status"},
	))
	into.set("Feature", o(
		"type", "object",
		"description", "A feature: whether it is installed, and its parts, each a Feature under its name.",
		"properties", o("installed", o("type", "boolean")),
		"required", []string{"installed"},
		"additionalProperties", ref("Feature"),
	))
	into.set("OrchestratorInfo", o(
		"type", "object",
		"description", "The features of this server, in the shape of the original's component-status service.",
		"properties", o(
			"schema-version", o("type", "string", "enum", []string{"1.0"}),
			"orchestrator", o("type", "object", "properties", o(
				"version", o("type", "string", "description", "Version of the server, when known."),
				"features", o("type", "object", "description", "By the original's names: edge-infrastructure-manager (with "+
					"onboarding, provisioning, day2, oob, oxm-profile), multitenancy, cluster-orchestration, application-orchestration, "+
					"orchestrator-observability.", "additionalProperties", ref("Feature")),
			), "required", []string{"features"}),
		),
		"required", []string{"schema-version", "orchestrator"},
	))
}

// heartbeatInterval and heartbeatTimeout are the heartbeat settings of a
// project. Their bounds depend on each other (and 0 is allowed below the
// interval's minimum), so the schema states the outer bounds and the
// description the rest.
func heartbeatInterval() *obj {
	return o("type", "integer", "minimum", 0, "maximum", eim.MaxHeartbeatInterval,
		"description", fmt.Sprintf("How often, in seconds, the project's nodes send a heartbeat: %d..%d, or 0 for the server's default "+
			"(%d s unless the server is configured otherwise). Nodes pick up a change from the answers to their heartbeats.",
			eim.MinHeartbeatInterval, eim.MaxHeartbeatInterval, eim.DefaultHeartbeatInterval))
}

func heartbeatTimeout() *obj {
	return o("type", "integer", "minimum", 0, "maximum", eim.MaxHeartbeatTimeout,
		"description", fmt.Sprintf("How long, in seconds, a host may go without a heartbeat before it is shown as having no connection: "+
			"at most %d and at least two heartbeat intervals (of the server's default interval when heartbeatIntervalSeconds is 0), "+
			"or 0 for the server's default: as many intervals as the server's default timeout spans "+
			"(%d unless the server is configured otherwise). A change that breaks these bounds, alone or with the interval, is 400.",
			eim.MaxHeartbeatTimeout, eim.DefaultHeartbeatMisses))
}

// listSchema is the envelope of a list of one resource type.
func listSchema(rd resourceDoc) *obj {
	plural := eim.SchemaOf(rd.kind).Plural
	if v, ok := eim.VariantNamed(rd.kind, rd.variant); ok {
		plural = v.Plural
	}
	return o(
		"type", "object",
		"description", "A page of "+rd.noun+"s.",
		"properties", o(
			plural, o("type", "array", "items", ref(rd.name)),
			"totalElements", o("type", "integer", "format", "int32", "description", "How many match, over all pages."),
			"hasNext", o("type", "boolean", "description", "Whether a later page has more."),
		),
		"required", []string{plural, "totalElements", "hasNext"},
	)
}

// listName is the component name of the envelope of a resource type.
func listName(rd resourceDoc) string {
	switch rd.kind {
	case eim.KindOS:
		return "ListOperatingSystemsResponse"
	case eim.KindOSUpdatePolicy, eim.KindOSUpdateRun:
		// The original named these two in the singular.
		return "List" + rd.name + "Response"
	case eim.KindWorkloadMember:
		return "ListWorkloadMembersResponse"
	}
	return "List" + rd.name[:len(rd.name)-len("Resource")] + "sResponse"
}

const filterDoc = `A filter in the AIP-160 syntax (https://google.aip.dev/160), the subset the
original API accepted:
- comparisons ` + "`=` `!=` `<` `<=` `>` `>=`" + `, combined with ` + "`AND`" + ` (also implicit),
  ` + "`OR`" + `, ` + "`NOT`" + ` (or ` + "`-`" + `) and parentheses; the ` + "`:`" + ` (has) operator is not
  supported;
- field names in camelCase or snake_case; a field of a referenced resource
  through its edge, up to 5 levels deep (` + "`site.region.name=\"eu\"`" + `);
- on strings, ` + "`=`" + ` is a case-insensitive substring match in which ` + "`*`" + ` matches any
  run of characters (` + "`name=\"edge-*-01\"`" + `);
- ` + "`has(edge)`" + ` is true when the reference is set (` + "`has(site)`" + `);
- labels: ` + "`metadata='{\"key\":\"zone\",\"value\":\"eu\"}'`" + ` matches resources carrying
  that label, ` + "`metadata='{\"key\":\"zone\"}'`" + ` those with the key;
- enums by name (` + "`desiredState=HOST_STATE_ONBOARDED`" + `);
  ` + "`timestamps.createdAt`" + ` and ` + "`timestamps.updatedAt`" + ` against an RFC 3339 time or Unix seconds.
At most 1000 characters. The original's character set is extended with
` + "`<`, `>` and `!`" + ` so that every documented operator can be written. An invalid
filter is answered with 400 naming the problem.`

const orderByDoc = `Sort order in the AIP-132 syntax: a comma-separated list of fields, each
optionally followed by ` + "`asc`" + ` or ` + "`desc`" + ` (` + "`name desc, resourceId`" + `). Fields of
referenced resources cannot be sorted on (` + "`timestamps.createdAt`" + ` and
` + "`timestamps.updatedAt`" + ` can). Ties, and the default, are by resource ID.`

func parameters(into *obj) {
	into.set("projectName", o("name", "projectName", "in", "path", "required", true,
		"description", "Name of the project.",
		"schema", o("type", "string", "minLength", 1, "maxLength", 100)))
	into.set("legacyProjectName", o("name", "projectName", "in", "query",
		"description", "Name of the project. When absent, the ActiveProjectID header names it.",
		"schema", o("type", "string", "minLength", 1, "maxLength", 100)))
	into.set("activeProjectID", o("name", "ActiveProjectID", "in", "header",
		"description", "ID (UUID) of the project, read when the projectName query parameter is absent.",
		"schema", o("type", "string", "format", "uuid")))
	into.set("filter", o("name", "filter", "in", "query", "description", filterDoc,
		"schema", o("type", "string", "maxLength", 1000, "pattern", `^$|^[a-zA-Z-_0-9.,:/=*(){}"'<>! ]+$`)))
	into.set("orderBy", o("name", "orderBy", "in", "query", "description", orderByDoc,
		"schema", o("type", "string", "maxLength", 1000, "pattern", `^$|^[a-zA-Z-_0-9., ]+$`)))
	into.set("pageSize", o("name", "pageSize", "in", "query",
		"description", "How many items a page holds. Out of range is answered with 400.",
		"schema", o("type", "integer", "minimum", 1, "maximum", 100, "default", 20)))
	into.set("offset", o("name", "offset", "in", "query",
		"description", "How many matching items to skip. Out of range is answered with 400.",
		"schema", o("type", "integer", "minimum", 0, "maximum", 10000, "default", 0)))
	into.set("fieldMask", o("name", "fieldMask", "in", "query",
		"description", "Comma-separated names (camelCase or snake_case) of the writable fields to change. Without it, the fields present in the body are changed. Naming an unknown or read-only field is 400.",
		"schema", o("type", "string")))
	into.set("regionIdQuery", o("name", "regionId", "in", "query",
		"description", "Accepted for compatibility with the region-scoped paths; ignored.",
		"schema", o("type", "string")))
	into.set("hostId", o("name", "hostId", "in", "query",
		"description", "Only schedules that apply to this host: its own, its site's and its site's regions'.",
		"schema", o("type", "string", "pattern", targetPattern(eim.KindHost))))
	into.set("siteId", o("name", "siteId", "in", "query",
		"description", "Only schedules that apply to this site: its own and its regions'.",
		"schema", o("type", "string", "pattern", targetPattern(eim.KindSite))))
	into.set("regionId", o("name", "regionId", "in", "query",
		"description", "Only schedules that target this region.",
		"schema", o("type", "string", "pattern", targetPattern(eim.KindRegion))))
	for _, t := range []struct {
		name, what string
		k          eim.Kind
	}{{"instanceId", "instance", eim.KindInstance}, {"siteId", "site", eim.KindSite}, {"regionId", "region", eim.KindRegion}} {
		into.set("telemetry"+strings.ToUpper(t.name[:1])+t.name[1:], o("name", t.name, "in", "query",
			"description", "Only the profiles that target this "+t.what+"; with showInherited, also those that reach it from above in the "+
				"location tree. Several of instanceId, siteId and regionId together keep the profiles matching any of them. An unknown "+t.what+" is 404.",
			"schema", o("type", "string", "pattern", idPattern(t.k))))
	}
	into.set("showInherited", o("name", "showInherited", "in", "query",
		"description", "With instanceId, siteId or regionId: add the profiles targeting what lies above in the location tree (an "+
			"instance's host's site and the site's regions; a site's regions; a region's ancestors), that is every profile that reaches "+
			"the nodes there. Ignored without any of them.",
		"schema", o("type", "boolean", "default", false)))
	into.set("unixEpoch", o("name", "unixEpoch", "in", "query",
		"description", "Only schedules whose window is open at this Unix time (seconds).",
		"schema", o("type", "string", "pattern", "^[0-9]+$")))
}

// errorResponses are the error answers, by status.
var errorResponses = []struct {
	status, name, desc string
}{
	{"400", "BadRequest", "The request is malformed or invalid (InvalidArgument: bad field, malformed ID, pageSize out of range, bad filter), or the resource's state forbids it (FailedPrecondition)."},
	{"401", "Unauthorized", "No bearer token, or the token is not valid (Unauthenticated)."},
	{"403", "Forbidden", "The token lacks the role for this project or operation (PermissionDenied)."},
	{"404", "NotFound", "The project, or the resource, does not exist, or belongs to another project (NotFound)."},
	{"409", "Conflict", "A uniqueness rule would be broken, e.g. a host UUID or an OS profile name already in use (AlreadyExists)."},
	{"413", "PayloadTooLarge", "The request body is over the limit (100 KiB by default) (ResourceExhausted)."},
	{"429", "TooManyRequests", "The client sent too many requests; slow down (ResourceExhausted)."},
	{"500", "Internal", "An unexpected failure; the message does not describe it (Internal)."},
	{"503", "Unavailable", "The request timed out or a dependency is down; try again (Unavailable)."},
}

func responses(into *obj) {
	for _, e := range errorResponses {
		into.set(e.name, o("description", e.desc, "content", o("application/json", o("schema", ref("Error")))))
	}
	into.set("Deleted", o("description", "Deleted; the body is {}.", "content", o("application/json", o("schema", ref("Empty")))))
	into.set("Done", o("description", "Done; the body is {}.", "content", o("application/json", o("schema", ref("Empty")))))
}

func securitySchemes(into *obj) {
	into.set("bearerAuth", o(
		"type", "http", "scheme", "bearer", "bearerFormat", "JWT",
		"description", `A JWT signed by the server's own key (see eim token) or by a configured
OIDC issuer (roles from realm_access.roles). Roles:
- <projectId>_im-r: read the project's resources;
- <projectId>_im-rw: read and change them;
- eim-admin: everything, including creating and deleting projects.
The project's name is accepted in place of its ID in the role names.`))
}

// projectNamePat is what a new project's name must match (a DNS label).
const projectNamePat = `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`

// targetPattern admits an ID of kind k or "null" (no target of that kind).
func targetPattern(k eim.Kind) string { return "^(null|" + string(k) + "-[0-9a-f]{8})$" }

// withDesc sets the description of schema s and returns it.
func withDesc(s *obj, desc string) *obj {
	s.set("description", desc)
	return s
}

// osSecurityFeatureEnable is the settings' switch of the zero-touch
// instances' security feature (the default provider's config shows it too).
func osSecurityFeatureEnable() *obj {
	return o("type", "boolean", "description",
		"Zero-touch instances take their OS profile's security feature (secure boot and full-disk encryption where it has it). "+
			"The project's default provider infra_onboarding shows the same setting in its config.")
}

func exporterPerHostOff() *obj {
	return o("type", "boolean", "description",
		"The exporter module leaves the project's hosts out of its per-host series (edge_host_*, about 27 series a host); "+
			"its aggregates (eim_hosts …) still count them. See docs/metrics.md.")
}

func edgeWorkloadsAllowPrivileged() *obj {
	return o("type", "boolean", "description",
		"The project's edge workloads may run privileged containers and use the device's network (hostNetwork); "+
			"off, such a workload is refused (400). See docs/workloads.md.")
}

func powerPolicy() *obj {
	return o("type", "string", "enum", append(eim.PowerPolicies(), ""), "description",
		"The power policy of the project's hosts whose BMC and site set none (the oob module): ALWAYS_ON powers a host on again when "+
			"its BMC finds it off while its desiredPowerState is ON; REPORT (or empty) shows the mismatch only. See docs/oob.md.")
}
