package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The clusters pages (while the clusters module is deployed): the
// summary and list of a project's clusters, a cluster's page with its
// nodes and, for writers, its actions, the create form and the
// templates. Every read and write goes through the v2 API (v2Call) with
// the session's token, so the API's own checks — the cluster roles, the
// decoding of each field, a host already in a cluster — apply, and its
// error is shown beside the field it names. The page's list, sorting and
// filter are the API's own (filter, orderBy, pageSize, offset).

// clusterStatus is a cluster as the API shows it (GET /clusters,
// GET /clusters/{name}): the UI's own decoding of the v2 wire format.
type clusterStatus struct {
	Name                string            `json:"name"`
	KubernetesVersion   string            `json:"kubernetesVersion"`
	Labels              map[string]string `json:"labels"`
	LifecyclePhase      eim.StatusText    `json:"lifecyclePhase"`
	ProviderStatus      eim.StatusText    `json:"providerStatus"`
	ControlPlaneReady   eim.StatusText    `json:"controlPlaneReady"`
	InfrastructureReady eim.StatusText    `json:"infrastructureReady"`
	NodeHealth          eim.StatusText    `json:"nodeHealth"`
	NodeQuantity        int               `json:"nodeQuantity"`
	Template            string            `json:"template"`
	Nodes               []clusterNode     `json:"nodes"`
}

type clusterNode struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Status struct {
		Condition string `json:"condition"`
		Reason    string `json:"reason"`
		Timestamp string `json:"timestamp"`
	} `json:"status"`
	// Host is the host's name ("" when it is gone), for the page.
	Host string `json:"-"`
}

// Removing reports whether the node is leaving its cluster.
func (n clusterNode) Removing() bool { return n.Status.Condition == "STATUS_CONDITION_REMOVING" }

// conditionClass is the indicator of a node's condition.
func (n clusterNode) Indicator() eim.StatusIndication {
	switch n.Status.Condition {
	case "STATUS_CONDITION_READY":
		return eim.StatusIdle
	case "STATUS_CONDITION_NOTREADY":
		return eim.StatusError
	case "STATUS_CONDITION_PROVISIONING", "STATUS_CONDITION_REMOVING":
		return eim.StatusInProgress
	}
	return eim.StatusUnspecified
}

// clusterSummary is GET /clusters/summary.
type clusterSummary struct {
	TotalClusters int `json:"totalClusters"`
	Ready         int `json:"ready"`
	Error         int `json:"error"`
	InProgress    int `json:"inProgress"`
	Unknown       int `json:"unknown"`
}

// connection is a cluster's tunnel (GET /connect/clusters).
type connection struct {
	Cluster   string `json:"cluster"`
	Connected bool   `json:"connected"`
}

// clusterCount is a bar of the summary, as the overview's host states:
// its count, its share of the clusters and its list ("" none).
type clusterCount struct {
	Key, Label string
	Count, Pct int
	Link       string
}

// clusterColumn is a sortable column of the list: its orderBy field.
type clusterColumn struct{ Field, Label string }

var clusterColumns = []clusterColumn{
	{"name", "Name"}, {"kubernetesVersion", "Kubernetes version"}, {"lifecyclePhase", "Lifecycle"}, {"providerStatus", "Provider status"},
}

const clusterPage = 25

type clustersData struct {
	Summary     clusterSummary
	States      []clusterCount
	Rows        []clusterRow
	Total       int
	Filter      string
	FilterError string
	Heads       []headLink
	Prev, Next  string
	Msg         string
	Connect     bool // the connect module is deployed: the tunnel column
}

type clusterRow struct {
	clusterStatus
	Link string
	Conn string // "connected", "disconnected", "no tunnel" ("" without connect)
}

// headLink is a column heading that sorts the list.
type headLink struct {
	Label, Link, Sorted string // Sorted: "ascending", "descending" or ""
}

// clustersBase is the clusters list's path.
func clustersBase(c *call) string { return "/ui/p/" + url.PathEscape(c.project.Name) + "/clusters" }

func clusterURL(c *call, name string) string { return clustersBase(c) + "/" + url.PathEscape(name) }

// needClusters refuses a clusters page while the module is not deployed.
func needClusters(c *call) error {
	if !c.modules["clusters"] {
		return eim.Errorf(eim.ENOTFOUND, "the clusters module does not run in this deployment")
	}
	return nil
}

func (h *Handler) clusters(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := needClusters(c); err != nil {
		return err
	}
	q := r.URL.Query()
	d := &clustersData{Filter: strings.TrimSpace(q.Get("filter")), Connect: c.modules["connect"]}
	sort, dir := q.Get("sort"), q.Get("dir")
	if !slices.ContainsFunc(clusterColumns, func(cc clusterColumn) bool { return cc.Field == sort }) {
		sort = "name"
	}
	if dir != "desc" {
		dir = "asc"
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	offset = max(0, offset)
	if err := h.v2Call(r.Context(), r, c, http.MethodGet, "/clusters/summary", nil, &d.Summary); err != nil {
		return err
	}
	s := d.Summary
	base := clustersBase(c)
	link := func(f string) string { return base + "?filter=" + url.QueryEscape(f) }
	d.States = []clusterCount{
		{Key: "total", Label: "Total", Count: s.TotalClusters, Pct: pct(s.TotalClusters, s.TotalClusters), Link: base},
		{Key: "ready", Label: "Ready", Count: s.Ready, Pct: pct(s.Ready, s.TotalClusters), Link: link("providerStatus=ready")},
		{Key: "inprogress", Label: "In progress", Count: s.InProgress, Pct: pct(s.InProgress, s.TotalClusters), Link: link(`providerStatus="in progress*"`)},
		{Key: "error", Label: "Error", Count: s.Error, Pct: pct(s.Error, s.TotalClusters), Link: link("providerStatus=error*")},
		{Key: "unknown", Label: "Unknown", Count: s.Unknown, Pct: pct(s.Unknown, s.TotalClusters)},
	}
	v := url.Values{"pageSize": {strconv.Itoa(clusterPage)}, "offset": {strconv.Itoa(offset)}, "orderBy": {sort + " " + dir}}
	if d.Filter != "" {
		v.Set("filter", d.Filter)
	}
	var list struct {
		Clusters      []clusterStatus `json:"clusters"`
		TotalElements int             `json:"totalElements"`
	}
	status := http.StatusOK
	if err := h.v2Call(r.Context(), r, c, http.MethodGet, "/clusters?"+v.Encode(), nil, &list); err != nil {
		if eim.ErrorCode(err) != eim.EINVALID {
			return err
		}
		// The API's word on the filter (or offset), beside the box.
		d.FilterError, status = eim.ErrorMessage(err), http.StatusBadRequest
	}
	var conns map[string]connection
	if d.Connect {
		conns = h.connections(r, c)
	}
	for _, cl := range list.Clusters {
		row := clusterRow{clusterStatus: cl, Link: clusterURL(c, cl.Name)}
		if d.Connect {
			row.Conn = connText(conns, cl.Name)
		}
		d.Rows = append(d.Rows, row)
	}
	d.Total = list.TotalElements
	state := func(off int, srt, dr string) string {
		u := url.Values{"sort": {srt}, "dir": {dr}}
		if d.Filter != "" {
			u.Set("filter", d.Filter)
		}
		if off > 0 {
			u.Set("offset", strconv.Itoa(off))
		}
		return base + "?" + u.Encode()
	}
	for _, cc := range clusterColumns {
		hl := headLink{Label: cc.Label, Link: state(0, cc.Field, "asc")}
		if cc.Field == sort {
			hl.Sorted = map[string]string{"asc": "ascending", "desc": "descending"}[dir]
			if dir == "asc" {
				hl.Link = state(0, cc.Field, "desc")
			}
		}
		d.Heads = append(d.Heads, hl)
	}
	if offset > 0 {
		d.Prev = state(max(0, offset-clusterPage), sort, dir)
	}
	if offset+len(list.Clusters) < d.Total {
		d.Next = state(offset+clusterPage, sort, dir)
	}
	if n := q.Get("created"); n != "" {
		d.Msg = "Cluster " + n + " created: its nodes install now."
	}
	if n := q.Get("deleted"); n != "" {
		d.Msg = "Cluster " + n + " is being deleted: its nodes uninstall first."
	}
	vw := c.view("clusters", "Clusters", d)
	vw.Live = true
	h.render(w, r, status, "clusters", vw)
	return nil
}

// connections are the project's tunnels by cluster, from the connect
// module's API; nil when it cannot say (the page shows "—").
func (h *Handler) connections(r *http.Request, c *call) map[string]connection {
	var out struct {
		Clusters []connection `json:"clusters"`
	}
	if err := h.v2Call(r.Context(), r, c, http.MethodGet, "/connect/clusters", nil, &out); err != nil {
		return nil
	}
	m := map[string]connection{}
	for _, cn := range out.Clusters {
		m[cn.Cluster] = cn
	}
	return m
}

func connText(conns map[string]connection, name string) string {
	if conns == nil {
		return "—"
	}
	cn, ok := conns[name]
	switch {
	case !ok:
		return "no tunnel"
	case cn.Connected:
		return "connected"
	}
	return "disconnected"
}

// --- a cluster's page

// actionError is the API's error on one of a cluster page's forms: the
// form (Action) and the field it names ("" when none of the form's).
type actionError struct{ Action, Field, Msg string }

type clusterData struct {
	Cluster   clusterStatus
	Labels    []labelKV
	LabelText string // the labels form's text (what was typed, after an error)
	Conn      string
	Connect   bool
	Err       actionError
	Msg       string
	// For writers: the hosts that may join, and the templates to move to.
	Free      []freeHost
	Templates []templateChoice
}

type labelKV struct{ Key, Value string }

// ErrAt is the API's error on form action's field ("" for the form
// itself), or "".
func (d *clusterData) ErrAt(action, field string) string {
	if d.Err.Action == action && d.Err.Field == field {
		return d.Err.Msg
	}
	return ""
}

// freeHost is a host of the project in no cluster, for the pickers.
type freeHost struct {
	ID, Name string
	// Status is the host's liveness as the agent last reported it (Running,
	// No Connection …), with its indicator: whether it can take a node,
	// which its desired state does not tell.
	Status, StatusClass, StatusTitle string
	Role                             string // the role picked (a form sent back)
	Picked                           bool
}

type templateChoice struct {
	Value, Label string
	Selected     bool
}

func (h *Handler) cluster(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.clusterData(r, c, r.PathValue("name"))
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("done") {
	case "nodes":
		d.Msg = "Nodes added: they install now."
	case "remove":
		d.Msg = "The node is leaving the cluster."
	case "upgrade":
		d.Msg = "Upgrade started: the nodes move one at a time."
	case "labels":
		d.Msg = "Labels saved."
	}
	vw := c.view("clusters", "Cluster "+d.Cluster.Name, d)
	vw.Live = true
	h.render(w, r, http.StatusOK, "cluster", vw)
	return nil
}

// clusterData reads a cluster's page: the cluster, its hosts' names, its
// tunnel, and for a writer the free hosts and the templates.
func (h *Handler) clusterData(r *http.Request, c *call, name string) (*clusterData, error) {
	if err := needClusters(c); err != nil {
		return nil, err
	}
	ctx := r.Context()
	d := &clusterData{Connect: c.modules["connect"]}
	if err := h.v2Call(ctx, r, c, http.MethodGet, "/clusters/"+url.PathEscape(name), nil, &d.Cluster); err != nil {
		return nil, err
	}
	for i, n := range d.Cluster.Nodes {
		if c.clustersOnly {
			break // a cluster role reads no hosts: the nodes by ID
		}
		if res, err := h.inv.Get(ctx, c.project.Name, eim.KindHost, n.ID); err == nil {
			d.Cluster.Nodes[i].Host = res.(*eim.Host).Name
		}
	}
	keys := make([]string, 0, len(d.Cluster.Labels))
	for k := range d.Cluster.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var lt strings.Builder
	for _, k := range keys {
		d.Labels = append(d.Labels, labelKV{k, d.Cluster.Labels[k]})
		fmt.Fprintf(&lt, "%s=%s\n", k, d.Cluster.Labels[k])
	}
	d.LabelText = lt.String()
	if d.Connect {
		d.Conn = connText(h.connections(r, c), d.Cluster.Name)
	}
	if c.canWrite {
		var err error
		if d.Free, err = h.freeHosts(ctx, c, nil); err != nil {
			return nil, err
		}
		ts, err := h.templates(r, c)
		if err != nil {
			return nil, err
		}
		for _, t := range ts.TemplateInfoList {
			v := t.Name + "-" + t.Version
			label := v + " (Kubernetes " + t.KubernetesVersion + ")"
			if v == d.Cluster.Template {
				label += " — current"
			}
			d.Templates = append(d.Templates, templateChoice{Value: t.Name + "/" + t.Version, Label: label, Selected: v == d.Cluster.Template})
		}
	}
	return d, nil
}

// maxFreeHosts bounds a picker; beyond, hosts are named in its text box.
const maxFreeHosts = 100

// freeHosts are up to maxFreeHosts hosts of the project, by name, that
// are in no cluster and not being deleted or invalidated; picked are the
// form's choices (host → role) to keep.
func (h *Handler) freeHosts(ctx context.Context, c *call, picked map[string]string) ([]freeHost, error) {
	if c.clustersOnly {
		return nil, nil // a cluster role reads no hosts: they are named in the text box
	}
	member := map[string]bool{}
	if h.store != nil {
		cs, err := h.store.ListClusters(ctx, c.project.Name)
		if err != nil {
			return nil, err
		}
		for _, cl := range cs {
			for _, n := range cl.Nodes {
				member[n.HostID] = true
			}
		}
	}
	var out []freeHost
	for offset := 0; len(out) < maxFreeHosts && offset < 10*inventory.MaxPageSize; offset += inventory.MaxPageSize {
		page, err := h.inv.List(ctx, c.project.Name, eim.KindHost, inventory.ListQuery{OrderBy: "name", PageSize: inventory.MaxPageSize, Offset: offset})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			ho := it.(*eim.Host)
			if member[ho.ResourceID] || ho.DesiredState == eim.HostStateDeleted || ho.DesiredState == eim.HostStateUntrusted {
				continue
			}
			role, ok := picked[ho.ResourceID]
			out = append(out, freeHost{ID: ho.ResourceID, Name: ho.Name, Role: role, Picked: ok,
				Status: cmp.Or(ho.HostStatus, "—"), StatusClass: indicatorClass(ho.HostStatusIndicator), StatusTitle: indicatorText(ho.HostStatusIndicator)})
			if len(out) == maxFreeHosts {
				break
			}
		}
		if !page.HasNext {
			break
		}
	}
	return out, nil
}

// renderClusterError shows a cluster's page with the API's error beside
// the form and field it names, or answers err when it is no form's.
func (h *Handler) renderClusterError(w http.ResponseWriter, r *http.Request, c *call, name, action string, fields []string, apiErr error) error {
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.clusterData(r, c, name)
	if err != nil {
		return err
	}
	d.Err = actionError{Action: action, Field: v2Field(apiErr, fields), Msg: eim.ErrorMessage(apiErr)}
	if action == "labels" {
		d.LabelText = r.PostFormValue("labels")
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "cluster", c.view("clusters", "Cluster "+d.Cluster.Name, d))
	return nil
}

// v2Field is the field of fields that an API error names: its message
// starts with the field ("labels: …"), an element of it ("nodes[2].id: …")
// or the body of a list ("body[0].id: …", the nodes' PUT).
func v2Field(err error, fields []string) string {
	msg := eim.ErrorMessage(err)
	name, _, ok := strings.Cut(msg, ":")
	if !ok || strings.ContainsAny(name, " \"") {
		return ""
	}
	if i := strings.IndexAny(name, "[."); i > 0 {
		name = name[:i]
	}
	if name == "body" {
		name = "nodes"
	}
	if slices.Contains(fields, name) {
		return name
	}
	return ""
}

// nodeSpec is a node as the v2 API takes it.
type nodeSpec struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// pickedNodes reads a form's nodes: the hosts ticked in the picker with
// their roles ("node", "role-ID"), then the text box's lines, HOST or
// HOST:ROLE (as `eim cluster create --node` takes them).
func pickedNodes(form url.Values) []nodeSpec {
	var out []nodeSpec
	for _, id := range form["node"] {
		out = append(out, nodeSpec{ID: id, Role: form.Get("role-" + id)})
	}
	for line := range strings.SplitSeq(form.Get("more"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		id, role, _ := strings.Cut(line, ":")
		out = append(out, nodeSpec{ID: strings.TrimSpace(id), Role: strings.TrimSpace(role)})
	}
	return out
}

// pickedRoles are the picker's ticked hosts and roles, to show again.
func pickedRoles(form url.Values) map[string]string {
	m := map[string]string{}
	for _, id := range form["node"] {
		m[id] = form.Get("role-" + id)
	}
	return m
}

// parseLabels reads key=value lines; a line without "=" is the API's to
// refuse, as a key with an empty value.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// addNodes sends the cluster's nodes with the picked hosts added (PUT
// nodes takes the whole list: the nodes kept are those not leaving).
func (h *Handler) addNodes(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	var cl clusterStatus
	if err := h.v2Call(r.Context(), r, c, http.MethodGet, "/clusters/"+url.PathEscape(name), nil, &cl); err != nil {
		return err
	}
	add := pickedNodes(r.PostForm)
	var body []nodeSpec
	for _, n := range cl.Nodes {
		if !n.Removing() {
			body = append(body, nodeSpec{ID: n.ID, Role: n.Role})
		}
	}
	var apiErr error
	if len(add) == 0 {
		apiErr = eim.Errorf(eim.EINVALID, "nodes: pick a host to add")
	} else {
		// The added nodes first, so that the API's body[i] is the i-th
		// host the user named.
		apiErr = h.v2Call(r.Context(), r, c, http.MethodPut, "/clusters/"+url.PathEscape(name)+"/nodes", append(add, body...), nil)
	}
	if apiErr != nil {
		return h.renderClusterError(w, r, c, name, "nodes", []string{"nodes"}, apiErr)
	}
	http.Redirect(w, r, clusterURL(c, name)+"?done=nodes", http.StatusSeeOther)
	return nil
}

func (h *Handler) removeNode(w http.ResponseWriter, r *http.Request, c *call) error {
	name, id := r.PathValue("name"), r.PathValue("id")
	path := "/clusters/" + url.PathEscape(name) + "/nodes/" + url.PathEscape(id)
	if r.PostFormValue("force") != "" {
		path += "?force=true"
	}
	if err := h.v2Call(r.Context(), r, c, http.MethodDelete, path, nil, nil); err != nil {
		return h.renderClusterError(w, r, c, name, "remove-"+id, []string{"force"}, err)
	}
	http.Redirect(w, r, clusterURL(c, name)+"?done=remove", http.StatusSeeOther)
	return nil
}

func (h *Handler) upgradeCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	tn, tv, _ := strings.Cut(r.PostFormValue("template"), "/")
	body := map[string]string{"name": tn, "version": tv}
	if err := h.v2Call(r.Context(), r, c, http.MethodPut, "/clusters/"+url.PathEscape(name)+"/template", body, nil); err != nil {
		return h.renderClusterError(w, r, c, name, "upgrade", []string{"name", "version", "template"}, err)
	}
	http.Redirect(w, r, clusterURL(c, name)+"?done=upgrade", http.StatusSeeOther)
	return nil
}

func (h *Handler) clusterLabels(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	body := map[string]any{"labels": parseLabels(r.PostFormValue("labels"))}
	if err := h.v2Call(r.Context(), r, c, http.MethodPut, "/clusters/"+url.PathEscape(name)+"/labels", body, nil); err != nil {
		return h.renderClusterError(w, r, c, name, "labels", []string{"labels"}, err)
	}
	http.Redirect(w, r, clusterURL(c, name)+"?done=labels", http.StatusSeeOther)
	return nil
}

func (h *Handler) deleteCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	path := "/clusters/" + url.PathEscape(name)
	if r.PostFormValue("force") != "" {
		path += "?force=true"
	}
	if err := h.v2Call(r.Context(), r, c, http.MethodDelete, path, nil, nil); err != nil {
		return h.renderClusterError(w, r, c, name, "delete", []string{"force"}, err)
	}
	http.Redirect(w, r, clustersBase(c)+"?deleted="+url.QueryEscape(name), http.StatusSeeOther)
	return nil
}

// kubeconfig downloads the connect module's kubeconfig of the cluster,
// issued to the user (a short-lived token with their roles on the
// project).
func (h *Handler) kubeconfig(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := needClusters(c); err != nil {
		return err
	}
	name := r.PathValue("name")
	if !c.modules["connect"] {
		return eim.Errorf(eim.EUNIMPLEMENTED, "kubeconfigs come from the connect module, which does not run in this deployment")
	}
	var out struct {
		Kubeconfig string `json:"kubeconfig"`
	}
	if err := h.v2Call(r.Context(), r, c, http.MethodGet, "/clusters/"+url.PathEscape(name)+"/kubeconfigs", nil, &out); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "no-store")
	// The name is a DNS label (the API checked it): safe in the header.
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.kubeconfig.yaml"`)
	_, _ = w.Write([]byte(out.Kubeconfig))
	return nil
}
