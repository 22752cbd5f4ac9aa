package clusters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The v2 API, compatible with the original's cluster manager: each route
// is served at /v2/projects/{projectName}/… (the project's name or ID)
// and at /v2/… with the project's ID in the Activeprojectid header.
// GET /clusters/{name}/kubeconfigs is the connect module's.

// call is what a handler works with.
type call struct {
	p    *eim.Principal
	proj *eim.Project
}

// routes are the API's routes, by method and path below /v2[/projects/P].
var routes = []struct{ method, path string }{
	{"GET", "/templates"},
	{"POST", "/templates"},
	{"GET", "/templates/{name}/{version}"},
	{"DELETE", "/templates/{name}/{version}"},
	{"GET", "/templates/{name}/versions"},
	{"PUT", "/templates/{name}/default"},
	{"GET", "/clusters"},
	{"POST", "/clusters"},
	{"GET", "/clusters/summary"},
	{"GET", "/clusters/{name}"},
	{"DELETE", "/clusters/{name}"},
	{"GET", "/clusters/{nodeId}/clusterdetail"},
	{"PUT", "/clusters/{name}/nodes"},
	{"DELETE", "/clusters/{name}/nodes/{nodeId}"},
	{"PUT", "/clusters/{name}/labels"},
	{"PUT", "/clusters/{name}/template"},
}

// Routes returns the API's handlers by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	handlers := map[string]func(http.ResponseWriter, *http.Request, *call) error{
		"GET /templates":                         s.listTemplates,
		"POST /templates":                        s.createTemplate,
		"GET /templates/{name}/{version}":        s.getTemplate,
		"DELETE /templates/{name}/{version}":     s.deleteTemplate,
		"GET /templates/{name}/versions":         s.templateVersions,
		"PUT /templates/{name}/default":          s.setDefault,
		"GET /clusters":                          s.listClusters,
		"POST /clusters":                         s.createCluster,
		"GET /clusters/summary":                  s.summary,
		"GET /clusters/{name}":                   s.getCluster,
		"DELETE /clusters/{name}":                s.deleteCluster,
		"GET /clusters/{nodeId}/clusterdetail":   s.clusterOfNode,
		"PUT /clusters/{name}/nodes":             s.putNodes,
		"DELETE /clusters/{name}/nodes/{nodeId}": s.removeNode,
		"PUT /clusters/{name}/labels":            s.putLabels,
		"PUT /clusters/{name}/template":          s.putTemplate,
	}
	out := map[string]http.Handler{}
	for _, r := range routes {
		h := s.api(handlers[r.method+" "+r.path], strings.HasPrefix(r.path, "/templates"))
		out[r.method+" /v2/projects/{projectName}"+r.path] = h
		out[r.method+" /v2"+r.path] = h
	}
	// The original's health check, without authentication: the API
	// answers when the process serves it.
	out["GET /v2/healthz"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		apiv2.WriteJSON(w, http.StatusOK, "clusters API is healthy")
	})
	return out
}

// api wraps a handler: authenticate, find the project, check the role
// (the cluster template roles count on the templates' paths).
func (s *Service) api(fn func(http.ResponseWriter, *http.Request, *call) error, templates bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
			p, err := apiv2.Authenticate(r, s.o.Authenticator)
			if err != nil {
				return err
			}
			proj, err := apiv2.Project(r, s.o.Store)
			if err != nil {
				return err
			}
			access := apiv2.ClusterAccess
			if templates {
				access = apiv2.TemplateAccess
			}
			if err := access(p, proj, r.Method); err != nil {
				return err
			}
			if proj.Deleting && r.Method != http.MethodGet {
				return eim.Errorf(eim.EPRECONDITION, "project %s is being deleted", proj.Name)
			}
			return fn(w, r.WithContext(eim.WithActor(r.Context(), p.Subject)), &call{p: p, proj: proj})
		}()
		if err != nil {
			apiv2.WriteError(w, err)
		}
	})
}

// --- templates

// TemplateList is the answer of GET /templates.
type TemplateList struct {
	DefaultTemplateInfo *DefaultTemplate       `json:"defaultTemplateInfo,omitempty"`
	TemplateInfoList    []*eim.ClusterTemplate `json:"templateInfoList"`
	TotalElements       int                    `json:"totalElements"`
}

// DefaultTemplate names the project's default template.
type DefaultTemplate struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version"`
}

// templateFields are what the templates' filter and orderBy name.
var templateFields = map[string]field[*eim.ClusterTemplate]{
	"name":              {get: func(t *eim.ClusterTemplate) string { return t.Name }},
	"version":           {get: func(t *eim.ClusterTemplate) string { return t.Version }, cmp: eim.CompareTemplateVersions},
	"kubernetesVersion": {get: func(t *eim.ClusterTemplate) string { return t.KubernetesVersion }},
	"description":       {get: func(t *eim.ClusterTemplate) string { return t.Description }},
}

func (s *Service) listTemplates(w http.ResponseWriter, r *http.Request, c *call) error {
	size, offset, err := page(r)
	if err != nil {
		return err
	}
	ts, err := s.o.Store.ClusterTemplates(r.Context(), c.proj.Name)
	if err != nil {
		return err
	}
	out := TemplateList{TemplateInfoList: []*eim.ClusterTemplate{}}
	for _, t := range ts {
		if t.Default {
			out.DefaultTemplateInfo = &DefaultTemplate{Name: t.Name, Version: t.Version}
		}
	}
	if d := r.URL.Query().Get("default"); d != "" {
		only, err := strconv.ParseBool(d)
		if err != nil {
			return eim.Errorf(eim.EINVALID, "default: %q is not true or false", d)
		}
		if only {
			ts = slices.DeleteFunc(ts, func(t *eim.ClusterTemplate) bool { return !t.Default })
		}
	}
	match, err := parseFilter(r.URL.Query().Get("filter"), templateFields)
	if err != nil {
		return err
	}
	ts = slices.DeleteFunc(ts, func(t *eim.ClusterTemplate) bool { return !match(t) })
	if err := orderBy(r.URL.Query().Get("orderBy"), templateFields, ts); err != nil {
		return err
	}
	out.TotalElements = len(ts)
	for _, t := range pageOf(ts, size, offset) {
		out.TemplateInfoList = append(out.TemplateInfoList, shownTemplate(t))
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) createTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	var t eim.ClusterTemplate
	if err := apiv2.Decode(r, &t); err != nil {
		return err
	}
	if t.ControlPlaneProvider == "" {
		t.ControlPlaneProvider = "k3s"
	}
	if t.InfraProvider == "" {
		t.InfraProvider = "intel"
	}
	if err := t.Validate(); err != nil {
		return err
	}
	t.Project = c.proj.Name
	if err := s.o.Store.CreateClusterTemplate(r.Context(), &t); err != nil {
		return err
	}
	// The original's words (its clients show them).
	apiv2.WriteJSON(w, http.StatusCreated, "successfully imported template "+t.Name)
	return nil
}

// shownTemplate is a template as the API shows it: the members the
// original's document gives as objects and arrays are {} and [], never
// null.
func shownTemplate(t *eim.ClusterTemplate) *eim.ClusterTemplate {
	c := *t
	c.Labels = orEmpty(t.Labels)
	if c.Network.Pods.CIDRBlocks == nil {
		c.Network.Pods.CIDRBlocks = []string{}
	}
	if c.Network.Services.CIDRBlocks == nil {
		c.Network.Services.CIDRBlocks = []string{}
	}
	return &c
}

// template returns the project's template.
func (s *Service) template(ctx context.Context, project, name, version string) (*eim.ClusterTemplate, error) {
	if !eim.ValidTemplateName(name) {
		return nil, eim.Errorf(eim.EINVALID, "name: %q is not a template name", name)
	}
	if !eim.ValidTemplateVersion(version) {
		return nil, eim.Errorf(eim.EINVALID, "version: %q is not a version vX.Y.Z (or vX.Y.Z-dev)", version)
	}
	ts, err := s.o.Store.ClusterTemplates(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == name && t.Version == version {
			return t, nil
		}
	}
	return nil, eim.Errorf(eim.ENOTFOUND, "template %s version %s not found", name, version)
}

func (s *Service) getTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.template(r.Context(), c.proj.Name, r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, shownTemplate(t))
	return nil
}

func (s *Service) deleteTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	if _, err := s.template(r.Context(), c.proj.Name, r.PathValue("name"), r.PathValue("version")); err != nil {
		return err
	}
	if err := s.o.Store.DeleteClusterTemplate(r.Context(), c.proj.Name, r.PathValue("name"), r.PathValue("version")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// VersionList is the answer of GET /templates/{name}/versions.
type VersionList struct {
	VersionList []string `json:"versionList"`
}

func (s *Service) versionsOf(ctx context.Context, project, name string) ([]string, error) {
	if !eim.ValidTemplateName(name) {
		return nil, eim.Errorf(eim.EINVALID, "name: %q is not a template name", name)
	}
	ts, err := s.o.Store.ClusterTemplates(ctx, project)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		if t.Name == name {
			out = append(out, t.Version) // oldest first
		}
	}
	if len(out) == 0 {
		return nil, eim.Errorf(eim.ENOTFOUND, "no template %s", name)
	}
	return out, nil
}

func (s *Service) templateVersions(w http.ResponseWriter, r *http.Request, c *call) error {
	vs, err := s.versionsOf(r.Context(), c.proj.Name, r.PathValue("name"))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, VersionList{VersionList: vs})
	return nil
}

func (s *Service) setDefault(w http.ResponseWriter, r *http.Request, c *call) error {
	var d DefaultTemplate
	if err := apiv2.Decode(r, &d); err != nil {
		return err
	}
	name := r.PathValue("name")
	if d.Name != "" && d.Name != name {
		return eim.Errorf(eim.EINVALID, "name: %q is not the path's template %q", d.Name, name)
	}
	vs, err := s.versionsOf(r.Context(), c.proj.Name, name)
	if err != nil {
		return err
	}
	if d.Version == "" {
		d.Version = vs[len(vs)-1] // the latest
	} else if !eim.ValidTemplateVersion(d.Version) {
		return eim.Errorf(eim.EINVALID, "version: %q is not a version vX.Y.Z (or vX.Y.Z-dev)", d.Version)
	}
	if err := s.o.Store.SetDefaultClusterTemplate(r.Context(), c.proj.Name, name, d.Version); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// --- clusters

// NodeSpec is a node as the API takes it.
type NodeSpec struct {
	ID   string          `json:"id"`
	Role eim.ClusterRole `json:"role"`
}

// ClusterSpec is the body of POST /clusters.
type ClusterSpec struct {
	Name     string            `json:"name"`
	Template string            `json:"template"`
	Nodes    []NodeSpec        `json:"nodes"`
	Labels   map[string]string `json:"labels"`
}

// resolveNodes checks the API's nodes and returns them by host ID: a
// host of the project (by ID, or by UUID as the original's API names
// them), each once, with a role.
func (s *Service) resolveNodes(ctx context.Context, project, field string, specs []NodeSpec) ([]*eim.ClusterNode, error) {
	if len(specs) > eim.MaxClusterNodes {
		return nil, eim.Errorf(eim.EINVALID, "%s: %d nodes, at most %d", field, len(specs), eim.MaxClusterNodes)
	}
	var out []*eim.ClusterNode
	seen := map[string]bool{}
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		out = nil
		clear(seen)
		for i, sp := range specs {
			f := fmt.Sprintf("%s[%d]", field, i)
			if sp.Role == "" {
				sp.Role = eim.ClusterRoleAll
			}
			if !sp.Role.Valid() {
				return eim.Errorf(eim.EINVALID, "%s.role: %q is not all, controlplane or worker", f, sp.Role)
			}
			h, err := s.host(ctx, tx, sp.ID)
			if err != nil {
				return eim.Errorf(eim.ErrorCode(err), "%s.id: %s", f, eim.ErrorMessage(err))
			}
			if seen[h.ResourceID] {
				return eim.Errorf(eim.EINVALID, "%s.id: host %s is named twice", f, h.ResourceID)
			}
			seen[h.ResourceID] = true
			out = append(out, &eim.ClusterNode{HostID: h.ResourceID, Role: sp.Role})
		}
		return nil
	})
	return out, err
}

// host finds a host of the transaction's project by ID or UUID. One of
// another project is not found (404, as the original's), as one that does
// not exist; a string that is neither form is 400.
func (s *Service) host(ctx context.Context, tx eim.Tx, id string) (*eim.Host, error) {
	var h *eim.Host
	switch {
	case eim.ValidID(eim.KindHost, id):
		res, err := tx.Get(ctx, eim.KindHost, id)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, eim.Errorf(eim.ENOTFOUND, "host %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		h = res.(*eim.Host)
	case apiv2.UUID.MatchString(strings.Trim(id, "{}")):
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "uuid", Value: strings.Trim(id, "{}")}}, Limit: 1, NoTotal: true})
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return nil, eim.Errorf(eim.ENOTFOUND, "host %s not found (no host of the project has this UUID)", id)
		}
		h = items[0].(*eim.Host)
	default:
		return nil, eim.Errorf(eim.EINVALID, "%q is neither a host ID (host-…) nor a host UUID", id)
	}
	if h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted {
		return nil, eim.Errorf(eim.EINVALID, "host %s is being deleted or invalidated", h.ResourceID)
	}
	return h, nil
}

// templateOf resolves a cluster's template: "name-vX.Y.Z" (the
// original's form), a name (its latest version), or "" (the project's
// default).
func (s *Service) templateOf(ctx context.Context, project, ref string) (*eim.ClusterTemplate, error) {
	ts, err := s.o.Store.ClusterTemplates(ctx, project)
	if err != nil {
		return nil, err
	}
	var pick *eim.ClusterTemplate
	for _, t := range ts {
		switch {
		case ref == "" && t.Default:
			pick = t
		case ref != "" && (t.Name+"-"+t.Version == ref || t.Name == ref):
			pick = t // the latest of a name last
		}
	}
	if pick == nil {
		if ref == "" {
			return nil, eim.Errorf(eim.EINVALID, "template: the project has no default template: name one")
		}
		return nil, eim.Errorf(eim.EINVALID, "template: %q names no template of the project (name-vX.Y.Z, or a name)", ref)
	}
	if err := pick.Installable(); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "template: %s", eim.ErrorMessage(err))
	}
	return pick, nil
}

func randomName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "edge-" + hex.EncodeToString(b[:])
}

func (s *Service) createCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	var spec ClusterSpec
	if err := apiv2.Decode(r, &spec); err != nil {
		return err
	}
	if spec.Name == "" {
		spec.Name = randomName()
	}
	if err := checkClusterName("name", spec.Name); err != nil {
		return err
	}
	if len(spec.Nodes) == 0 {
		return eim.Errorf(eim.EINVALID, "nodes: at least one node is required")
	}
	if err := eim.CheckClusterLabels("labels", spec.Labels); err != nil {
		return err
	}
	nodes, err := s.resolveNodes(r.Context(), c.proj.Name, "nodes", spec.Nodes)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(nodes, func(n *eim.ClusterNode) bool { return n.Role.ControlPlane() }) {
		return eim.Errorf(eim.EINVALID, "nodes: at least one node must run the control plane (role all or controlplane)")
	}
	t, err := s.templateOf(r.Context(), c.proj.Name, spec.Template)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	cl := &eim.Cluster{ID: eim.NewID(eim.KindCluster), Project: c.proj.Name, Name: spec.Name, TemplateName: t.Name, TemplateVersion: t.Version, TemplateGen: 1,
		Labels: labels, Nodes: nodes}
	cl.JoinToken = s.o.Key.Seal([]byte(newJoinToken()), adJoin(cl))
	cl.Status = eim.ClusterStatus{KubernetesVersion: t.KubernetesVersion}
	now := s.o.Now()
	cl.Status.Lifecycle = eim.NewStatusText("provisioning", eim.StatusInProgress, now)
	cl.Status.Provider = eim.NewStatusText(fmt.Sprintf("in progress: 0 of %d nodes ready", len(nodes)), eim.StatusInProgress, now)
	if err := s.o.Store.CreateCluster(r.Context(), cl); err != nil {
		return err
	}
	s.log.Info("clusters: cluster created", "project", c.proj.Name, "cluster", cl.Name, "id", cl.ID, "nodes", len(nodes), "template", t.Name+"-"+t.Version, "by", c.p.Subject)
	// The original's words (its clients show them).
	apiv2.WriteJSON(w, http.StatusCreated, "successfully created cluster "+cl.Name)
	return nil
}

func checkClusterName(field, name string) error {
	if !eim.ValidClusterName(name) {
		return eim.Errorf(eim.EINVALID, "%s: %q is not a cluster name (letters, digits, '-' and '.', starting and ending with a letter or digit, at most 63)", field, name)
	}
	if eim.ValidID(eim.KindCluster, name) {
		return eim.Errorf(eim.EINVALID, "%s: %q has the form of a cluster ID: choose another name", field, name)
	}
	return nil
}

// cluster finds a cluster of the project by name (or ID).
func (s *Service) cluster(ctx context.Context, project, name string) (*eim.Cluster, error) {
	if !eim.ValidClusterName(name) {
		return nil, eim.Errorf(eim.EINVALID, "name: %q is not a cluster name", name)
	}
	return s.o.Store.FindCluster(ctx, project, name)
}

// Status is the original's GenericStatus.
type Status = eim.StatusText

// NodeStatus is a node's status as the original shows it.
type NodeStatus struct {
	Condition string `json:"condition"`
	Reason    string `json:"reason"`
	Timestamp string `json:"timestamp"`
}

// NodeInfo is a cluster's node as the API shows it.
type NodeInfo struct {
	ID     string          `json:"id"`
	Role   eim.ClusterRole `json:"role"`
	Status NodeStatus      `json:"status"`
}

// ClusterInfo is a cluster in the list.
type ClusterInfo struct {
	Name                string            `json:"name"`
	KubernetesVersion   string            `json:"kubernetesVersion"`
	Labels              map[string]string `json:"labels"`
	LifecyclePhase      Status            `json:"lifecyclePhase"`
	ProviderStatus      Status            `json:"providerStatus"`
	ControlPlaneReady   Status            `json:"controlPlaneReady"`
	InfrastructureReady Status            `json:"infrastructureReady"`
	NodeHealth          Status            `json:"nodeHealth"`
	NodeQuantity        int               `json:"nodeQuantity"`
}

// ClusterDetail is one cluster.
type ClusterDetail struct {
	ClusterInfo
	Template string     `json:"template"`
	Nodes    []NodeInfo `json:"nodes"`
}

func info(c *eim.Cluster) ClusterInfo {
	return ClusterInfo{
		Name: c.Name, KubernetesVersion: c.Status.KubernetesVersion, Labels: orEmpty(c.Labels),
		LifecyclePhase: shown(c.Status.Lifecycle), ProviderStatus: shown(c.Status.Provider), ControlPlaneReady: shown(c.Status.ControlPlane),
		InfrastructureReady: shown(c.Status.Infrastructure), NodeHealth: shown(c.Status.NodeHealth), NodeQuantity: len(liveNodes(c)),
	}
}

// shown is a status as the API shows it: one the reconciler has not set
// yet has the original's STATUS_INDICATION_UNSPECIFIED, not "", which is
// none of the enum's values.
func shown(st Status) Status {
	if st.Indicator == "" {
		st.Indicator = eim.StatusUnspecified
	}
	return st
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func detail(c *eim.Cluster) ClusterDetail {
	d := ClusterDetail{ClusterInfo: info(c), Template: c.TemplateName + "-" + c.TemplateVersion, Nodes: []NodeInfo{}}
	for _, n := range c.Nodes {
		d.Nodes = append(d.Nodes, NodeInfo{ID: n.HostID, Role: n.Role, Status: nodeStatus(c, n)})
	}
	return d
}

// nodeStatus is the original's condition of a node.
func nodeStatus(c *eim.Cluster, n *eim.ClusterNode) NodeStatus {
	st := NodeStatus{Reason: n.Report.Message}
	if !n.Report.At.IsZero() {
		st.Timestamp = n.Report.At.UTC().Format(time.RFC3339)
	}
	switch {
	case n.Removing:
		st.Condition = "STATUS_CONDITION_REMOVING"
	case active(c, n):
		st.Condition = "STATUS_CONDITION_READY"
	case failed(c, n):
		st.Condition = "STATUS_CONDITION_NOTREADY"
	case n.Plan.Gen > 0 || n.Report.State == "":
		st.Condition = "STATUS_CONDITION_PROVISIONING"
		if st.Reason == "" {
			st.Reason = "waiting for the node"
			if n.Plan.Gen == 0 {
				st.Reason = "waiting for the control plane"
			}
		}
	default:
		st.Condition = "STATUS_CONDITION_UNKNOWN"
	}
	return st
}

// ClusterList is the answer of GET /clusters.
type ClusterList struct {
	Clusters      []ClusterInfo `json:"clusters"`
	TotalElements int           `json:"totalElements"`
}

// clusterFields are what the clusters' filter and orderBy name.
var clusterFields = map[string]field[*eim.Cluster]{
	"name":              {get: func(c *eim.Cluster) string { return c.Name }},
	"kubernetesVersion": {get: func(c *eim.Cluster) string { return c.Status.KubernetesVersion }},
	"providerStatus":    {get: func(c *eim.Cluster) string { return c.Status.Provider.Message }},
	"lifecyclePhase":    {get: func(c *eim.Cluster) string { return c.Status.Lifecycle.Message }},
}

func (s *Service) listClusters(w http.ResponseWriter, r *http.Request, c *call) error {
	size, offset, err := page(r)
	if err != nil {
		return err
	}
	match, err := parseFilter(r.URL.Query().Get("filter"), clusterFields)
	if err != nil {
		return err
	}
	cs, err := s.o.Store.ListClusters(r.Context(), c.proj.Name)
	if err != nil {
		return err
	}
	cs = slices.DeleteFunc(cs, func(c *eim.Cluster) bool { return !match(c) })
	if err := orderBy(r.URL.Query().Get("orderBy"), clusterFields, cs); err != nil {
		return err
	}
	out := ClusterList{Clusters: []ClusterInfo{}, TotalElements: len(cs)}
	for _, c := range pageOf(cs, size, offset) {
		out.Clusters = append(out.Clusters, info(c))
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

// Summary is the answer of GET /clusters/summary.
type Summary struct {
	TotalClusters int `json:"totalClusters"`
	Ready         int `json:"ready"`
	Error         int `json:"error"`
	InProgress    int `json:"inProgress"`
	Unknown       int `json:"unknown"`
}

func (s *Service) summary(w http.ResponseWriter, r *http.Request, c *call) error {
	cs, err := s.o.Store.ListClusters(r.Context(), c.proj.Name)
	if err != nil {
		return err
	}
	out := Summary{TotalClusters: len(cs)}
	for _, c := range cs {
		switch c.Status.Provider.Indicator {
		case eim.StatusIdle:
			out.Ready++
		case eim.StatusError:
			out.Error++
		case eim.StatusInProgress:
			out.InProgress++
		default:
			out.Unknown++
		}
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) getCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	cl, err := s.cluster(r.Context(), c.proj.Name, r.PathValue("name"))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, detail(cl))
	return nil
}

func (s *Service) clusterOfNode(w http.ResponseWriter, r *http.Request, c *call) error {
	var hostID string
	err := s.o.Store.View(r.Context(), c.proj.Name, func(tx eim.Tx) error {
		h, err := s.host(r.Context(), tx, r.PathValue("nodeId"))
		if err != nil {
			return err
		}
		hostID = h.ResourceID
		return nil
	})
	if err != nil {
		return eim.Errorf(eim.ErrorCode(err), "nodeId: %s", eim.ErrorMessage(err))
	}
	cl, err := s.o.Store.ClusterOfHost(r.Context(), c.proj.Name, hostID)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, detail(cl))
	return nil
}

func (s *Service) deleteCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	cl, err := s.cluster(r.Context(), c.proj.Name, r.PathValue("name"))
	if err != nil {
		return err
	}
	_, err = s.o.Store.UpdateCluster(r.Context(), c.proj.Name, cl.ID, func(cur *eim.Cluster) error {
		cur.Deleting = true
		cur.ForceDelete = cur.ForceDelete || force
		return nil
	})
	if err != nil {
		return err
	}
	s.log.Info("clusters: cluster deletion", "project", c.proj.Name, "cluster", cl.Name, "force", force, "by", c.p.Subject)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, eim.Errorf(eim.EINVALID, "%s: %q is not true or false", name, v)
	}
	return b, nil
}

// update changes a cluster that is not being deleted.
func (s *Service) update(ctx context.Context, project, name string, fn func(*eim.Cluster) error) error {
	cl, err := s.cluster(ctx, project, name)
	if err != nil {
		return err
	}
	_, err = s.o.Store.UpdateCluster(ctx, project, cl.ID, func(cur *eim.Cluster) error {
		if cur.Deleting {
			return eim.Errorf(eim.EPRECONDITION, "cluster %s is being deleted", cur.Name)
		}
		return fn(cur)
	})
	return err
}

// putNodes makes the cluster's nodes those of the body: hosts added join,
// nodes left out are removed (drained first). A node's role does not
// change.
func (s *Service) putNodes(w http.ResponseWriter, r *http.Request, c *call) error {
	var specs []NodeSpec
	if err := apiv2.Decode(r, &specs); err != nil {
		return err
	}
	if len(specs) == 0 {
		return eim.Errorf(eim.EINVALID, "body: at least one node is required (delete the cluster to remove them all)")
	}
	want, err := s.resolveNodes(r.Context(), c.proj.Name, "body", specs)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(want, func(n *eim.ClusterNode) bool { return n.Role.ControlPlane() }) {
		return eim.Errorf(eim.EINVALID, "body: at least one node must run the control plane (role all or controlplane)")
	}
	err = s.update(r.Context(), c.proj.Name, r.PathValue("name"), func(cur *eim.Cluster) error {
		keep := map[string]bool{}
		for i, n := range want {
			keep[n.HostID] = true
			if old := cur.Node(n.HostID); old != nil {
				if old.Role != n.Role {
					return eim.Errorf(eim.EINVALID, "body[%d].role: host %s is a %s node; a role does not change (remove the node, then add it again)", i, n.HostID, old.Role)
				}
				old.Removing, old.Force = false, false
				if old.Plan.Removal {
					// Taken back before it left: it installs again.
					old.Plan = eim.NodePlan{Gen: old.Plan.Gen}
				}
				continue
			}
			cur.Nodes = append(cur.Nodes, n)
		}
		for _, n := range cur.Nodes {
			if !keep[n.HostID] && !n.Removing {
				n.Removing = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Service) removeNode(w http.ResponseWriter, r *http.Request, c *call) error {
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	id := r.PathValue("nodeId")
	var hostID string
	err = s.o.Store.View(r.Context(), c.proj.Name, func(tx eim.Tx) error {
		if eim.ValidID(eim.KindHost, id) {
			hostID = id // a host deleted since may still be a node
			return nil
		}
		h, err := s.host(r.Context(), tx, id)
		if err != nil {
			return err
		}
		hostID = h.ResourceID
		return nil
	})
	if err != nil {
		return eim.Errorf(eim.ErrorCode(err), "nodeId: %s", eim.ErrorMessage(err))
	}
	err = s.update(r.Context(), c.proj.Name, r.PathValue("name"), func(cur *eim.Cluster) error {
		n := cur.Node(hostID)
		if n == nil {
			return eim.Errorf(eim.ENOTFOUND, "host %s is not a node of cluster %s", hostID, cur.Name)
		}
		if n.Role.ControlPlane() {
			others := slices.ContainsFunc(cur.Nodes, func(o *eim.ClusterNode) bool { return o != n && !o.Removing && o.Role.ControlPlane() })
			workers := slices.ContainsFunc(cur.Nodes, func(o *eim.ClusterNode) bool { return o != n && !o.Removing })
			if !others && workers {
				return eim.Errorf(eim.EPRECONDITION, "host %s is the cluster's last control-plane node: remove the workers first, or delete the cluster", hostID)
			}
		}
		n.Removing = true
		n.Force = n.Force || force
		if !slices.ContainsFunc(cur.Nodes, func(o *eim.ClusterNode) bool { return !o.Removing }) {
			// The last node leaving deletes the cluster, as the original
			// does for its single-node clusters: none is left without
			// nodes, holding its template.
			cur.Deleting = true
			cur.ForceDelete = cur.ForceDelete || force
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// Labels is the body of PUT /clusters/{name}/labels.
type Labels struct {
	Labels map[string]string `json:"labels"`
}

func (s *Service) putLabels(w http.ResponseWriter, r *http.Request, c *call) error {
	var l Labels
	if err := apiv2.Decode(r, &l); err != nil {
		return err
	}
	if err := eim.CheckClusterLabels("labels", l.Labels); err != nil {
		return err
	}
	err := s.update(r.Context(), c.proj.Name, r.PathValue("name"), func(cur *eim.Cluster) error {
		cur.Labels = l.Labels
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// TemplateRef is the body of PUT /clusters/{name}/template.
type TemplateRef struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// putTemplate moves the cluster to a template (an upgrade, rolled one
// node at a time); the same template again retries what failed.
func (s *Service) putTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	var ref TemplateRef
	if err := apiv2.Decode(r, &ref); err != nil {
		return err
	}
	if ref.Name == "" {
		return eim.Errorf(eim.EINVALID, "name: is required")
	}
	if ref.Version == "" {
		return eim.Errorf(eim.EINVALID, "version: is required")
	}
	t, err := s.template(r.Context(), c.proj.Name, ref.Name, ref.Version)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return eim.Errorf(eim.EINVALID, "template %s version %s not found", ref.Name, ref.Version)
	}
	if err != nil {
		return err
	}
	if err := t.Installable(); err != nil {
		return err
	}
	err = s.update(r.Context(), c.proj.Name, r.PathValue("name"), func(cur *eim.Cluster) error {
		cur.TemplateName, cur.TemplateVersion = t.Name, t.Version
		cur.TemplateGen++
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
