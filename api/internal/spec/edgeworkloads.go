package spec

import "github.com/eimhq/eim"

// Edge workloads: containers the workloads module runs as podman pods on
// the devices a label selector picks (package workloads,
// docs/workloads.md).

const tagEdgeWorkloads = "Edge workloads"

func addEdgeWorkloads(ps *pathSet) {
	const module = " An operation of the workloads module (served where it runs); an EIM addition. See docs/workloads.md."
	name := o("name", "name", "in", "path", "required", true, "description", "The workload's name.",
		"schema", o("type", "string", "pattern", `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`))
	ps.add("/edgeworkloads",
		op{method: "get", id: "listEdgeWorkloads", tag: tagEdgeWorkloads, summary: "List the project's edge workloads",
			params: []any{
				o("name", "filter", "in", "query", "description", `By name: name="x" (exact) or name:"prefix*", clauses joined by " AND ".`,
					"schema", o("type", "string")),
				o("name", "orderBy", "in", "query", "description", "Only name (the default order).",
					"schema", o("type", "string", "enum", []string{"name", "name asc"})),
				pref("pageSize"), pref("offset")},
			desc: "The project's edge workloads by name, their secret values and registry passwords left out. Needs a role on the project." + module,
			ok:   okJSON("One page of workloads.", ref("EdgeWorkloadList"))},
		op{method: "post", id: "createEdgeWorkload", tag: tagEdgeWorkloads, summary: "Create an edge workload", write: true, status: "201",
			desc: "Creates the workload at revision 1; the workloads module then targets the devices its selector picks (or the one it " +
				"names), which run it at their next heartbeat. A bad field is 400 naming it; a name in use is 409. Warnings (an image " +
				"without a tag or digest, …) come in warnings and as Warning headers (299). Privileged containers and the host's " +
				"network need the project's edgeWorkloadsAllowPrivileged setting. Needs the project's _im-rw role." + module,
			body: ref("EdgeWorkloadInput"),
			ok:   okJSON("The workload created.", ref("EdgeWorkload"))},
	)
	ps.add("/edgeworkloads/{name}",
		op{method: "get", id: "getEdgeWorkload", tag: tagEdgeWorkloads, summary: "Get an edge workload", params: []any{name},
			desc: "The workload at its latest revision, never its secret values or registry passwords. Needs a role on the project." + module,
			ok:   okJSON("The workload.", ref("EdgeWorkload"))},
		op{method: "put", id: "replaceEdgeWorkload", tag: tagEdgeWorkloads, summary: "Replace an edge workload's spec", params: []any{name}, write: true,
			desc: "Replaces the spec: a new revision when it changed (the same spec makes none), which the devices roll to. A secret's " +
				"value or a registry password left out keeps the previous revision's. A name in the body must be the path's (a " +
				"workload is not renamed). Needs the project's _im-rw role." + module,
			body: ref("EdgeWorkloadInput"),
			ok:   okJSON("The workload as stored.", ref("EdgeWorkload"))},
		op{method: "delete", id: "deleteEdgeWorkload", tag: tagEdgeWorkloads, summary: "Delete an edge workload", params: []any{name}, write: true,
			desc: "Removes the workload with its revisions; its devices remove its pod at their next heartbeat. Needs the project's _im-rw role." + module,
			ok:   o("$ref", "#/components/responses/Deleted")},
	)
	ps.add("/edgeworkloads/{name}/revisions",
		op{method: "get", id: "listEdgeWorkloadRevisions", tag: tagEdgeWorkloads, summary: "List an edge workload's revisions", params: []any{name},
			desc: "Every revision of the workload, oldest first, secret values left out. Needs a role on the project." + module,
			ok:   okJSON("The revisions.", ref("EdgeWorkloadRevisionList"))},
	)
	ps.add("/edgeworkloads/{name}/status",
		op{method: "get", id: "getEdgeWorkloadStatus", tag: tagEdgeWorkloads, summary: "Get an edge workload's status", params: []any{name},
			desc: "The workload's devices counted by status (running, degraded, failed, updating, unknown, removing), in all and by the " +
				"revision each reports running, in revision order. Needs a role on the project." + module,
			ok: okJSON("The counts.", ref("EdgeWorkloadStatus"))},
	)
	ps.add("/edgeworkloads/{name}/devices",
		op{method: "get", id: "listEdgeWorkloadDevices", tag: tagEdgeWorkloads, summary: "List an edge workload's devices", params: []any{name},
			desc: "Each device the workload targets or that still reports it: the revision it must run, what it last reported (revision, " +
				"phase, containers with their states and exit codes) and its data uploads. Needs a role on the project." + module,
			ok: okJSON("The devices.", ref("EdgeWorkloadDeviceList"))},
	)
	host := o("name", "host", "in", "query", "required", true, "description", "ID of the device (host) to read the logs of.",
		"schema", o("type", "string", "pattern", idPattern(eim.KindHost)))
	pending := o("description", "The device has not answered yet: poll the request (GET …/logs/{id}).",
		"content", o("application/json", o("schema", ref("EdgeWorkloadLogs"))))
	ps.add("/edgeworkloads/{name}/logs",
		op{method: "get", id: "getEdgeWorkloadLogs", tag: tagEdgeWorkloads, summary: "Ask a device for an edge workload's log tail",
			params: []any{name, host,
				o("name", "container", "in", "query", "description", "One container (default: every container of the pod).", "schema", o("type", "string")),
				o("name", "tail", "in", "query", "description", "Lines per container.", "schema", o("type", "integer", "minimum", 1, "maximum", 10000, "default", 100)),
				o("name", "wait", "in", "query", "description", "Seconds to wait for the device's answer.", "schema", o("type", "integer", "minimum", 0, "maximum", 30, "default", 10))},
			desc: "Creates a log request the device answers at its next heartbeat (at most 64 KiB a container) and waits for the answer up " +
				"to wait seconds: 200 with the logs, or 202 with the pending request to poll. A device that cannot read its logs answers " +
				"with error. Needs a role on the project." + module,
			ok:      okJSON("The device's answer.", ref("EdgeWorkloadLogs")),
			started: pending},
	)
	ps.add("/edgeworkloads/{name}/logs/{id}",
		op{method: "get", id: "getEdgeWorkloadLogRequest", tag: tagEdgeWorkloads, summary: "Get an edge workload's log request",
			params:  []any{name, o("name", "id", "in", "path", "required", true, "description", "ID of the log request.", "schema", o("type", "string"))},
			desc:    "A log request: 200 once the device answered, 202 while pending. Needs a role on the project." + module,
			ok:      okJSON("The answered request.", ref("EdgeWorkloadLogs")),
			started: pending},
	)
	ps.add("/edgeworkloads/{name}/rollout",
		op{method: "get", id: "getEdgeWorkloadRollout", tag: tagEdgeWorkloads, summary: "Get an edge workload's rollout", params: []any{name},
			desc: "The rollout of the workload's latest revision under its rolloutPolicy: the revisions from and to, its state " +
				"(PROGRESSING, PAUSED, DONE, ABORTED, FAILED) with the reason and since when, the current batch, the devices by " +
				"their state in it and the failed ones with why. 404 when the workload has no rolloutPolicy or its rollout has " +
				"not started yet. Needs a role on the project." + module,
			ok: okJSON("The rollout.", ref("EdgeWorkloadRollout"))},
	)
	for _, a := range []struct{ verb, id, summary, desc string }{
		{"pause", "pauseEdgeWorkloadRollout", "Pause an edge workload's rollout", "Pauses a PROGRESSING rollout: no device is given the revision until it is resumed (409 from another state)."},
		{"resume", "resumeEdgeWorkloadRollout", "Resume an edge workload's rollout", "Resumes a PAUSED or FAILED rollout: after a pause at a missed success threshold it goes on with the next batch (409 from another state)."},
		{"abort", "abortEdgeWorkloadRollout", "Abort an edge workload's rollout", "Stops a PROGRESSING, PAUSED or FAILED rollout for good: the devices keep the revision they have (409 from another state)."},
	} {
		ps.add("/edgeworkloads/{name}/rollout/"+a.verb,
			op{method: "post", id: a.id, tag: tagEdgeWorkloads, summary: a.summary, params: []any{name}, write: true,
				desc: a.desc + " Takes no body (or {}). Needs the project's _im-rw role." + module,
				ok:   okJSON("The rollout.", ref("EdgeWorkloadRollout"))})
	}
	ps.add("/edgeworkloads/{name}/rollout/rollback",
		op{method: "post", id: "rollbackEdgeWorkload", tag: tagEdgeWorkloads, summary: "Roll an edge workload back", params: []any{name}, write: true,
			desc: "Makes the rollout's previous revision (fromRevision) the workload's next revision (its spec with the current " +
				"rolloutPolicy), rolled out as a new rollout. 409 when the rollout is of the first revision or the latest revision's " +
				"rollout has not started yet. Takes no body (or {}). Needs the project's _im-rw role." + module,
			ok: okJSON("The workload at its new revision.", ref("EdgeWorkload"))},
	)
}

func edgeWorkloadSchemas(into *obj) {
	str := func(desc string) *obj { return o("type", "string", "description", desc) }
	strs := func(desc string) *obj { return o("type", "array", "items", o("type", "string"), "description", desc) }
	strMap := func(desc string) *obj {
		return o("type", "object", "additionalProperties", o("type", "string"), "description", desc)
	}
	closed := func(desc string, props *obj, required ...string) *obj {
		s := o("type", "object", "additionalProperties", false, "description", desc, "properties", props)
		if len(required) > 0 {
			s.set("required", required)
		}
		return s
	}
	boolean := func(desc string) *obj { return o("type", "boolean", "description", desc) }
	integer := func(desc string) *obj { return o("type", "integer", "description", desc) }
	when := func(desc string) *obj { return o("type", "string", "format", "date-time", "description", desc) }
	// A time not known yet is null.
	maybe := func(desc string) *obj {
		return o("type", []string{"string", "null"}, "format", "date-time", "description", desc+" Null: not yet.")
	}
	rolloutState := o("type", "string", "enum", []string{eim.RolloutProgressing, eim.RolloutPaused, eim.RolloutDone, eim.RolloutAborted, eim.RolloutFailed})
	items := func(s *obj) *obj { return o("type", "array", "maxItems", eim.MaxEdgeWorkloadItems, "items", s) }
	nameRef := closed("Names a config map or secret of the workload.", o("name", str("Its name.")), "name")
	keyRef := closed("Names a key of a config map or secret of the workload.", o("name", str("Its name."), "key", str("The key.")), "name", "key")

	into.set("EdgeWorkloadLabelSelector", closed("Kubernetes' label selector over the devices' labels: their metadata, inherited "+
		"metadata and the eim.io/ facts (eim.io/host, eim.io/name, eim.io/arch, eim.io/os, eim.io/site, eim.io/region, …).",
		o("matchLabels", strMap("Labels a device must have, with these values."),
			"matchExpressions", items(closed("One expression.", o(
				"key", str("The label."),
				"operator", o("type", "string", "enum", []string{"In", "NotIn", "Exists", "DoesNotExist"}),
				"values", strs("The values (In, NotIn)."),
			), "key", "operator")))))
	container := closed("One container of the pod.", o(
		"name", o("type", "string", "pattern", `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`, "description", "Its name (a DNS label)."),
		"image", str("The image (with a tag or digest; without one the answer warns)."),
		"imagePullPolicy", o("type", "string", "enum", []string{"Always", "IfNotPresent", "Never"}),
		"command", strs("The entry point."),
		"args", strs("Its arguments."),
		"workingDir", str("The working directory."),
		"env", items(closed("An environment variable: a value or valueFrom.", o(
			"name", str("Its name."), "value", str("A literal value."),
			"valueFrom", closed("Where its value comes from.", o("configMapKeyRef", keyRef, "secretKeyRef", keyRef))), "name")),
		"envFrom", items(closed("Every key of a config map or secret as variables.", o(
			"prefix", str("Put before each name."), "configMapRef", nameRef, "secretRef", nameRef))),
		"ports", items(closed("A port, published on the device when hostPort is set.", o(
			"name", str("Its name."), "containerPort", integer("The container's port."), "hostPort", integer("The device's port."),
			"hostIP", str("The device's address to publish on."), "protocol", o("type", "string", "enum", []string{"TCP", "UDP"})), "containerPort")),
		"volumeMounts", items(closed("Mounts a volume of the pod.", o(
			"name", str("The volume."), "mountPath", str("Where."), "readOnly", boolean("Read-only."), "subPath", str("A path in the volume.")),
			"name", "mountPath")),
		"resources", closed("Limits and requests, as Kubernetes quantities (\"500m\", \"128Mi\").", o(
			"limits", strMap("Limits by resource (cpu, memory)."), "requests", strMap("Requests by resource."))),
		"securityContext", closed("The part of Kubernetes' security context podman honours.", o(
			"privileged", boolean("Privileged (needs the project's edgeWorkloadsAllowPrivileged)."),
			"runAsUser", integer("User ID."), "runAsGroup", integer("Group ID."), "runAsNonRoot", boolean("Refuse to run as root."),
			"readOnlyRootFilesystem", boolean("Read-only root file system."), "allowPrivilegeEscalation", boolean("Allow privilege escalation."),
			"capabilities", closed("Linux capabilities.", o("add", strs("Added."), "drop", strs("Dropped."))))),
	), "name", "image")
	into.set("EdgeWorkloadContainer", container)
	volume := closed("A volume of the pod: one source.", o(
		"name", str("Its name."),
		"hostPath", closed("A directory or file of the device.", o("path", str("The path."), "type", str("DirectoryOrCreate, Directory, File, …")), "path"),
		"emptyDir", closed("A scratch directory of the pod.", o("medium", str("Memory, or empty: the disk."))),
		"configMap", closed("A config map of the workload.", o("name", str("Its name.")), "name"),
		"secret", closed("A secret of the workload.", o("secretName", str("Its name.")), "secretName")), "name")
	dataPath := closed("One synchronised directory.", o(
		"source", str("The directory in the pod's data volume (mounted at /export in every container)."),
		"target", str("The path under the device's prefix in the project's object storage."),
		"intervalSeconds", integer("How often it is synchronised (default 60 s).")), "source", "target")
	into.set("EdgeWorkloadSpec", closed("What a workload runs and where: exactly one of deviceSelector and device.", o(
		"deviceSelector", ref("EdgeWorkloadLabelSelector"),
		"device", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "One device by its host ID."),
		"type", o("type", "string", "enum", []string{"pod"}, "description", "The only kind (default pod)."),
		"pod", closed("The pod.", o("spec", closed("The part of Kubernetes' PodSpec podman kube play runs.", o(
			"containers", o("type", "array", "minItems", 1, "maxItems", eim.MaxEdgeWorkloadContainers, "items", ref("EdgeWorkloadContainer")),
			"initContainers", o("type", "array", "maxItems", eim.MaxEdgeWorkloadContainers, "items", ref("EdgeWorkloadContainer")),
			"volumes", items(volume),
			"restartPolicy", o("type", "string", "enum", []string{"Always", "OnFailure", "Never"}),
			"hostNetwork", boolean("The device's network (needs the project's edgeWorkloadsAllowPrivileged)."),
			"hostname", str("The pod's host name.")), "containers")), "spec"),
		"data", closed("The pod's directories synchronised with the project's object storage (docs/objectstorage.md).", o(
			"egress", items(dataPath), "ingress", items(dataPath))),
		"configmaps", items(closed("A named set of keys and values the pod may use.", o(
			"name", str("Its name."), "data", strMap("Keys and values.")), "name", "data")),
		"secrets", items(closed("A named set of keys and secret values, sealed at rest.", o(
			"name", str("Its name."),
			"items", items(closed("One key.", o("key", str("The key."),
				"value", o("type", "string", "writeOnly", true, "description", "The value: never answered; left out on a replace, the previous revision's is kept.")),
				"key"))), "name", "items")),
		"imageRegistries", closed("Credentials for the registries the pod pulls from.", o(
			"auths", items(closed("A registry login.", o(
				"registry", str("host[:port]."), "username", str("The user."),
				"password", o("type", "string", "writeOnly", true, "description", "Never answered; left out on a replace, the previous revision's is kept.")),
				"registry", "username"))), "auths"),
		"rolloutPolicy", ref("EdgeWorkloadRolloutPolicy"),
	), "pod"))
	into.set("EdgeWorkloadInput", closed("The body of a create (name and spec) or a replace (spec; a name, if given, is the path's).", o(
		"name", o("type", "string", "pattern", `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`, "description", "The workload's name (a DNS label)."),
		"spec", ref("EdgeWorkloadSpec")), "spec"))
	into.set("EdgeWorkload", closed("A workload at its latest revision, its secret values and registry passwords left out.", o(
		"name", str("Its name."), "revision", integer("Its latest revision (1 at creation)."), "spec", ref("EdgeWorkloadSpec"),
		"createdAt", when("When it was created."), "updatedAt", when("When its latest revision was made."),
		"warnings", strs("Warnings about the spec just written (a write's answer only).")),
		"name", "revision", "spec", "createdAt", "updatedAt"))
	into.set("EdgeWorkloadList", closed("One page of workloads.", o(
		"edgeWorkloads", o("type", "array", "items", ref("EdgeWorkload")),
		"totalElements", integer("Workloads matching in all."), "hasNext", boolean("Whether a page follows.")),
		"edgeWorkloads", "totalElements", "hasNext"))
	into.set("EdgeWorkloadRevisionList", closed("A workload's revisions, oldest first.", o(
		"revisions", o("type", "array", "items", closed("One revision.", o(
			"revision", integer("Its number."), "spec", ref("EdgeWorkloadSpec"), "createdAt", when("When it was made.")),
			"revision", "spec", "createdAt"))), "revisions"))
	counts := o(
		"total", integer("Devices."), "running", integer("Running."), "degraded", integer("Running with a container down."),
		"failed", integer("Failed."), "updating", integer("Rolling to the target revision."), "unknown", integer("Not reported."),
		"removing", integer("Removing the workload."))
	countsReq := []string{"total", "running", "degraded", "failed", "updating", "unknown", "removing"}
	into.set("EdgeWorkloadCounts", closed("Devices by status.", counts, countsReq...))
	byRev := o()
	for _, k := range counts.keys {
		byRev.set(k, counts.vals[k])
	}
	byRev.set("revision", integer("The revision the devices report running (0: none yet)."))
	into.set("EdgeWorkloadStatus", closed("A workload's devices by status, in all and by revision.", o(
		"name", str("The workload."), "revision", integer("Its latest revision."), "devices", ref("EdgeWorkloadCounts"),
		"byRevision", o("type", "array", "items", closed("The devices that report one revision.", byRev, append([]string{"revision"}, countsReq...)...)),
		"rollout", closed("Its rollout in short (a workload with a rolloutPolicy).", o(
			"fromRevision", integer("The revision it rolls from (0: none)."), "toRevision", integer("The revision it rolls out."),
			"state", rolloutState, "reason", str("What it waits for, or why it stopped."), "since", when("Since when."),
			"batch", integer("The current batch, from 1.")),
			"fromRevision", "toRevision", "state", "since", "batch")),
		"name", "revision", "devices", "byRevision"))
	countOrShare := func(desc string) *obj {
		return o("oneOf", []any{o("type", "integer", "minimum", 1), o("type", "string", "pattern", `^([0-9]+|[0-9]+(\.[0-9]+)?%)$`)},
			"description", desc)
	}
	duration := func(desc string) *obj {
		return o("type", "string", "description", desc+" A Go duration (30m, 2h), 1s to 720h.")
	}
	into.set("EdgeWorkloadRolloutPolicy", closed("How a new revision reaches the devices: batch by batch (docs/workloads.md, Rollouts). "+
		"Changing it alone makes no new revision.", o(
		"batches", o("type", "array", "maxItems", eim.MaxRolloutBatches, "description", "In order; one more batch takes the devices left.",
			"items", closed("One batch.", o(
				"limit", countOrShare("How many devices: a count, or a share of those selected when the rollout started (\"10%\")."),
				"selector", ref("EdgeWorkloadLabelSelector"),
				"successThreshold", countOrShare("The batch's own threshold."),
				"updateTimeout", duration("The batch's own timeout.")), "limit")),
		"successThreshold", countOrShare("The share (\"90%\", the default) or count of a batch's devices that must run the revision for the next batch to start."),
		"updateTimeout", duration("How long a device may take to run the revision (default 1h)."),
		"disruptionBudget", closed("At most maxUnavailable devices of a group unavailable at once (updating, failed, or without a connection).", o(
			"groupBy", o("type", "array", "items", o("type", "string"), "description", "Label keys: devices with the same values form a group; none, one group."),
			"maxUnavailable", countOrShare("A count, or a share of the group (at least one).")), "maxUnavailable"),
		"honorMaintenanceWindows", boolean("A device's update starts only while one of its maintenance windows (host, site, region) is open."))))
	rolloutCounts := closed("Devices of a rollout by their state in it.", o(
		"total", integer("Devices."), "waiting", integer("In a batch, not given the revision yet (budget, window)."),
		"updating", integer("Given the revision, not running it yet."), "done", integer("Running the revision."),
		"failed", integer("Not running it within the update timeout.")),
		"total", "waiting", "updating", "done", "failed")
	into.set("EdgeWorkloadRollout", closed("The rollout of a workload's latest revision.", o(
		"name", str("The workload."), "id", integer("Counts the workload's rollouts."),
		"fromRevision", integer("The revision it rolls from (0: the workload's first)."), "toRevision", integer("The revision it rolls out."),
		"state", rolloutState, "reason", str("What it waits for, or why it stopped."), "since", when("When its state or reason last changed."),
		"batch", integer("The current batch from 1, or the next to start when batchStarted is false."),
		"batches", integer("Batches in all."), "batchStarted", boolean("Whether batch has started."),
		"successThreshold", o("type", "string", "description", "The current batch's threshold."),
		"updateTimeout", str("The current batch's update timeout."),
		"devices", rolloutCounts, "currentBatch", rolloutCounts,
		"failed", o("type", "array", "maxItems", 100, "items", closed("A failed device.", o(
			"hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The device."),
			"batch", integer("Its batch, from 1."), "state", str("failed."), "since", when("Since when."), "reason", str("Why.")),
			"hostId", "batch", "state", "since")),
		"createdAt", when("When it started."), "updatedAt", when("When it was last written.")),
		"name", "id", "fromRevision", "toRevision", "state", "since", "batch", "batches", "batchStarted", "successThreshold",
		"updateTimeout", "devices", "currentBatch", "createdAt", "updatedAt"))
	into.set("EdgeWorkloadContainerState", closed("One container's state on a device.", o(
		"name", str("The container."), "state", str("running, exited, created, …"), "exitCode", integer("Its last exit code."),
		"restarts", integer("Restarts."), "error", str("Why it is not running."),
		"startedAt", maybe("When it started."), "finishedAt", maybe("When it ended.")),
		"name", "state", "exitCode", "restarts", "startedAt", "finishedAt"))
	into.set("EdgeWorkloadDevice", closed("One device's state of a workload.", o(
		"hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The device."),
		"targetRevision", integer("The revision it must run (0: none: the workload is being removed from it)."),
		"revision", integer("The revision it last reported."),
		"phase", str("Its reported phase: Deploying, Running, Degraded, Exited, Error, Stopped, Removing."),
		"summary", o("type", "string", "enum", []string{eim.SummaryRunning, eim.SummaryDegraded, eim.SummaryFailed, eim.SummaryUpdating, eim.SummaryUnknown, eim.SummaryRemoving},
			"description", "The status the workload's counts use."),
		"lastError", str("The last error it reported."),
		"lastTransitionTime", maybe("When the phase last changed."), "reportedAt", maybe("When it last reported."),
		"containers", o("type", "array", "items", ref("EdgeWorkloadContainerState")),
		"lastDataUpload", maybe("When it last uploaded a file."),
		"uploadErrors", strs("Its last upload round's errors."),
		"lastDataDownload", maybe("When it last downloaded (or removed) a file of an ingress data path."),
		"downloadErrors", strs("Its last download round's errors.")),
		"hostId", "targetRevision", "revision", "phase", "summary", "lastTransitionTime", "reportedAt", "containers", "lastDataUpload", "lastDataDownload"))
	into.set("EdgeWorkloadDeviceList", closed("A workload's devices.", o(
		"devices", o("type", "array", "items", ref("EdgeWorkloadDevice"))), "devices"))
	into.set("EdgeWorkloadLogs", closed("A log request and, once answered, the logs.", o(
		"id", str("The request's ID."), "hostId", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The device."),
		"container", str("The container asked for (empty: all)."), "tail", integer("Lines per container."),
		"state", o("type", "string", "enum", []string{"pending", "answered"}),
		"logs", o("type", "array", "items", closed("One container's log tail.", o("container", str("The container."), "text", str("The lines.")), "container", "text")),
		"error", str("Why the device could not read its logs."), "createdAt", when("When it was asked.")),
		"id", "hostId", "tail", "state", "logs", "createdAt"))
}
