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

// The other resources of a project, read-only: a paged list per kind and
// a page per resource with every field, both from the kind's schema (so a
// field added to a kind shows without a change here). Writing them is the
// API's and the CLI's for now.

// resourceKind is a kind the resource pages show, and the fields its list
// shows besides the ID and the name (when the kind has one).
type resourceKind struct {
	Kind   eim.Kind
	Title  string
	Fields []string
}

var resourceKinds = []resourceKind{
	{eim.KindOS, "OS profiles", []string{"profileName", "profileVersion", "osType", "securityFeature", "architecture"}},
	{eim.KindOSUpdatePolicy, "OS update policies", []string{"updatePolicy", "targetOsId"}},
	{eim.KindOSUpdateRun, "OS update runs", []string{"status", "statusIndicator", "startTime", "endTime"}},
	{eim.KindInstance, "Instances", []string{"currentState", "provisioningStatus", "updateStatus", "hostID", "osID"}},
	{eim.KindTelemetryGroup, "Telemetry groups", []string{"collectorKind", "groups"}},
	{eim.KindTelemetryProfile, "Telemetry profiles", []string{"targetInstance", "targetSite", "targetRegion", "logLevel", "metricsInterval"}},
	{eim.KindLocalAccount, "Local accounts", []string{"username"}},
	{eim.KindCustomConfig, "Custom configs", []string{"description"}},
	{eim.KindProvider, "Providers", []string{"providerKind", "providerVendor", "apiEndpoint"}},
	{eim.KindWorkload, "Workloads", []string{"kind", "status", "externalId"}},
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
}

type resourceRow struct {
	ID, Link string
	Cells    []string
}

type resourceData struct {
	Kind   resourceKind
	ID     string
	Fields []fieldValue
}

type fieldValue struct{ Name, Value string }

// resources lists a kind (?kind=; none: the kinds).
func (h *Handler) resources(w http.ResponseWriter, r *http.Request, c *call) error {
	d := &resourcesData{Kinds: resourceKinds}
	k := r.URL.Query().Get("kind")
	if k == "" {
		h.page(w, r, c, "resources", "Resources", d)
		return nil
	}
	rk, ok := resourceKindOf(k)
	if !ok {
		return eim.Errorf(eim.ENOTFOUND, "no resource page for kind %q", k)
	}
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	if offset < 0 || offset > inventory.MaxOffset {
		return eim.Errorf(eim.EINVALID, "offset: want 0 to %d", inventory.MaxOffset)
	}
	page, err := h.inv.List(r.Context(), c.project.Name, rk.Kind, inventory.ListQuery{OrderBy: "resourceId", PageSize: 50, Offset: offset})
	if err != nil {
		return err
	}
	sc := eim.SchemaOf(rk.Kind)
	d.Kind, d.Total = rk, page.Total
	d.Columns = rk.Fields
	if _, ok := sc.Field("name"); ok {
		d.Columns = append([]string{"name"}, rk.Fields...)
	}
	base := "/ui/p/" + url.PathEscape(c.project.Name) + "/resources"
	for _, it := range page.Items {
		id := it.Base().ResourceID
		row := resourceRow{ID: id, Link: base + "/" + url.PathEscape(string(rk.Kind)) + "/" + url.PathEscape(id)}
		for _, f := range d.Columns {
			row.Cells = append(row.Cells, fieldText(sc, it, f))
		}
		d.Rows = append(d.Rows, row)
	}
	if offset > 0 {
		d.Prev = base + "?kind=" + url.QueryEscape(k) + "&offset=" + strconv.Itoa(max(0, offset-50))
	}
	if page.HasNext {
		d.Next = base + "?kind=" + url.QueryEscape(k) + "&offset=" + strconv.Itoa(offset+50)
	}
	h.page(w, r, c, "resources", rk.Title, d)
	return nil
}

// resource shows every field of one resource.
func (h *Handler) resource(w http.ResponseWriter, r *http.Request, c *call) error {
	rk, ok := resourceKindOf(r.PathValue("kind"))
	if !ok {
		return eim.Errorf(eim.ENOTFOUND, "no resource page for kind %q", r.PathValue("kind"))
	}
	id := r.PathValue("id")
	if !eim.ValidID(rk.Kind, id) {
		return eim.Errorf(eim.ENOTFOUND, "%s %q not found", rk.Kind, id)
	}
	res, err := h.inv.Get(r.Context(), c.project.Name, rk.Kind, id)
	if err != nil {
		return err
	}
	sc := eim.SchemaOf(rk.Kind)
	d := &resourceData{Kind: rk, ID: id}
	variant := sc.VariantOf(res)
	for _, f := range sc.Fields {
		if f.Alias || !f.In(variant) {
			continue
		}
		d.Fields = append(d.Fields, fieldValue{f.Name, fieldText(sc, res, f.Name)})
	}
	h.render(w, r, http.StatusOK, "resource", c.view("resources", rk.Title+": "+id, d))
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

type settingsData struct {
	Settings      eim.ProjectSettings
	EnrollmentSet bool
}

// settings shows the project's settings (the API changes them).
func (h *Handler) settings(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := h.inv.FindProject(r.Context(), c.project.Name)
	if err != nil {
		return err
	}
	d := &settingsData{Settings: p.Settings, EnrollmentSet: p.Settings.EnrollmentTokenHash != ""}
	h.render(w, r, http.StatusOK, "settings", c.view("resources", "Project settings", d))
	return nil
}
