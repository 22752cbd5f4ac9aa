package spec

import (
	"cmp"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/api"
)

// Tags group the operations by resource.
const (
	tagRegions   = "Regions"
	tagSites     = "Sites"
	tagLocations = "Locations"
	tagHosts     = "Hosts"
	tagInstances = "Instances"
	tagOS        = "OS profiles"
	tagProviders = "Providers"
	tagSchedules = "Schedules"
	tagAccounts  = "Local accounts"
	tagConfigs   = "Custom configs"
	tagTelemetry = "Telemetry"
	tagUpdates   = "OS updates"
	tagWorkloads = "Workloads"
	tagProjects  = "Projects"
	tagService   = "Service"
)

var tags = []struct{ name, desc string }{
	{tagRegions, "The location tree's inner nodes."},
	{tagSites, "Places where hosts are. Every site operation exists twice: under /sites and under /regions/{regionId}/sites."},
	{tagLocations, "Name search over regions and sites."},
	{tagHosts, "Edge machines: create or pre-register, onboard, invalidate, delete."},
	{tagInstances, "The OS installed on a host."},
	{tagOS, "The OS catalog of a project. Served under /compute/os and /compute/operating_systems."},
	{tagProviders, "Infrastructure providers and their project-wide defaults."},
	{tagSchedules, "Maintenance windows. Served under /schedules and /compute/schedules."},
	{tagAccounts, "Users created on installed OSes."},
	{tagConfigs, "cloud-init fragments applied at installation."},
	{tagTelemetry, "Log and metric groups, and the profiles that turn them on for an instance, a site or a region. A node's " +
		"effective configuration merges the profiles of its instance, its host's site and the site's regions: per metrics group " +
		"the shortest interval, per logs group the most verbose level. Nodes fetch it through their agent."},
	{tagUpdates, "OS update policies, which say how the OS of the instances that name them is updated in their maintenance windows, " +
		"and OS update runs, the maintenance module's record of each update."},
	{tagWorkloads, "Named groups of instances, such as clusters, and their members. Workloads are served under /compute/workloads and /workloads."},
	{tagProjects, "Tenants and their onboarding settings. Creating and deleting them needs the eim-admin role."},
	{tagAudit, "EIM's additions: the project's audit log (who changed what, old → new) and its webhooks (signed event notifications). See docs/audit.md."},
	{tagMetadata, "The original's metadata broker, as its web UI calls it: the label keys and values a project uses, for suggestions."},
	{tagObjectStorage, "EIM's additions: the project's object storage, where its devices upload their workloads' data through short-lived grants, and the files of the embedded store used when it has none. See docs/objectstorage.md."},
	{tagEdgeWorkloads, "EIM's additions: containers run as podman pods on the devices (hosts) a label selector picks, their revisions, each device's state of them and its log tails. See docs/workloads.md."},
	{tagService, "Health and this document; no token needed."},
}

// addOperations adds every path this release serves.
func addOperations(ps *pathSet) {
	full := crud{update: true}

	regions := full
	regions.listParams = append(append([]any{}, queryParams...), o("name", "showTotalSites", "in", "query",
		"description", "Fill totalSites of each region.", "schema", o("type", "boolean", "default", false)))
	ps.addCRUD(eim.KindRegion, "/regions", tagRegions, regions)

	sites := full
	sites.listParams = queryParams
	sites.extra = []any{regionQueryParam()}
	ps.addCRUD(eim.KindSite, "/sites", tagSites, sites)
	inRegion := full
	inRegion.listParams = queryParams
	inRegion.scope = []any{regionPathParam()}
	inRegion.idSuffix = "InRegion"
	ps.addCRUD(eim.KindSite, "/regions/{regionId}/sites", tagSites, inRegion)

	ps.add("/locations", op{method: "get", id: "listLocations", tag: tagLocations, summary: "Search locations",
		desc: "Finds the regions and sites whose name contains the given text (case-insensitive; `*` matches any run of characters), " +
			"with the ancestors needed to place them in the tree. At most 20 matches of each kind are returned; totalElements counts them all. " +
			"When neither showSites nor showRegions is true, both kinds are searched.",
		params: []any{
			o("name", "name", "in", "query", "description", "Text to look for in names.", "schema", o("type", "string", "maxLength", 50, "pattern", namePat)),
			o("name", "showSites", "in", "query", "description", "Include matching sites.", "schema", o("type", "boolean", "default", false)),
			o("name", "showRegions", "in", "query", "description", "Include matching regions.", "schema", o("type", "boolean", "default", false)),
		},
		ok: okJSON("The matching nodes.", ref("ListLocationsResponse"))})

	addHosts(ps)
	addBMC(ps)
	addObjectStorage(ps)
	addEdgeWorkloads(ps)
	addEnrollment(ps)

	inst := full
	inst.listParams = queryParams
	ps.addCRUD(eim.KindInstance, "/compute/instances", tagInstances, inst)
	ps.add("/compute/instances/updates_summary", op{method: "get", id: "getInstanceUpdatesSummary", tag: tagInstances,
		summary: "Count instances by OS update state",
		desc: "EIM's own operation (the original had none): the project's instances, or those matching the filter (e.g. " +
			"`host.site.resourceId=\"site-…\"`), counted by the state of their OS updates — up to date, updating, failed, unknown, " +
			"and with an OS update available — in all and per OS profile. Computed with grouped counts in the database.",
		params: []any{pref("filter")}, ok: okJSON("The counts.", ref("GetInstanceUpdatesSummaryResponse"))})
	ps.add("/compute/instances/{resourceId}/invalidate", op{method: "put", id: "invalidateInstance", tag: tagInstances,
		summary: "Invalidate an instance", desc: "Marks the instance untrusted (desired state INSTANCE_STATE_UNTRUSTED); it can then only be deleted.",
		params: []any{idParam(eim.KindInstance)}, ok: o("$ref", "#/components/responses/Done"), write: true})
	ps.add("/compute/instances/{resourceId}/provisioning_log", op{method: "get", id: "getProvisioningLog", tag: tagInstances,
		summary: "Read an instance's provisioning log",
		desc: "EIM's own operation (the original had none). Returns the entries of the instance's provisioning workflow log " +
			"after the sequence number `after`: every state change of its actions and what the node printed. With `wait`, " +
			"the answer waits (long poll, up to that many seconds) until there are entries after `after` or the workflow ends. " +
			"Read on by passing the answer's `next` as `after`; a gap between consecutive entries' `seq` is output dropped by " +
			"the log's size cap (state changes are always kept).",
		params: []any{idParam(eim.KindInstance),
			o("name", "after", "in", "query", "description", "Return only entries with a larger seq (default 0: from the start).",
				"schema", o("type", "integer", "minimum", 0, "maximum", int64(1<<31-1), "default", 0)),
			o("name", "wait", "in", "query", "description", "Seconds to wait for new entries when there are none yet (0 answers at once).",
				"schema", o("type", "integer", "minimum", 0, "maximum", 30, "default", 0)),
		},
		ok: okJSON("A page of the log.", ref("ProvisioningLog"))})
	ps.add("/compute/instances/{resourceId}/reprovision", op{method: "post", id: "reprovisionInstance", tag: tagInstances,
		summary: "Retry an instance's failed provisioning",
		desc: "EIM's own operation (the original never retried a failed workflow). Allowed when the instance's provisioning " +
			"workflow is WORKFLOW_STATE_FAILED (otherwise 400 FailedPrecondition naming its state): starts a new attempt of the " +
			"workflow, rendered again from the instance's current OS profile, local account and custom configs (so a fixed " +
			"image URL or sha256 takes effect), with every action pending again. The node, which keeps polling its failed " +
			"workflow, runs the new attempt from the first action. The answer is the log's head with the new attempt's " +
			"entries; follow it with getProvisioningLog from `next`. An OS profile that still cannot be installed is a 400.",
		params: []any{idParam(eim.KindInstance)},
		ok:     okJSON("The new attempt.", ref("ProvisioningLog")), write: true})
	ps.add("/compute/instances/{resourceId}/recoverykey", op{method: "get", id: "getInstanceRecoveryKey", tag: tagInstances,
		summary: "Read the recovery key of an instance's encrypted disk",
		desc: "EIM's own operation (the original had none). An instance of SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION " +
			"has its root encrypted (LUKS2) by its node, which unlocks it at boot with a key sealed to its TPM; the node escrows a " +
			"recovery key (a second keyslot) with EIM before it encrypts, kept sealed with the deployment's secrets key. This " +
			"answers it, to administrators only (the eim-admin role; others get 403), and records every read in the project's " +
			"audit log (kind recoverykey, action READ, the reader as principal). Open the disk with it when the TPM will not " +
			"unseal (a changed Secure Boot configuration, a replaced board): `cryptsetup open DEVICE NAME` and type it. 404 when " +
			"the instance has none (its disk is not encrypted, or its node has not escrowed one yet).",
		params: []any{idParam(eim.KindInstance)},
		ok:     okJSON("The recovery key.", ref("RecoveryKey"))})
	ps.add("/compute/hosts/{resourceId}/attestationkey",
		op{method: "get", id: "getHostAttestationKey", tag: tagHosts, summary: "Read the TPM keys pinned to a host",
			desc: "EIM's own operation (the original had none). A node's TPM quotes its measured boot with an attestation key " +
				"(AK) proven, by a credential activation, to live with its endorsement key (EK); the host's first verified quote " +
				"pins both keys, and later quotes by other keys are a mismatch (docs/security.md). This answers the pinned keys' " +
				"TPM names, when they were pinned, and what the EK was believed on: its maker's certificate (trust EK_CERTIFICATE, " +
				"with the certificate's issuer and serial number) when the deployment configures TPM makers' CAs " +
				"(eim server --tpm-ek-ca-file), or the first quote alone (trust FIRST_USE). 404 when the host has no keys pinned. " +
				"Needs a role on the project.",
			params: []any{idParam(eim.KindHost)},
			ok:     okJSON("The pinned keys.", ref("AttestationKey"))},
		op{method: "delete", id: "resetHostAttestationKey", tag: tagHosts, summary: "Reset the TPM keys pinned to a host",
			desc: "EIM's own operation. Removes the host's pinned keys, for a host whose TPM (or board) was replaced: its next " +
				"verified quote pins the keys it brings, held to the deployment's EK certificate check if it has one. " +
				"Administrators only (the eim-admin role; others get 403); recorded in the project's audit log (kind " +
				"attestationkey, action DELETED, the administrator as principal, the keys removed). 404 when none is pinned.",
			params: []any{idParam(eim.KindHost)}, write: true,
			ok: o("$ref", "#/components/responses/Deleted")})

	osc := full
	osc.listParams = queryParams
	ps.addCRUD(eim.KindOS, "/compute/os", tagOS, osc)
	osc.idSuffix, osc.alias = "Alias", true
	ps.addCRUD(eim.KindOS, "/compute/operating_systems", tagOS, osc)

	ps.addCRUD(eim.KindProvider, "/providers", tagProviders, crud{listParams: queryParams})

	addSchedules(ps)

	ps.addCRUD(eim.KindLocalAccount, "/localAccounts", tagAccounts, crud{listParams: queryParams})
	ps.addCRUD(eim.KindCustomConfig, "/customConfigs", tagConfigs, crud{listParams: queryParams})

	addTelemetry(ps)

	addUpdates(ps)

	addWorkloads(ps)

	addProjects(ps)

	addAudit(ps)
	addMetadata(ps)

	addClusters(ps)

	addConnect(ps)

	addLegacy(ps) // last: it repeats the operations above
}

// addLegacy adds the original's legacy paths (api.Legacy), each operation
// its twin's with the project named by a query parameter or a header
// instead of the path. A twin not in the document (not served) leaves its
// legacy operation out too.
func addLegacy(ps *pathSet) {
	for _, l := range api.Legacy {
		method := strings.ToLower(l.Method)
		twin, ok := ps.ops[method+" "+api.ProjectPrefix+l.Twin]
		if !ok {
			continue
		}
		x := twin
		x.id = twin.id + "Legacy"
		x.alias = cmp.Or(twin.alias, twin.id)
		x.noProj = true
		x.params = append([]any{pref("legacyProjectName"), pref("activeProjectID")}, twin.params...)
		x.desc = strings.TrimSpace(twin.desc + "\n\n" + legacyDoc)
		ps.add(api.LegacyPrefix+l.Path, x)
	}
}

const legacyDoc = "A legacy path of the original API (" + api.LegacyPrefix + "/…): the project is named by the projectName " +
	"query parameter or, when that is absent, by its ID (UUID) in the ActiveProjectID header; neither is 400. Access is " +
	"that of the project's own path."

// addWorkloads adds the workloads, under the original's two paths, and
// their members (create, read, delete: a member is never changed).
func addWorkloads(ps *pathSet) {
	ps.addCRUD(eim.KindWorkload, "/compute/workloads", tagWorkloads, crud{update: true, listParams: queryParams})
	ps.addCRUD(eim.KindWorkload, "/workloads", tagWorkloads, crud{update: true, listParams: queryParams, idSuffix: "Alias", alias: true})
	ps.addCRUD(eim.KindWorkloadMember, "/workload_members", tagWorkloads, crud{listParams: queryParams})
}

func addHosts(ps *pathSet) {
	hosts := crud{update: true, listParams: queryParams}
	ps.addCRUD(eim.KindHost, "/compute/hosts", tagHosts, hosts)
	host := ref(docOf(eim.KindHost).name)
	ps.add("/compute/hosts/register", op{method: "post", id: "registerHost", tag: tagHosts, summary: "Pre-register a host",
		desc: "Creates a host from the machine's UUID and/or serial number, so that the machine is recognised when it first " +
			"calls home. Its desired state is HOST_STATE_REGISTERED, or HOST_STATE_ONBOARDED with autoOnboard.",
		params: []any{o("name", "resourceId", "in", "query", "description", "Accepted for compatibility; ignored.",
			"schema", o("type", "string", "pattern", idPattern(eim.KindHost)))},
		body: ref("HostRegister"), ok: okJSON("The registered host.", host), write: true})
	ps.add("/compute/hosts/summary", hostSummary("getHostSummary", ""))
	ps.add("/compute/hosts/{resourceId}/register", op{method: "patch", id: "updateHostRegistration", tag: tagHosts,
		summary: "Change a host's registration", desc: "Changes the registration fields of a pre-registered host.",
		params: []any{idParam(eim.KindHost)}, body: ref("HostRegister"), ok: okJSON("The host after the change.", host), write: true})
	ps.add("/compute/hosts/{resourceId}/onboard", op{method: "patch", id: "onboardHost", tag: tagHosts,
		summary: "Onboard a registered host", desc: "Sets the desired state of a registered host to HOST_STATE_ONBOARDED.",
		params: []any{idParam(eim.KindHost)}, ok: o("$ref", "#/components/responses/Done"), write: true})
	ps.add("/compute/hosts/{resourceId}/invalidate", op{method: "put", id: "invalidateHost", tag: tagHosts,
		summary: "Invalidate a host", desc: "Marks the host untrusted (desired state HOST_STATE_UNTRUSTED) and revokes its credentials; it can then only be deleted.",
		params: []any{idParam(eim.KindHost), o("name", "note", "in", "query", "description", "Why; kept in the host's note.",
			"schema", o("type", "string", "maxLength", 512, "pattern", textPat))},
		ok: o("$ref", "#/components/responses/Done"), write: true})
	ps.add("/compute/hosts_summary", hostSummary("getHostSummaryAlias", "getHostSummary"))
}

func hostSummary(id, alias string) op {
	return op{method: "get", id: id, tag: tagHosts, summary: "Count hosts",
		desc:   "Counts the project's hosts (those matching the filter, if given) by state.",
		params: []any{pref("filter")}, ok: okJSON("The counts.", ref("GetHostSummaryResponse")), alias: alias}
}

func addSchedules(ps *pathSet) {
	listParams := append(append([]any{}, pageParams...), pref("hostId"), pref("siteId"), pref("regionId"), pref("unixEpoch"))
	for _, base := range []struct {
		path   string
		suffix string
	}{{"/schedules", ""}, {"/compute/schedules", "Alias"}} {
		c := crud{update: true, listParams: listParams, idSuffix: base.suffix, alias: base.suffix != ""}
		ps.addCRUD(eim.KindSingleSchedule, base.path+"/single", tagSchedules, c)
		ps.addCRUD(eim.KindRepeatedSchedule, base.path+"/repeated", tagSchedules, c)
		alias := ""
		if c.alias {
			alias = "listSchedules"
		}
		ps.add(base.path, op{method: "get", id: "listSchedules" + base.suffix, tag: tagSchedules, summary: "List schedules of both kinds",
			desc: "Returns single and repeated schedules together. The target parameters select the schedules that " +
				"apply to a host, site or region, including those inherited from its site and regions; the value null " +
				"selects the schedules without that kind of target.",
			params: listParams, ok: okJSON("A page of schedules.", ref("ListSchedulesResponse")), alias: alias})
	}
}

// addTelemetry adds the telemetry groups and profiles, with the original's
// aliases. Each path serves one type: logs or metrics.
func addTelemetry(ps *pathSet) {
	groupList := []any{pref("orderBy"), pref("pageSize"), pref("offset")}
	profileList := append(append([]any{}, groupList...), pref("telemetryInstanceId"), pref("telemetrySiteId"),
		pref("telemetryRegionId"), pref("showInherited"))
	for _, c := range []struct {
		v     eim.Variant
		path  string
		alias string
	}{
		{eim.TelemetryLogsGroup, "/telemetry/groups/logs", "/telemetry/loggroups"},
		{eim.TelemetryMetricsGroup, "/telemetry/groups/metrics", "/telemetry/metricgroups"},
	} {
		rd := docFor(c.v.Kind, c.v.Value)
		ps.addCRUDOf(rd, c.path, tagTelemetry, crud{listParams: groupList})
		ps.addCRUDOf(rd, c.alias, tagTelemetry, crud{listParams: groupList, idSuffix: "Alias", alias: true})
	}
	for _, v := range []eim.Variant{eim.TelemetryLogsProfile, eim.TelemetryMetricsProfile} {
		path := "/telemetry/profiles/logs"
		if v == eim.TelemetryMetricsProfile {
			path = "/telemetry/profiles/metrics"
		}
		ps.addCRUDOf(docFor(v.Kind, v.Value), path, tagTelemetry, crud{update: true, listParams: profileList})
	}
}

// addUpdates adds the OS update policies and runs, each under the
// original's two paths.
func addUpdates(ps *pathSet) {
	for _, p := range []struct {
		path, suffix string
	}{{"/os-update-policies", ""}, {"/os_update_policy", "Alias"}} {
		ps.addCRUD(eim.KindOSUpdatePolicy, p.path, tagUpdates, crud{listParams: queryParams, idSuffix: p.suffix, alias: p.suffix != ""})
	}
	for _, p := range []struct {
		path, suffix string
	}{{"/os-update-runs", ""}, {"/os_update_run", "Alias"}} {
		ps.addCRUD(eim.KindOSUpdateRun, p.path, tagUpdates, crud{listParams: queryParams, noCreate: true, idSuffix: p.suffix, alias: p.suffix != ""})
	}
}

func addProjects(ps *pathSet) {
	ps.add("/v1/projects",
		op{method: "get", id: "listProjects", tag: tagProjects, summary: "List projects", noProj: true, no404: true,
			desc: "Lists the projects the caller may read (all of them for eim-admin), each with its status. Without view the " +
				"answer is a JSON array, as the original's tenant manager answered on this path for its web UI and CLI; " +
				"view=eim answers EIM's list envelope instead (what EIM's CLI and Go client ask for).",
			params: []any{
				o("name", "view", "in", "query", "description", "eim: EIM's envelope {projects, totalElements, hasNext}; absent: the tenant manager's array.",
					"schema", o("type", "string", "enum", []string{"eim"})),
				o("name", "member-role", "in", "query", "description", "The original's web UI asks for the projects the caller is a member of: "+
					"in EIM the list is those the caller has a role on (eim-admin: all) either way.", "schema", o("type", "boolean")),
				o("name", "org", "in", "query", "description", "The original's organisation; EIM has one, and ignores it.", "schema", o("type", "string")),
			},
			ok: okJSON("The projects: an array, or with view=eim EIM's envelope.", o("oneOf", []any{
				o("type", "array", "items", ref("ProjectDetail")), ref("ListProjectsResponse")}))},
		op{method: "post", id: "createProject", tag: tagProjects, summary: "Create a project", noProj: true, no404: true, write: true,
			desc: "Creates a project. Needs eim-admin.",
			body: o("type", "object", "properties", o(
				"name", o("type", "string", "minLength", 1, "maxLength", 63, "pattern", projectNamePat, "description", "Name of the project, unique."),
				"id", o("type", "string", "format", "uuid", "description", "ID to give the project; a new UUID when absent."),
			), "required", []string{"name"}),
			ok: okJSON("The created project.", ref("ProjectDetail"))},
	)
	ps.add("/v1/projects/{projectName}",
		op{method: "get", id: "getProject", tag: tagProjects, summary: "Get a project, its settings and its status", noProj: true,
			desc: "Returns the project with its onboarding settings and its status: whether every module that initialises " +
				"projects and runs in the deployment (os: its OS catalog; tenant: its defaults) has initialised it, and while " +
				"it is being deleted the deletion's progress. Modules that run nowhere take no part. Needs a role on the " +
				"project (or eim-admin). The enrollment token is never shown, only whether one is set.",
			params: []any{pref("projectName")},
			ok:     okJSON("The project.", ref("ProjectDetail"))},
		op{method: "put", id: "putProject", tag: tagProjects, summary: "Create a project, or change its description", noProj: true, no404: true, write: true,
			desc: "The original tenant manager's create-or-update, as its web UI calls it: creates the project (a new UUID), or " +
				"changes the description of an existing one (its display name in that UI), and answers the project with its " +
				"status as GET shows it: status.projectStatus.statusIndicator is STATUS_INDICATION_IN_PROGRESS until every module " +
				"that initialises projects has done so. With update_if_exists=false an existing project is 409. Needs eim-admin.",
			params: []any{pref("projectName"), o("name", "update_if_exists", "in", "query", "description", "false: an existing project is 409.",
				"schema", o("type", "boolean", "default", true))},
			body: o("type", "object", "properties", o(
				"description", o("type", "string", "maxLength", eim.MaxProjectDescription, "description", "Display name of the project; absent keeps it."),
			)),
			ok: okJSON("The project.", ref("ProjectDetail"))},
		op{method: "delete", id: "deleteProject", tag: tagProjects, summary: "Delete a project", noProj: true, write: true,
			desc: "Deletes a project. Needs eim-admin. A project that holds resources other than its defaults (the default " +
				"provider, the OS catalog's profiles, the default telemetry groups) is answered with 400 (FailedPrecondition, " +
				"listing what it holds) unless force=true, which deletes everything in it. Where the tenant module runs the " +
				"deletion is a job that survives restarts: the answer is 202 with the project, whose status.deletion shows " +
				"its phase (the hosts deauthorized first: onboarded ones invalidated, their nodes' credentials revoked; then " +
				"telemetry, schedules, workloads, hosts and instances, OS profiles, sites, regions, providers, local accounts, " +
				"custom configs, the project) and what is left of it; " +
				"meanwhile the project takes no new resources (409) and DELETE answers the same deletion again; GET answers " +
				"404 once it is done, and the name may be used again. Elsewhere the project is deleted at once (200).",
			params: []any{pref("projectName"), o("name", "force", "in", "query", "description", "Delete the project's resources too.",
				"schema", o("type", "boolean", "default", false))},
			ok:      o("$ref", "#/components/responses/Deleted"),
			started: okJSON("The deletion started (or under way): the project with its status.", ref("ProjectDetail"))},
	)
	ps.add("/settings", op{method: "patch", id: "updateProjectSettings", tag: tagProjects, summary: "Change a project's settings",
		desc: "Changes the project's onboarding settings; members absent from the body keep their value. Needs eim-admin or " +
			"the project's _im-rw role. A malformed ID is 400 and a resource that does not exist in the project 404, " +
			"each naming the field. enrollmentToken \"new\" generates a token (32 random bytes, base64url) that lets unknown " +
			"devices enrol in the project; the answer holds it, and it is never shown again (only its hash is kept). " +
			"\"none\" removes it: unknown devices are refused.",
		body: ref("ProjectSettingsChange"),
		ok:   okJSON("The project after the change.", ref("ProjectDetail"))})
	ps.add("/v1/orchestrator", op{method: "get", id: "getOrchestratorInfo", tag: tagService, summary: "Features of this server",
		noProj: true, no404: true,
		desc: "The original's feature list, which its CLI (orch-cli) reads at login to decide which commands to offer: " +
			"each feature says whether it is installed, that is whether the module providing it runs in this server. " +
			"Any valid token may read it.",
		ok: okJSON("The features.", ref("OrchestratorInfo"))})
	ps.add("/healthz", op{method: "get", id: "getHealth", tag: tagService, summary: "Health check", noProj: true, public: true,
		desc: "Answers 200 while the server process is up, whether or not it can reach its database: a liveness probe. " +
			"An orchestrator that restarts the server on a failed liveness probe must not do so for a database outage, " +
			"which the server rides out.", ok: okJSON("Up.", ref("Health"))})
	ps.add("/readyz", op{method: "get", id: "getReadiness", tag: tagService, summary: "Readiness check", noProj: true, public: true,
		desc: "Answers 200 while the server can reach its database (it asks it for the change feed's revision, " +
			"waiting at most 2 s), and 503 Unavailable with Retry-After while it cannot: a readiness probe, for a load " +
			"balancer to send requests elsewhere.", ok: okJSON("Ready.", ref("Health")), errs: []string{"503"}})
	ps.add("/openapi.yaml", op{method: "get", id: "getOpenAPIDocument", tag: tagService, summary: "This document", noProj: true, public: true,
		ok: o("description", "The OpenAPI document of this API.", "content", o("application/yaml", o("schema", o("type", "string"))))})
}
