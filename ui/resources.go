package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The other resources of a project: a paged list per kind and a page per
// resource with every field, both from the kind's schema (so a field added
// to a kind shows without a change here); for the kinds the API creates,
// a create form per API type (forms.go), and an edit form where the API
// changes them, and a delete button — for users with the write role only.

// resourceKind is a kind the resource pages show, and the fields its list
// shows besides the ID and the name (when the kind has one).
type resourceKind struct {
	Kind   eim.Kind
	Title  string
	Fields []string
	// Types are the kind's API types the pages create and delete
	// through: one, or one per variant (the telemetry kinds); none for a
	// kind the pages only show.
	Types []apiType
	// Edit: the API changes its resources (PATCH).
	Edit bool
	// Long are the text fields entered on several lines.
	Long []string
}

// apiType is an API type of a kind: its variant ("" for a kind without
// variants), what a create form is called and its path below the project.
type apiType struct {
	Variant, Title, Path string
}

func oneType(title, path string) []apiType { return []apiType{{Title: title, Path: path}} }

var resourceKinds = []resourceKind{
	{Kind: eim.KindOS, Title: "OS profiles", Fields: []string{"profileName", "profileVersion", "osType", "securityFeature", "architecture"},
		Types: oneType("New OS profile", "/compute/os"), Edit: true, Long: []string{"description", "metadata", "tlsCaCert"}},
	{Kind: eim.KindOSUpdatePolicy, Title: "OS update policies", Fields: []string{"updatePolicy", "targetOsId"},
		Types: oneType("New OS update policy", "/os-update-policies"), Long: []string{"description", "updatePackages"}},
	{Kind: eim.KindOSUpdateRun, Title: "OS update runs", Fields: []string{"status", "statusIndicator", "startTime", "endTime"}},
	{Kind: eim.KindInstance, Title: "Instances", Fields: []string{"currentState", "provisioningStatus", "updateStatus", "hostID", "osID"}},
	{Kind: eim.KindTelemetryGroup, Title: "Telemetry groups", Fields: []string{"collectorKind", "groups"},
		Types: []apiType{
			{string(eim.TelemetryLogs), "New logs group", "/telemetry/groups/logs"},
			{string(eim.TelemetryMetrics), "New metrics group", "/telemetry/groups/metrics"},
		}},
	{Kind: eim.KindTelemetryProfile, Title: "Telemetry profiles", Fields: []string{"targetInstance", "targetSite", "targetRegion", "logLevel", "metricsInterval"},
		Types: []apiType{
			{string(eim.TelemetryLogs), "New logs profile", "/telemetry/profiles/logs"},
			{string(eim.TelemetryMetrics), "New metrics profile", "/telemetry/profiles/metrics"},
		}, Edit: true},
	{Kind: eim.KindLocalAccount, Title: "Local accounts", Fields: []string{"username"},
		Types: oneType("New local account", "/localAccounts"), Long: []string{"sshKey"}},
	{Kind: eim.KindCustomConfig, Title: "Custom configs", Fields: []string{"description"},
		Types: oneType("New custom config", "/customConfigs"), Long: []string{"config", "description"}},
	{Kind: eim.KindProvider, Title: "Providers", Fields: []string{"providerKind", "providerVendor", "apiEndpoint"},
		Types: oneType("New provider", "/providers"), Long: []string{"config"}},
	{Kind: eim.KindWorkload, Title: "Workloads", Fields: []string{"kind", "status", "externalId"}},
}

// typeOf returns rk's API type of variant.
func (rk resourceKind) typeOf(variant string) (apiType, bool) {
	for _, t := range rk.Types {
		if t.Variant == variant {
			return t, true
		}
	}
	return apiType{}, false
}

func resourceKindOf(k string) (resourceKind, bool) {
	for _, rk := range resourceKinds {
		if string(rk.Kind) == k {
			return rk, true
		}
	}
	return resourceKind{}, false
}

type resourcesData struct {
	Kinds   []resourceKind
	Kind    resourceKind
	Columns []string
	Rows    []resourceRow
	Total   int
	Prev    string
	Next    string
	Forms   []*resForm // create forms (the write role only)
	Msg     string
}

type resourceRow struct {
	ID, Link string
	Cells    []string
}

type resourceData struct {
	Kind   resourceKind
	ID     string
	Fields []fieldValue
	Edit   *resForm // the write role, and a kind the API changes
	Delete string   // the delete form's action ("": none)
	Error  string
	Msg    string
}

type fieldValue struct{ Name, Value string }

func (h *Handler) resourcesBase(c *call) string {
	return "/ui/p/" + url.PathEscape(c.project.Name) + "/resources"
}

// resources lists a kind (?kind=; none: the kinds).
func (h *Handler) resources(w http.ResponseWriter, r *http.Request, c *call) error {
	k := r.URL.Query().Get("kind")
	if k == "" {
		h.page(w, r, c, "resources", "Resources", &resourcesData{Kinds: resourceKinds})
		return nil
	}
	rk, ok := resourceKindOf(k)
	if !ok {
		return eim.Errorf(eim.ENOTFOUND, "no resource page for kind %q", k)
	}
	d, err := h.resourcesData(r, c, rk)
	if err != nil {
		return err
	}
	if id := r.URL.Query().Get("created"); id != "" {
		d.Msg = "Created " + id + "."
	}
	if id := r.URL.Query().Get("deleted"); id != "" {
		d.Msg = "Deleted " + id + "."
	}
	h.page(w, r, c, "resources", rk.Title, d)
	return nil
}

// resourcesData is a page of rk's list and, for a writer, its empty
// create forms.
func (h *Handler) resourcesData(r *http.Request, c *call, rk resourceKind) (*resourcesData, error) {
	d := &resourcesData{Kinds: resourceKinds}
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	if offset < 0 || offset > inventory.MaxOffset {
		return nil, eim.Errorf(eim.EINVALID, "offset: want 0 to %d", inventory.MaxOffset)
	}
	page, err := h.inv.List(r.Context(), c.project.Name, rk.Kind, inventory.ListQuery{OrderBy: "resourceId", PageSize: 50, Offset: offset})
	if err != nil {
		return nil, err
	}
	sc := eim.SchemaOf(rk.Kind)
	d.Kind, d.Total = rk, page.Total
	d.Columns = rk.Fields
	if _, ok := sc.Field("name"); ok {
		d.Columns = append([]string{"name"}, rk.Fields...)
	}
	base := h.resourcesBase(c)
	for _, it := range page.Items {
		id := it.Base().ResourceID
		row := resourceRow{ID: id, Link: base + "/" + url.PathEscape(string(rk.Kind)) + "/" + url.PathEscape(id)}
		for _, f := range d.Columns {
			row.Cells = append(row.Cells, fieldText(sc, it, f))
		}
		d.Rows = append(d.Rows, row)
	}
	k := string(rk.Kind)
	if offset > 0 {
		d.Prev = base + "?kind=" + url.QueryEscape(k) + "&offset=" + strconv.Itoa(max(0, offset-50))
	}
	if page.HasNext {
		d.Next = base + "?kind=" + url.QueryEscape(k) + "&offset=" + strconv.Itoa(offset+50)
	}
	if c.canWrite {
		for _, t := range rk.Types {
			f, err := h.buildForm(r, c, rk, t.Variant, nil, nil)
			if err != nil {
				return nil, err
			}
			f.Title, f.Submit, f.Action = t.Title, "Create", base+"/"+url.PathEscape(k)
			d.Forms = append(d.Forms, f)
		}
	}
	return d, nil
}

// createResource sends a create form to the API; its errors are shown
// on the form, beside the field they name.
func (h *Handler) createResource(w http.ResponseWriter, r *http.Request, c *call) error {
	rk, ok := resourceKindOf(r.PathValue("kind"))
	if !ok {
		return eim.Errorf(eim.ENOTFOUND, "no resource page for kind %q", r.PathValue("kind"))
	}
	variant := r.PostFormValue("variant")
	t, ok := rk.typeOf(variant)
	if !ok {
		return eim.Errorf(eim.EINVALID, "%s: the pages create no %q", rk.Kind, variant)
	}
	body, errs := formBody(rk, variant, nil, r.PostForm)
	var out struct {
		ResourceID string `json:"resourceId"`
	}
	var apiErr error
	if len(errs) == 0 {
		apiErr = h.apiCall(r.Context(), r, c, http.MethodPost, t.Path, body, &out)
		if apiErr == nil {
			http.Redirect(w, r, h.resourcesBase(c)+"?kind="+url.QueryEscape(string(rk.Kind))+"&created="+url.QueryEscape(out.ResourceID), http.StatusSeeOther)
			return nil
		}
		if statusOf(apiErr) == http.StatusInternalServerError {
			return apiErr
		}
	}
	d, err := h.resourcesData(r, c, rk)
	if err != nil {
		return err
	}
	status := http.StatusBadRequest
	for _, f := range d.Forms {
		if f.Variant != variant {
			continue
		}
		filled, err := h.buildForm(r, c, rk, variant, nil, r.PostForm)
		if err != nil {
			return err
		}
		*f = *fillForm(f, filled)
		if apiErr != nil {
			f.setAPIError(apiErr)
			status = statusOf(apiErr)
		} else {
			f.setErrors(errs)
		}
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, status, "resources", c.view("resources", rk.Title, d))
	return nil
}

// fillForm is the form f with the inputs of filled (what the user sent).
func fillForm(f, filled *resForm) *resForm {
	out := *f
	out.Fields = filled.Fields
	return &out
}

// resource shows every field of one resource, and a writer's edit and
// delete forms.
func (h *Handler) resource(w http.ResponseWriter, r *http.Request, c *call) error {
	rk, res, err := h.findResource(r, c)
	if err != nil {
		return err
	}
	d, err := h.resourceData(r, c, rk, res, nil)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("changed") != "" {
		d.Msg = "Changed."
	}
	h.render(w, r, http.StatusOK, "resource", c.view("resources", rk.Title+": "+d.ID, d))
	return nil
}

func (h *Handler) findResource(r *http.Request, c *call) (resourceKind, eim.Resource, error) {
	rk, ok := resourceKindOf(r.PathValue("kind"))
	if !ok {
		return rk, nil, eim.Errorf(eim.ENOTFOUND, "no resource page for kind %q", r.PathValue("kind"))
	}
	id := r.PathValue("id")
	if !eim.ValidID(rk.Kind, id) {
		return rk, nil, eim.Errorf(eim.ENOTFOUND, "%s %q not found", rk.Kind, id)
	}
	res, err := h.inv.Get(r.Context(), c.project.Name, rk.Kind, id)
	return rk, res, err
}

// resourceData is the page of res; sent, when set, fills its edit form.
func (h *Handler) resourceData(r *http.Request, c *call, rk resourceKind, res eim.Resource, sent url.Values) (*resourceData, error) {
	sc := eim.SchemaOf(rk.Kind)
	id := res.Base().ResourceID
	d := &resourceData{Kind: rk, ID: id}
	variant := sc.VariantOf(res)
	for _, f := range sc.Fields {
		if f.Alias || !f.In(variant) {
			continue
		}
		d.Fields = append(d.Fields, fieldValue{f.Name, fieldText(sc, res, f.Name)})
	}
	if _, ok := rk.typeOf(variant); !ok || !c.canWrite {
		return d, nil
	}
	self := h.resourcesBase(c) + "/" + url.PathEscape(string(rk.Kind)) + "/" + url.PathEscape(id)
	d.Delete = self + "/delete"
	if rk.Edit {
		f, err := h.buildForm(r, c, rk, variant, res, sent)
		if err != nil {
			return nil, err
		}
		f.Title, f.Submit, f.Action = "Change", "Save", self
		d.Edit = f
	}
	return d, nil
}

// editResource sends the fields the user changed to the API (PATCH).
func (h *Handler) editResource(w http.ResponseWriter, r *http.Request, c *call) error {
	rk, res, err := h.findResource(r, c)
	if err != nil {
		return err
	}
	variant := eim.SchemaOf(rk.Kind).VariantOf(res)
	t, ok := rk.typeOf(variant)
	if !ok || !rk.Edit {
		return eim.Errorf(eim.EINVALID, "%s: the pages do not change these", rk.Kind)
	}
	id := res.Base().ResourceID
	body, errs := formBody(rk, variant, res, r.PostForm)
	var apiErr error
	if len(errs) == 0 {
		if len(body) == 0 {
			apiErr = eim.Errorf(eim.EINVALID, "nothing to change: no field differs from what is stored")
		} else {
			apiErr = h.apiCall(r.Context(), r, c, http.MethodPatch, t.Path+"/"+url.PathEscape(id), body, nil)
		}
		if apiErr == nil {
			http.Redirect(w, r, h.resourcesBase(c)+"/"+url.PathEscape(string(rk.Kind))+"/"+url.PathEscape(id)+"?changed=1", http.StatusSeeOther)
			return nil
		}
		if statusOf(apiErr) == http.StatusInternalServerError {
			return apiErr
		}
	}
	d, err := h.resourceData(r, c, rk, res, r.PostForm)
	if err != nil {
		return err
	}
	status := http.StatusBadRequest
	if apiErr != nil {
		d.Edit.setAPIError(apiErr)
		status = statusOf(apiErr)
	} else {
		d.Edit.setErrors(errs)
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, status, "resource", c.view("resources", rk.Title+": "+id, d))
	return nil
}

// deleteResource deletes through the API.
func (h *Handler) deleteResource(w http.ResponseWriter, r *http.Request, c *call) error {
	rk, res, err := h.findResource(r, c)
	if err != nil {
		return err
	}
	t, ok := rk.typeOf(eim.SchemaOf(rk.Kind).VariantOf(res))
	if !ok {
		return eim.Errorf(eim.EINVALID, "%s: the pages do not delete these", rk.Kind)
	}
	id := res.Base().ResourceID
	apiErr := h.apiCall(r.Context(), r, c, http.MethodDelete, t.Path+"/"+url.PathEscape(id), nil, nil)
	if apiErr == nil {
		http.Redirect(w, r, h.resourcesBase(c)+"?kind="+url.QueryEscape(string(rk.Kind))+"&deleted="+url.QueryEscape(id), http.StatusSeeOther)
		return nil
	}
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.resourceData(r, c, rk, res, nil)
	if err != nil {
		return err
	}
	d.Error = eim.ErrorMessage(apiErr)
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "resource", c.view("resources", rk.Title+": "+id, d))
	return nil
}

// fieldText is a field's value as text: scalars as they are, the rest as
// JSON; "—" for an absent field or an empty value.
func fieldText(sc *eim.Schema, r eim.Resource, name string) string {
	f, ok := sc.Field(name)
	if !ok || !f.In(sc.VariantOf(r)) {
		return "—"
	}
	v := f.Value(r)
	if v.IsZero() {
		return "—"
	}
	switch v.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return fmt.Sprint(v.Interface())
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(b)
}
