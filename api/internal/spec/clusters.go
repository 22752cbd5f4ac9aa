package spec

import (
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The v2 API of the clusters and connect modules (docs/clusters.md,
// docs/connect.md): the original cluster manager's cluster templates and
// clusters, connect tokens and kubeconfigs, and the connect gateway's
// pass-through to a cluster's Kubernetes API. Its conventions differ from
// the v1 API's, and the document says what these handlers do: creates
// answer 201, deletes 204, some changes 200 or 202 without a body; pageSize
// 0 means the default and offset has no upper bound; FailedPrecondition
// is 409; a project that does not exist is 403.

const (
	tagTemplates = "Cluster templates"
	tagClusters  = "Clusters"
	tagConnect   = "Connect"
)

var v2Tags = []struct{ name, desc string }{
	{tagTemplates, "The v2 API of the clusters module (docs/clusters.md): named, versioned recipes of k3s clusters. A template is " +
		"never changed: a new version is a new template. Reads need a read role on the project's clusters (<project>_im-r, _im-rw, " +
		"_cl-r, _cl-rw, by name or ID, or eim-admin, or the template read role _cl-tpl-r), writes a write role (_im-rw, _cl-rw, " +
		"eim-admin, or the template write role _cl-tpl-rw)."},
	{tagClusters, "The v2 API of the clusters module (docs/clusters.md): Kubernetes (k3s) clusters built from the project's hosts. " +
		"The API writes what a cluster should be; a reconciler installs, joins, drains, upgrades and removes nodes and derives the status. " +
		"Roles as for templates, without the template roles."},
	{tagConnect, "The connect module (docs/connect.md): the tunnel an edge cluster's agent opens to the server, the tokens it presents, " +
		"kubeconfigs, and users' requests to a cluster's Kubernetes API through the tunnel."},
}

const (
	v2Prefix        = "/v2"
	v2ProjectPrefix = "/v2/projects/{projectName}"
)

// v2Errors are the v2 API's error answers (apiv2.WriteError), by status.
var v2Errors = map[string]struct{ name, desc string }{
	"400": {"V2BadRequest", "The request is invalid (InvalidArgument); the message names the field. Also a host named as a node that does not exist, and a template to upgrade to that does not exist."},
	"401": {"V2Unauthorized", "No bearer token, or the token is not valid (Unauthenticated)."},
	"403": {"V2Forbidden", "The token lacks the role for this project or operation, or the project does not exist (PermissionDenied): project names cannot be probed."},
	"404": {"V2NotFound", "What the path names does not exist in the project (NotFound)."},
	"409": {"V2Conflict", "A name or a host is taken, or the template is in use (AlreadyExists); or the state forbids the change (FailedPrecondition): the cluster or the project is being deleted, the node is the last control-plane node of a cluster with workers."},
	"413": {"V2PayloadTooLarge", "The request body is over 1 MiB (InvalidArgument)."},
	"500": {"V2Internal", "An unexpected failure; the message does not describe it (Internal)."},
	"503": {"V2Unavailable", "The database, or what the request needs, is unavailable; try again (Unavailable, with Retry-After)."},
}

// v2Statuses are the error statuses a v2 operation answers.
func (x op) v2Statuses() []string {
	if x.errs != nil {
		return x.errs
	}
	out := []string{"400", "401", "403"}
	if !x.no404 {
		out = append(out, "404")
	}
	if x.write {
		out = append(out, "409")
	}
	if x.body != nil {
		out = append(out, "413")
	}
	return append(out, "500", "503")
}

func v2Responses(into *obj) {
	for _, st := range []string{"400", "401", "403", "404", "409", "413", "500", "503"} {
		e := v2Errors[st]
		into.set(e.name, o("description", e.desc, "content", o("application/json", o("schema", ref("Error")))))
	}
}

func v2Parameters(into *obj) {
	into.set("v2ProjectName", o("name", "projectName", "in", "path", "required", true,
		"description", "Name of the project, or its ID (a UUID).",
		"schema", o("type", "string", "minLength", 1, "maxLength", 100)))
	into.set("v2ActiveProjectID", o("name", apiv2.ProjectHeader, "in", "header", "required", true,
		"description", "ID (UUID) of the project, on the /v2/… paths without /projects/{projectName}, as the original's clients send it. "+
			"Absent or not a UUID is 400.",
		"schema", o("type", "string", "pattern", apiv2.UUID.String())))
	into.set("v2PageSize", o("name", "pageSize", "in", "query",
		"description", "How many items a page holds; 0 or absent: 20. Out of range is 400.",
		"schema", o("type", "integer", "minimum", 0, "maximum", 100, "default", 20)))
	into.set("v2Offset", o("name", "offset", "in", "query",
		"description", "How many matching items to skip. Negative is 400.",
		"schema", o("type", "integer", "minimum", 0, "default", 0)))
	into.set("v2Filter", o("name", "filter", "in", "query",
		"description", "The original's filter: field=value terms joined by AND and OR (AND binds first; the words in any case, "+
			"between spaces); a value matches any part of the field, as the original's (name=k3s finds baseline-k3s); a value ending in * "+
			"matches as a prefix; quotes around the whole or a value are dropped. An unknown field is 400.",
		"schema", o("type", "string")))
	into.set("force", o("name", "force", "in", "query",
		"description", "Forget the nodes at once, without waiting for them to uninstall (drain).",
		"schema", o("type", "boolean", "default", false)))
	into.set("templateName", o("name", "name", "in", "path", "required", true, "description", "Name of the template.",
		"schema", o("type", "string", "maxLength", 50, "pattern", eim.TemplateNamePattern)))
	into.set("templateVersion", o("name", "version", "in", "path", "required", true, "description", "Version of the template (vX.Y.Z).",
		"schema", o("type", "string", "pattern", eim.TemplateVersionPattern)))
	into.set("clusterName", o("name", "name", "in", "path", "required", true, "description", "Name of the cluster, or its ID.",
		"schema", o("type", "string", "pattern", eim.ClusterNamePattern)))
	into.set("nodeId", o("name", "nodeId", "in", "path", "required", true,
		"description", "The node's host: its ID (host-…) or its UUID, as the original named nodes.",
		"schema", o("type", "string", "pattern", hostRefPattern)))
	into.set("connectCluster", o("name", "cluster", "in", "path", "required", true, "description", "Name of the cluster.",
		"schema", o("type", "string", "pattern", eim.ClusterNamePattern)))
}

// hostRefPattern is a host's ID or UUID (in braces or not).
var hostRefPattern = idPattern(eim.KindHost) + "|^\\{?" + strings.Trim(apiv2.UUID.String(), "^$") + "\\}?$"

// addV2 adds ops under /v2/projects/{projectName}+path and, with header,
// again under /v2+path with the project's ID in the Activeprojectid
// header; the second's operationIds end in ByHeader.
func (ps *pathSet) addV2(path string, header bool, ops ...op) {
	var inProject, byHeader []op
	for _, x := range ops {
		x.noProj, x.v2 = true, true
		p := x
		p.params = append([]any{pref("v2ProjectName")}, x.params...)
		inProject = append(inProject, p)
		h := x
		h.id, h.alias = x.id+"ByHeader", x.id
		h.params = append([]any{pref("v2ActiveProjectID")}, x.params...)
		byHeader = append(byHeader, h)
	}
	ps.add(v2ProjectPrefix+path, inProject...)
	if header {
		ps.add(v2Prefix+path, byHeader...)
	}
}

func noBody(desc string) *obj { return o("description", desc) }

func addClusters(ps *pathSet) {
	tmpl, tver := pref("templateName"), pref("templateVersion")
	ps.addV2("/templates", true,
		op{method: "get", id: "listClusterTemplates", tag: tagTemplates, summary: "List cluster templates", no404: true,
			desc: "The project's templates, by name then version unless orderBy says otherwise, and the project's default " +
				"(defaultTemplateInfo, absent when the project has none).",
			params: []any{
				o("name", "default", "in", "query", "description", "Only the project's default template.", "schema", o("type", "boolean", "default", false)),
				pref("v2Filter"),
				o("name", "orderBy", "in", "query", "description", "\"field [asc|desc]\", or several separated by commas, over name, version, kubernetesVersion, description; name when absent.",
					"schema", o("type", "string", "pattern", orderByPattern("name", "version", "kubernetesVersion", "description"))),
				pref("v2PageSize"), pref("v2Offset"),
			},
			ok: okJSON("A page of templates.", ref("ClusterTemplateList"))},
		op{method: "post", id: "createClusterTemplate", tag: tagTemplates, summary: "Create a cluster template", write: true, no404: true,
			desc: "Stores a template. controlplaneprovidertype defaults to k3s and infraprovidertype to intel; the pods' and the " +
				"services' CIDR blocks must not overlap. A file contentFrom a secret or config map is kept as given; EIM resolves the original's " +
				"pod-security-admission-config secret (keys baseline.yaml, privileged.yaml, restricted.yaml) and refuses a cluster of a " +
				"template with another (there is no management cluster). A kubeadm template is kept; a cluster of it is 400. " +
				"A name and version that exist are 409: a template is never changed.",
			body:   ref("ClusterTemplateCreate"),
			status: "201", ok: okJSON("Created; the body is the original's message, \"successfully imported template NAME\".", o("type", "string"))},
	)
	ps.addV2("/templates/{name}/{version}", true,
		op{method: "get", id: "getClusterTemplate", tag: tagTemplates, summary: "Get a cluster template", params: []any{tmpl, tver},
			ok: okJSON("The template.", ref("ClusterTemplate"))},
		op{method: "delete", id: "deleteClusterTemplate", tag: tagTemplates, summary: "Delete a cluster template", write: true,
			params: []any{tmpl, tver},
			desc:   "Deletes a template; one a cluster runs, or nodes are moving from (an upgrade under way), is 409.",
			status: "204", ok: noBody("Deleted.")},
	)
	ps.addV2("/templates/{name}/versions", true,
		op{method: "get", id: "listClusterTemplateVersions", tag: tagTemplates, summary: "List a template's versions", params: []any{tmpl},
			desc: "The versions of the template name, oldest first (in numeric order). A name without templates is 404.",
			ok:   okJSON("The versions.", ref("ClusterTemplateVersions"))},
	)
	ps.addV2("/templates/{name}/default", true,
		op{method: "put", id: "setDefaultClusterTemplate", tag: tagTemplates, summary: "Set the project's default template", write: true,
			params: []any{tmpl},
			desc: "Makes a version of the template name the project's default: the template a cluster created without one gets. " +
				"version \"\" (or absent) is the latest.",
			body: ref("DefaultTemplateChange"), ok: noBody("Done; no body.")},
	)

	name, node := pref("clusterName"), pref("nodeId")
	ps.addV2("/clusters", true,
		op{method: "get", id: "listClusters", tag: tagClusters, summary: "List clusters", no404: true,
			desc: "The project's clusters, by name unless orderBy says otherwise. The filter reaches name, kubernetesVersion " +
				"(also kubernetes_version), providerStatus and lifecyclePhase (their messages).",
			params: []any{pref("v2Filter"),
				o("name", "orderBy", "in", "query", "description", "\"field [asc|desc]\", or several separated by commas, over name, kubernetesVersion, providerStatus, lifecyclePhase; name when absent.",
					"schema", o("type", "string", "pattern", orderByPattern("name", "kubernetesVersion", "providerStatus", "lifecyclePhase"))),
				pref("v2PageSize"), pref("v2Offset")},
			ok: okJSON("A page of clusters.", ref("ClusterList"))},
		op{method: "post", id: "createCluster", tag: tagClusters, summary: "Create a cluster", write: true, no404: true,
			desc: "Creates a cluster of the hosts named (each in one cluster at most: one in another is 409) from a template; the " +
				"reconciler then installs it, the first control-plane node first. At least one node must run the control plane " +
				"(role all or controlplane). The template's cluster-labels are the cluster's, with labels over them.",
			body:   ref("ClusterCreate"),
			status: "201", ok: okJSON("Created; the body is the original's message, \"successfully created cluster NAME\".", o("type", "string"))},
	)
	ps.addV2("/clusters/summary", true,
		op{method: "get", id: "getClustersSummary", tag: tagClusters, summary: "Count clusters by provider status", no404: true,
			desc: "The project's clusters counted by their providerStatus indicator: ready (idle), error, inProgress and unknown.",
			ok:   okJSON("The counts.", ref("ClustersSummary"))},
	)
	ps.addV2("/clusters/{name}", true,
		op{method: "get", id: "getCluster", tag: tagClusters, summary: "Get a cluster", params: []any{name},
			ok: okJSON("The cluster, with its template and nodes.", ref("ClusterDetail"))},
		op{method: "delete", id: "deleteCluster", tag: tagClusters, summary: "Delete a cluster", write: true, params: []any{name, pref("force")},
			desc: "Starts the cluster's deletion: every node uninstalls (no drain), then the cluster goes (at once with force); its " +
				"connect tokens expire and its workload goes. Meanwhile GET shows lifecyclePhase deleting and changes are 409.",
			status: "204", ok: noBody("The deletion started.")},
	)
	ps.addV2("/clusters/{nodeId}/clusterdetail", true,
		op{method: "get", id: "getClusterOfNode", tag: tagClusters, summary: "Get the cluster of a host", params: []any{node},
			desc: "The cluster the host is a node of; a host in no cluster, or none with that ID or UUID, is 404.",
			ok:   okJSON("The cluster.", ref("ClusterDetail"))},
	)
	ps.addV2("/clusters/{name}/nodes", true,
		op{method: "put", id: "setClusterNodes", tag: tagClusters, summary: "Set a cluster's nodes", write: true, params: []any{name},
			desc: "Makes the cluster's nodes those of the body: hosts added join, nodes left out leave (drained first). A node's " +
				"role does not change (400): remove it, then add it again. One node at least must run the control plane.",
			body: ref("ClusterNodeList"), ok: noBody("Done; no body.")},
	)
	ps.addV2("/clusters/{name}/nodes/{nodeId}", true,
		op{method: "delete", id: "removeClusterNode", tag: tagClusters, summary: "Remove a node from a cluster", write: true,
			params: []any{name, node, o("name", "force", "in", "query", "description", "Leave without a drain.", "schema", o("type", "boolean", "default", false))},
			desc: "The node leaves the cluster: drained (unless force), then uninstalled; its host is free once it has. A host that " +
				"is not a node is 404; the last control-plane node of a cluster with workers is 409.",
			ok: noBody("The removal started; no body.")},
	)
	ps.addV2("/clusters/{name}/labels", true,
		op{method: "put", id: "setClusterLabels", tag: tagClusters, summary: "Replace a cluster's labels", write: true, params: []any{name},
			body: ref("ClusterLabels"), ok: noBody("Done; no body.")},
	)
	ps.addV2("/clusters/{name}/template", true,
		op{method: "put", id: "upgradeCluster", tag: tagClusters, summary: "Move a cluster to a template", write: true, params: []any{name},
			desc: "Moves the cluster to the template (an upgrade): one node at a time, control-plane nodes first, each drained " +
				"first. A node that fails stops the roll-out (lifecyclePhase failed); the same request again retries it. A template " +
				"that does not exist is 400.",
			body: ref("ClusterTemplateRef"), status: "202", ok: noBody("Accepted: the reconciler rolls the change out; no body.")},
	)
}

func addConnect(ps *pathSet) {
	c := pref("connectCluster")
	ps.addV2("/connect/clusters/{cluster}/token", false,
		op{method: "post", id: "issueConnectToken", tag: tagConnect, summary: "Issue a cluster's connect token", write: true, no404: true,
			desc: "A new token for the cluster's connect agent, shown once. The cluster's other tokens expire now, or after grace (a " +
				"planned rotation). The cluster need not exist yet. Needs the project's write role (_im-rw or eim-admin).",
			params: []any{c,
				o("name", "ttl", "in", "query", "description", "Lifetime of the token, a Go duration from 1m to 8784h (the server's default, 30 days, when absent).",
					"schema", o("type", "string")),
				o("name", "grace", "in", "query", "description", "How long the cluster's other tokens stay valid, a Go duration from 0 to 720h (0 when absent).",
					"schema", o("type", "string"))},
			status: "201", ok: okJSON("The token.", ref("ConnectToken"))},
		op{method: "delete", id: "revokeConnectTokens", tag: tagConnect, summary: "Revoke a cluster's connect tokens", write: true, no404: true,
			desc: "Every token of the cluster expires now: its agent cannot open another tunnel (one open stays until it drops). " +
				"Needs the project's write role.",
			params: []any{c}, status: "204", ok: noBody("Revoked.")},
	)
	ps.addV2("/connect/clusters", false,
		op{method: "get", id: "listConnections", tag: tagConnect, summary: "List the clusters' tunnels", no404: true,
			desc: "The project's clusters that have a connect token that has not expired or a tunnel, by name: whether the tunnel " +
				"is up (its holder's pings are recent), which replica holds it, and when the newest token expires.",
			ok: okJSON("The clusters.", ref("ConnectionList"))},
	)
	ps.addV2("/connect/clusters/{cluster}", false,
		op{method: "get", id: "getConnection", tag: tagConnect, summary: "Get a cluster's tunnel", params: []any{c},
			desc: "As in the list; a cluster with neither a token nor a tunnel is 404.",
			ok:   okJSON("The cluster's tunnel.", ref("Connection"))},
	)
	ps.addV2("/clusters/{cluster}/kubeconfigs", true,
		op{method: "get", id: "getKubeconfig", tag: tagConnect, summary: "Get a kubeconfig of a cluster", params: []any{c},
			desc: "A kubeconfig that reaches the cluster's Kubernetes API through this server (/kubernetes/{project}-{cluster}/) " +
				"with a short-lived token of the caller carrying only the caller's roles on this project. Where the clusters module " +
				"runs, a cluster it does not know is 404. A server without its own token issuer answers 503.",
			ok: okJSON("The kubeconfig.", ref("Kubeconfig"))},
	)
	target := []any{
		o("name", "target", "in", "path", "required", true, "description", "{project}-{cluster}: the project's ID (as kubeconfigs "+
			"name it) or name, a dash, and the cluster's name. A project name with dashes is tried at each of them.",
			"schema", o("type", "string", "minLength", 3)),
		o("name", "kubernetesPath", "in", "path", "required", true,
			"description", "The rest of the path, any number of segments, as the cluster's Kubernetes API serves it (api/v1/namespaces, apis/apps/v1/…).",
			"schema", o("type", "string")),
	}
	var proxy []op
	for _, m := range []string{"get", "put", "post", "patch", "delete"} {
		proxy = append(proxy, op{method: m, id: "proxyKubernetes" + strings.ToUpper(m[:1]) + m[1:], tag: tagConnect, noProj: true, v2: true,
			summary: "Reach a cluster's Kubernetes API (" + strings.ToUpper(m) + ")",
			desc: "A pass-through: the request goes, as it came but for its credentials, through the cluster's tunnel to its " +
				"Kubernetes API, as the caller (Impersonate-User eim:<subject>, Impersonate-Group eim:<role> for each role), so " +
				"the cluster's RBAC decides; the answer comes back as the cluster gave it. Every method, watches and upgrades " +
				"(exec, port-forward) included. A request landing on a replica that does not hold the tunnel is forwarded to " +
				"the one that does. The gateway's own answers are the errors below: a project or cluster the caller may not " +
				"reach is 403; a cluster whose agent holds no tunnel is 503.",
			params: target,
			ok:     noBody("The cluster's answer, passed through (any status and content type)."),
			errs:   []string{"401", "403", "500", "503"}})
	}
	ps.add("/kubernetes/{target}/{kubernetesPath}", proxy...)
	ps.add(v2Prefix+"/healthz", op{method: "get", id: "getClustersHealth", tag: tagClusters, summary: "Health check of the clusters API",
		noProj: true, public: true, no404: true,
		desc: "The original cluster manager's health check: 200 with a short message while the server serves the clusters API. No authentication.",
		ok:   okJSON("Up.", o("type", "string"))})
}

// orderByPattern matches "field [asc|desc]" over fields, in quotes or
// not, or "".
func orderByPattern(fields ...string) string {
	one := `\s*(` + strings.Join(fields, "|") + `)(\s+([aA][sS][cC]|[dD][eE][sS][cC]))?\s*`
	return `^$|^"?` + one + `(,` + one + `)*"?$`
}

// v2Schemas are the bodies of the v2 API, as the handlers in clusters/
// and connect/ write and read them.
func v2Schemas(into *obj) {
	str := func(desc string) *obj { return o("type", "string", "description", desc) }
	labels := func(typ any, desc string) *obj {
		return o("type", typ, "description", desc+" Kubernetes labels: keys [prefix/]name (name up to 63 letters, digits, "+
			"'-', '_', '.'; prefix a DNS subdomain), values up to 63 of the same.",
			"maxProperties", eim.MaxClusterLabels,
			"additionalProperties", o("type", "string", "maxLength", 63, "pattern", eim.ClusterLabelValuePattern))
	}
	// template is ClusterTemplate (an answer: every member the handler
	// always writes is required) or ClusterTemplateCreate (a body:
	// unknown members are 400, at every level).
	template := func(answer bool) *obj {
		closed := func(x *obj) *obj {
			if !answer {
				x.set("additionalProperties", false)
			}
			return x
		}
		ranges := closed(o("type", "object", "properties", o(
			"cidrBlocks", o("type", nullable(answer, "array"), "maxItems", 16, "items", o("type", "string", "description", "A CIDR block: network address/length.")))))
		x := closed(o("type", "object",
			"properties", o(
				"name", o("type", "string", "maxLength", 50, "pattern", eim.TemplateNamePattern, "description", "Name: lower-case letters, digits, '-' and '.'."),
				"version", o("type", "string", "pattern", eim.TemplateVersionPattern, "description", "Version, vX.Y.Z or the original's vX.Y.Z-dev."),
				"kubernetesVersion", o("type", "string", "maxLength", 63, "pattern", eim.KubernetesVersionPattern,
					"description", "The k3s release the nodes install, e.g. v1.33.5+k3s1."),
				"description", o("type", "string", "maxLength", eim.MaxTemplateDesc),
				"controlplaneprovidertype", o("type", "string", "enum", []string{"k3s", "kubeadm"}, "default", "k3s",
					"description", "The distribution: EIM installs k3s; a kubeadm template is kept, and a cluster of it refused."),
				"infraprovidertype", o("type", "string", "enum", []string{"intel", "docker"}, "default", "intel",
					"description", "The original's infrastructure provider: intel (EIM's hosts) or docker."),
				"clusterconfiguration", o("type", []string{"object", "null"},
					"description", "The original's KThreesControlPlaneTemplate object, at most 256 KiB. EIM applies its "+
						"spec.template.spec.kthreesConfigSpec: serverConfig (kubeApiServerArg, kubeControllerManagerArgs, kubeSchedulerArgs, "+
						"clusterDomain, disableComponents, disableCloudController, tlsSan), agentConfig (kubeletArgs, nodeLabels, nodeTaints), "+
						"files (path, content or contentFrom, permissions) and preK3sCommands; postK3sCommands are kept, not run. "+
						"A kind other than KThreesControlPlaneTemplate is 400 (but for a kubeadm template, kept as given)."),
				"clusterNetwork", closed(o("type", "object", "description", "The pods' and the services' networks; they must not overlap.",
					"properties", o("pods", ranges, "services", ranges))),
				"cluster-labels", labels(nullable(answer, "object"), "Labels every cluster made from the template gets."),
				"artifacts", o("type", "array", "description", "EIM's: where nodes download the k3s binary and air-gap images; absent: "+
					"from the server's artifact store.",
					"items", closed(o("type", "object",
						"properties", o(
							"kind", o("type", "string", "enum", []string{"binary", "images"}),
							"url", o("type", "string", "pattern", "^https?://"),
							"sha256", o("type", "string", "pattern", "^[a-f0-9]{64}$")),
						"required", []string{"kind", "url", "sha256"}))),
			)))
		if answer {
			x.set("description", "A cluster template, as the original's cluster manager has them.")
			x.set("required", []string{"name", "version", "kubernetesVersion", "controlplaneprovidertype", "infraprovidertype", "clusterNetwork", "cluster-labels"})
		} else {
			x.set("description", "A new cluster template.")
			x.set("required", []string{"name", "version", "kubernetesVersion"})
		}
		return x
	}
	into.set("ClusterTemplate", template(true))
	into.set("ClusterTemplateCreate", template(false))
	into.set("ClusterTemplateList", o("type", "object",
		"properties", o(
			"defaultTemplateInfo", o("type", "object", "description", "The project's default template; absent when it has none.",
				"properties", o("name", o("type", "string"), "version", o("type", "string")), "required", []string{"name", "version"}),
			"templateInfoList", o("type", "array", "items", ref("ClusterTemplate")),
			"totalElements", o("type", "integer", "description", "How many templates match, on every page."),
		),
		"required", []string{"templateInfoList", "totalElements"}))
	into.set("ClusterTemplateVersions", o("type", "object",
		"properties", o("versionList", o("type", "array", "items", o("type", "string", "pattern", eim.TemplateVersionPattern))),
		"required", []string{"versionList"}))
	into.set("DefaultTemplateChange", o("type", "object", "additionalProperties", false,
		"properties", o(
			"name", str("The path's template name, or absent; another name is 400."),
			"version", o("type", "string", "pattern", "^$|"+eim.TemplateVersionPattern, "description", "The version; \"\" or absent: the latest."),
		)))

	role := o("type", "string", "enum", []string{string(eim.ClusterRoleAll), string(eim.ClusterRoleControlPlane), string(eim.ClusterRoleWorker)},
		"description", "all: control plane and workloads; controlplane: control plane only (tainted NoSchedule); worker: workloads only.")
	nodeSpec := o("type", "object", "additionalProperties", false,
		"properties", o(
			"id", o("type", "string", "pattern", hostRefPattern, "description", "The host: its ID or its UUID. A host of another project, "+
				"being deleted or invalidated, or named twice is 400."),
			"role", o("allOf", []any{role}, "default", string(eim.ClusterRoleAll)),
		),
		"required", []string{"id"})
	into.set("ClusterNodeSpec", nodeSpec)
	into.set("ClusterNodeList", o("type", "array", "minItems", 1, "maxItems", eim.MaxClusterNodes, "items", ref("ClusterNodeSpec")))
	into.set("ClusterCreate", o("type", "object", "additionalProperties", false,
		"properties", o(
			"name", o("type", "string", "pattern", eim.ClusterNamePattern, "description", "Letters (either case), digits, '-' and '.', as the original's, not of the form of a cluster ID "+
				"(cluster-…); absent: edge-<8 hex digits>."),
			"template", str("The template: name-vX.Y.Z, a name (its latest version), or absent (the project's default)."),
			"nodes", ref("ClusterNodeList"),
			"labels", labels("object", "The cluster's labels, over the template's."),
		),
		"required", []string{"nodes"}))
	into.set("ClusterLabels", o("type", "object", "additionalProperties", false,
		"properties", o("labels", labels([]string{"object", "null"}, "The cluster's labels, replacing them all; absent or null: none."))))
	into.set("ClusterTemplateRef", o("type", "object", "additionalProperties", false,
		"properties", o("name", o("type", "string", "minLength", 1), "version", o("type", "string", "minLength", 1)),
		"required", []string{"name", "version"}))

	status := func(desc string, message *obj) *obj {
		return o("type", "object", "description", desc+" The original's GenericStatus.",
			"properties", o(
				"message", message,
				"indicator", ref("StatusIndication"),
				"timestamp", o("type", "integer", "minimum", 0, "description", "When the status last changed, in Unix seconds; 0 before it was first set."),
			),
			"required", []string{"message", "indicator", "timestamp"})
	}
	into.set("ClusterLifecyclePhase", status("Where the cluster is in its life.",
		o("type", "string", "enum", []string{"provisioning", "active", "updating", "deleting", "failed"})))
	into.set("ClusterProviderStatus", status("How the installation goes: ready, in progress (how many nodes are ready, or the upgrade), "+
		"the error that stopped it (HOST: message), or the deletion's progress.",
		o("type", "string", "pattern", `^(ready|in progress: .+|error: .+|deleting: [0-9]+ nodes left)$`)))
	into.set("ClusterStatusText", status("A status text; message \"\" and indicator STATUS_INDICATION_UNSPECIFIED until the "+
		"reconciler first looked at the cluster.", o("type", "string")))
	info := func() *obj {
		return o(
			"name", o("type", "string", "pattern", eim.ClusterNamePattern),
			"kubernetesVersion", o("type", "string", "description", "The Kubernetes version of the cluster's template."),
			"labels", o("type", "object", "additionalProperties", o("type", "string")),
			"lifecyclePhase", ref("ClusterLifecyclePhase"),
			"providerStatus", ref("ClusterProviderStatus"),
			"controlPlaneReady", o("allOf", []any{ref("ClusterStatusText")}, "description", "ready once a control-plane node is; not ready (: the failure) before."),
			"infrastructureReady", o("allOf", []any{ref("ClusterStatusText")}, "description", "ready, or host HOST not found when a node's host is gone."),
			"nodeHealth", o("allOf", []any{ref("ClusterStatusText")}, "description", "nodes are healthy, N of M nodes ready, or the failing node's HOST: message."),
			"nodeQuantity", o("type", "integer", "minimum", 0, "description", "How many nodes the cluster has, those leaving not counted."),
		)
	}
	infoRequired := []string{"name", "kubernetesVersion", "labels", "lifecyclePhase", "providerStatus", "controlPlaneReady",
		"infrastructureReady", "nodeHealth", "nodeQuantity"}
	into.set("ClusterInfo", o("type", "object", "description", "A cluster, as the list shows it.", "properties", info(), "required", infoRequired))
	into.set("ClusterNode", o("type", "object",
		"properties", o(
			"id", o("type", "string", "pattern", idPattern(eim.KindHost), "description", "The host's ID."),
			"role", role,
			"status", o("type", "object",
				"properties", o(
					"condition", o("type", "string", "enum", []string{"STATUS_CONDITION_READY", "STATUS_CONDITION_PROVISIONING",
						"STATUS_CONDITION_NOTREADY", "STATUS_CONDITION_REMOVING", "STATUS_CONDITION_UNKNOWN"},
						"description", "READY: installed at its current plan; PROVISIONING: installing, or waiting for its plan; NOTREADY: "+
							"the node reported an error (reason); REMOVING: leaving the cluster; UNKNOWN: otherwise."),
					"reason", str("What the node last reported, or what it waits for; may be \"\"."),
					"timestamp", o("type", "string", "pattern", `^$|^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`,
						"description", "When the node last reported (RFC 3339, UTC); \"\" before it did."),
				),
				"required", []string{"condition", "reason", "timestamp"}),
		),
		"required", []string{"id", "role", "status"}))
	detail := info()
	detail.set("template", o("type", "string", "description", "The cluster's template, name-vX.Y.Z."))
	detail.set("nodes", o("type", "array", "items", ref("ClusterNode")))
	into.set("ClusterDetail", o("type", "object", "description", "A cluster with its template and its nodes.",
		"properties", detail, "required", append(infoRequired, "template", "nodes")))
	into.set("ClusterList", o("type", "object",
		"properties", o("clusters", o("type", "array", "items", ref("ClusterInfo")),
			"totalElements", o("type", "integer", "description", "How many clusters match, on every page.")),
		"required", []string{"clusters", "totalElements"}))
	count := func(desc string) *obj { return o("type", "integer", "minimum", 0, "description", desc) }
	into.set("ClustersSummary", o("type", "object",
		"properties", o(
			"totalClusters", count("All the project's clusters."),
			"ready", count("providerStatus STATUS_INDICATION_IDLE."),
			"error", count("providerStatus STATUS_INDICATION_ERROR."),
			"inProgress", count("providerStatus STATUS_INDICATION_IN_PROGRESS."),
			"unknown", count("Any other."),
		),
		"required", []string{"totalClusters", "ready", "error", "inProgress", "unknown"}))

	into.set("ConnectToken", o("type", "object",
		"properties", o(
			"id", o("type", "string", "pattern", "^ct-[0-9a-f]{16}$", "description", "The token's public part, as lists and logs show it."),
			"cluster", str("The cluster's name."),
			"token", o("type", "string", "pattern", "^"+eim.ConnectTokenPrefix+"ct-[0-9a-f]{16}\\.[A-Za-z0-9_-]{43}$",
				"description", "The token, shown this once: the agent's --token."),
			"expires", o("type", "string", "format", "date-time"),
		),
		"required", []string{"id", "cluster", "token", "expires"}))
	into.set("Connection", o("type", "object",
		"properties", o(
			"cluster", str("The cluster's name."),
			"connected", o("type", "boolean", "description", "The tunnel is up: its holder's pings are recent."),
			"lastSeen", o("type", "string", "format", "date-time", "description", "The holder's last successful ping; absent without a tunnel."),
			"agentVersion", str("What the agent reported; absent without a tunnel."),
			"rttMillis", o("type", "number", "description", "Round-trip time of the last ping through the tunnel; absent when 0."),
			"replica", str("The replica that holds the tunnel; absent without one."),
			"tokenExpires", o("type", "string", "format", "date-time", "description", "When the newest token expires; absent without one."),
		),
		"required", []string{"cluster", "connected"}))
	into.set("ConnectionList", o("type", "object",
		"properties", o("clusters", o("type", "array", "items", ref("Connection"))),
		"required", []string{"clusters"}))
	into.set("Kubeconfig", o("type", "object",
		"properties", o("kubeconfig", str("A kubeconfig (YAML): the server's /kubernetes/{project ID}-{cluster} URL and a token of the caller.")),
		"required", []string{"kubeconfig"}))
}

// nullable is typ, or [typ, null] in an answer (a Go nil written as
// null).
func nullable(answer bool, typ string) any {
	if answer {
		return []string{typ, "null"}
	}
	return typ
}
