package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
)

// The create-cluster form and the cluster templates page, both through
// the v2 API.

// templateList is GET /templates.
type templateList struct {
	DefaultTemplateInfo *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"defaultTemplateInfo"`
	TemplateInfoList []*eim.ClusterTemplate `json:"templateInfoList"`
	TotalElements    int                    `json:"totalElements"`
}

// isDefault reports whether t is the project's default template.
func (l *templateList) isDefault(t *eim.ClusterTemplate) bool {
	d := l.DefaultTemplateInfo
	return d != nil && d.Name == t.Name && d.Version == t.Version
}

// maxTemplates is how many templates the pages list (the API's largest
// page); a project holds a few.
const maxTemplates = 100

func (h *Handler) templates(r *http.Request, c *call) (*templateList, error) {
	var l templateList
	err := h.v2Call(r.Context(), r, c, http.MethodGet, "/templates?orderBy=name&pageSize="+strconv.Itoa(maxTemplates), nil, &l)
	return &l, err
}

func templatesURL(c *call) string { return "/ui/p/" + url.PathEscape(c.project.Name) + "/templates" }

// --- create a cluster

type clusterNewData struct {
	Name, Labels, More string
	Templates          []templateChoice
	Free               []freeHost
	Err                actionError
}

// ErrAt is the API's error on field ("" the form's own), or "".
func (d *clusterNewData) ErrAt(field string) string {
	if d.Err.Field == field && d.Err.Msg != "" {
		return d.Err.Msg
	}
	return ""
}

// newClusterData is the create form, filled with what form holds (nil:
// empty).
func (h *Handler) newClusterData(r *http.Request, c *call, form url.Values) (*clusterNewData, error) {
	if err := needClusters(c); err != nil {
		return nil, err
	}
	d := &clusterNewData{Name: form.Get("name"), Labels: form.Get("labels"), More: form.Get("more")}
	ts, err := h.templates(r, c)
	if err != nil {
		return nil, err
	}
	picked := form.Get("template")
	d.Templates = append(d.Templates, templateChoice{Value: "", Label: "the project's default", Selected: picked == ""})
	for _, t := range ts.TemplateInfoList {
		v := t.Name + "-" + t.Version
		label := v + " (Kubernetes " + t.KubernetesVersion + ")"
		if ts.isDefault(t) {
			label += " — default"
		}
		d.Templates = append(d.Templates, templateChoice{Value: v, Label: label, Selected: picked == v})
	}
	if d.Free, err = h.freeHosts(r.Context(), c, pickedRoles(form)); err != nil {
		return nil, err
	}
	return d, nil
}

func (h *Handler) newCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	if !c.canWrite {
		return eim.Errorf(eim.EFORBIDDEN, "your role in project %q is read-only", c.project.Name)
	}
	d, err := h.newClusterData(r, c, nil)
	if err != nil {
		return err
	}
	h.page(w, r, c, "clusternew", "New cluster", d)
	return nil
}

func (h *Handler) createCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	name := strings.TrimSpace(r.PostFormValue("name"))
	body := map[string]any{"name": name, "template": r.PostFormValue("template"), "nodes": pickedNodes(r.PostForm)}
	if l := parseLabels(r.PostFormValue("labels")); len(l) > 0 {
		body["labels"] = l
	}
	var created string
	apiErr := h.v2Call(r.Context(), r, c, http.MethodPost, "/clusters", body, &created)
	if apiErr == nil {
		// The answer is the original's "successfully created cluster NAME".
		created = strings.TrimPrefix(created, "successfully created cluster ")
		http.Redirect(w, r, clustersBase(c)+"?created="+url.QueryEscape(created), http.StatusSeeOther)
		return nil
	}
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.newClusterData(r, c, r.PostForm)
	if err != nil {
		return err
	}
	d.Err = actionError{Action: "create", Field: v2Field(apiErr, []string{"name", "template", "nodes", "labels"}), Msg: eim.ErrorMessage(apiErr)}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "clusternew", c.view("clusters", "New cluster", d))
	return nil
}

// --- templates

type templatesData struct {
	Rows  []templateRow
	Total int
	Doc   string // the create form's text (after an error)
	Err   actionError
	Msg   string
}

type templateRow struct {
	*eim.ClusterTemplate
	IsDefault bool
	Action    string // the row's form path (…/templates/NAME/VERSION)
}

// ErrAt is the API's error on a form ("create", or "delete"/"default"
// and a template's name-version), or "".
func (d *templatesData) ErrAt(action string) string {
	if d.Err.Action == action {
		return d.Err.Msg
	}
	return ""
}

func (h *Handler) templatesData(r *http.Request, c *call) (*templatesData, error) {
	if err := needClusters(c); err != nil {
		return nil, err
	}
	l, err := h.templates(r, c)
	if err != nil {
		return nil, err
	}
	d := &templatesData{Total: l.TotalElements}
	for _, t := range l.TemplateInfoList {
		d.Rows = append(d.Rows, templateRow{ClusterTemplate: t, IsDefault: l.isDefault(t),
			Action: templatesURL(c) + "/" + url.PathEscape(t.Name) + "/" + url.PathEscape(t.Version)})
	}
	return d, nil
}

func (h *Handler) clusterTemplates(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.templatesData(r, c)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	switch {
	case q.Get("created") != "":
		d.Msg = "Template " + q.Get("created") + " created."
	case q.Get("deleted") != "":
		d.Msg = "Template " + q.Get("deleted") + " deleted."
	case q.Get("default") != "":
		d.Msg = "Template " + q.Get("default") + " is the project's default now."
	}
	vw := c.view("clusters", "Cluster templates", d)
	vw.Live = true
	h.render(w, r, http.StatusOK, "clustertemplates", vw)
	return nil
}

// templateJSON turns the pasted document into JSON: JSON as it is, YAML
// converted (a template is JSON on the wire).
func templateJSON(doc string) (json.RawMessage, error) {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return nil, eim.Errorf(eim.EINVALID, "template: paste a template (JSON or YAML)")
	}
	if strings.HasPrefix(doc, "{") {
		if !json.Valid([]byte(doc)) {
			return nil, eim.Errorf(eim.EINVALID, "template: not valid JSON")
		}
		return json.RawMessage(doc), nil
	}
	var v any
	dec := yaml.NewDecoder(strings.NewReader(doc))
	if err := dec.Decode(&v); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "template: not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, eim.Errorf(eim.EINVALID, "template: want a mapping of the template's fields (name, version, kubernetesVersion, …)")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, eim.Errorf(eim.EINVALID, "template: a key is not a string")
	}
	return bytes.TrimSpace(b), nil
}

func (h *Handler) createTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	doc := r.PostFormValue("template")
	body, apiErr := templateJSON(doc)
	var t struct{ Name, Version string }
	if apiErr == nil {
		_ = json.Unmarshal(body, &t)
		apiErr = h.v2Call(r.Context(), r, c, http.MethodPost, "/templates", body, nil)
	}
	if apiErr == nil {
		http.Redirect(w, r, templatesURL(c)+"?created="+url.QueryEscape(t.Name+"-"+t.Version), http.StatusSeeOther)
		return nil
	}
	return h.renderTemplatesError(w, r, c, "create", doc, apiErr)
}

func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	name, version := r.PathValue("name"), r.PathValue("version")
	if err := h.v2Call(r.Context(), r, c, http.MethodDelete, "/templates/"+url.PathEscape(name)+"/"+url.PathEscape(version), nil, nil); err != nil {
		return h.renderTemplatesError(w, r, c, "delete "+name+"-"+version, "", err)
	}
	http.Redirect(w, r, templatesURL(c)+"?deleted="+url.QueryEscape(name+"-"+version), http.StatusSeeOther)
	return nil
}

func (h *Handler) defaultTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	name, version := r.PathValue("name"), r.PathValue("version")
	if err := h.v2Call(r.Context(), r, c, http.MethodPut, "/templates/"+url.PathEscape(name)+"/default", map[string]string{"version": version}, nil); err != nil {
		return h.renderTemplatesError(w, r, c, "default "+name+"-"+version, "", err)
	}
	http.Redirect(w, r, templatesURL(c)+"?default="+url.QueryEscape(name+"-"+version), http.StatusSeeOther)
	return nil
}

func (h *Handler) renderTemplatesError(w http.ResponseWriter, r *http.Request, c *call, action, doc string, apiErr error) error {
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.templatesData(r, c)
	if err != nil {
		return err
	}
	d.Doc, d.Err = doc, actionError{Action: action, Msg: eim.ErrorMessage(apiErr)}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "clustertemplates", c.view("clusters", "Cluster templates", d))
	return nil
}
