package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The create and edit forms of the resource pages are derived from the
// kinds' schemas, as their lists are: a kind's writable fields (of the
// form's variant), each an input chosen by its Go type — a select for an
// enum or a reference to a resource of a small kind, lines for a list,
// a number, a check box, text. What the user typed is sent to the API as
// JSON of the same field names, so the API's error names a field of the
// form, and the page shows it there.

// formField is one input of a form.
type formField struct {
	Name    string // the JSON name: the input's name and id
	Label   string // what the label says; empty: Name
	Input   string // text | textarea | number | checkbox | select
	Value   string
	Checked bool
	Options []option
	Hint    string
	Error   string
}

type option struct {
	Value, Label string
	Selected     bool
}

// resForm is a create or edit form of a kind (of one of its variants).
type resForm struct {
	Title   string
	Action  string
	Variant string // the variant created (a hidden input), "" for none
	Submit  string
	Fields  []formField
	Error   string // an error that names no field of the form
}

// refKinds are the kinds a reference field picks from a list of; others
// (instances, hosts: up to the whole fleet) are typed as IDs.
var refKinds = []eim.Kind{eim.KindOS, eim.KindSite, eim.KindRegion, eim.KindTelemetryGroup, eim.KindLocalAccount, eim.KindCustomConfig, eim.KindProvider}

// maxRefOptions bounds a reference's list; beyond it, the field is typed.
const maxRefOptions = 500

// formFields returns the writable fields of kind rk in variant (those of
// every variant when ""); for an edit, those an update changes.
func formFields(rk resourceKind, variant string, edit bool) []*eim.Field {
	only, narrow := inventory.Updatable(rk.Kind)
	var out []*eim.Field
	for _, f := range eim.SchemaOf(rk.Kind).Fields {
		if !f.Writable || f.Alias || f.Name == "" || (variant != "" && f.Variant != "" && f.Variant != variant) {
			continue
		}
		if edit && narrow && !slices.Contains(only, f.Name) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// enumValue is an enum field's value as its select shows it: "" for the
// unspecified value (the first), which the select offers as the default.
func enumValue(fd *eim.Field, v string) string {
	if vals := reflect.Zero(fd.Type).Interface().(eim.Enum).Values(); len(vals) > 0 && v == vals[0] {
		return ""
	}
	return v
}

// oldValue is the stored value of fd in old as the form shows it.
func oldValue(fd *eim.Field, old eim.Resource) string {
	v := formValue(fd.Value(old))
	if fd.IsEnum() {
		v = enumValue(fd, v)
	}
	return v
}

// buildForm returns the form of rk's fields in variant, filled from old
// (an edit; nil: a create) and then from what the user sent (nil: none).
func (h *Handler) buildForm(r *http.Request, c *call, rk resourceKind, variant string, old eim.Resource, sent url.Values) (*resForm, error) {
	f := &resForm{Variant: variant}
	refs := map[eim.Kind][]eim.Resource{}
	for _, fd := range formFields(rk, variant, old != nil) {
		ff := formField{Name: fd.Name, Input: "text"}
		if old != nil {
			ff.Value = oldValue(fd, old)
		}
		t := fd.Type
		switch {
		case fd.IsEnum():
			ff.Input = "select"
			vals := reflect.Zero(t).Interface().(eim.Enum).Values()
			ff.Options = append(ff.Options, option{Value: "", Label: "— (the default)"})
			for _, v := range vals[1:] { // the first is UNSPECIFIED
				ff.Options = append(ff.Options, option{Value: v, Label: v})
			}
		case fd.Edge != nil && slices.Contains(refKinds, fd.Edge.Kind):
			items, ok := refs[fd.Edge.Kind]
			if !ok {
				var err error
				if items, err = h.refOptions(r, c, fd.Edge.Kind); err != nil {
					return nil, err
				}
				refs[fd.Edge.Kind] = items
			}
			if items == nil {
				ff.Hint = "an ID of a " + string(fd.Edge.Kind)
				break
			}
			ff.Input = "select"
			ff.Options = append(ff.Options, option{Value: "", Label: "— (none)"})
			rsc := eim.SchemaOf(fd.Edge.Kind)
			for _, it := range items {
				if fd.Variant != "" && rsc.Variant != nil && rsc.VariantOf(it) != fd.Variant {
					continue // a logs profile names a logs group
				}
				id := it.Base().ResourceID
				label := id
				if n := fieldText(rsc, it, "name"); n != "—" {
					label = n + " (" + id + ")"
				} else if n := fieldText(rsc, it, "username"); n != "—" {
					label = n + " (" + id + ")"
				}
				ff.Options = append(ff.Options, option{Value: id, Label: label})
			}
		case fd.Edge != nil:
			ff.Hint = "an ID of a " + string(fd.Edge.Kind)
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
			ff.Input, ff.Hint = "textarea", "one per line"
		case t.Kind() == reflect.Bool:
			ff.Input, ff.Checked = "checkbox", ff.Value == "true"
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
			ff.Input = "number"
		case slices.Contains(rk.Long, fd.Name):
			ff.Input = "textarea"
		}
		if sent != nil {
			ff.Value = strings.TrimSpace(sent.Get(fd.Name))
			ff.Checked = sent.Get(fd.Name) != ""
		}
		for i := range ff.Options {
			ff.Options[i].Selected = ff.Options[i].Value == ff.Value
		}
		f.Fields = append(f.Fields, ff)
	}
	return f, nil
}

// refOptions lists the project's resources of kind k for a reference's
// select; nil when there are more than maxRefOptions.
func (h *Handler) refOptions(r *http.Request, c *call, k eim.Kind) ([]eim.Resource, error) {
	order := "resourceId"
	if _, ok := eim.SchemaOf(k).Field("name"); ok {
		order = "name, resourceId"
	}
	var out []eim.Resource
	for offset := 0; ; offset += inventory.MaxPageSize {
		page, err := h.inv.List(r.Context(), c.project.Name, k, inventory.ListQuery{OrderBy: order, PageSize: inventory.MaxPageSize, Offset: offset})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if len(out) > maxRefOptions {
			return nil, nil
		}
		if !page.HasNext {
			return out, nil
		}
	}
}

// formValue is a field's value as its input shows it.
func formValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return ""
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return strings.Join(parts, "\n")
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return v.String()
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			return ""
		}
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 {
			return ""
		}
		return strconv.FormatUint(v.Uint(), 10)
	}
	return ""
}

// formBody turns what the user sent into the API's JSON body: for a create
// (old nil) the fields given, for an edit those changed. A value the page
// cannot read as its field's type is an error on that field.
func formBody(rk resourceKind, variant string, old eim.Resource, sent url.Values) (map[string]any, map[string]string) {
	body, errs := map[string]any{}, map[string]string{}
	for _, fd := range formFields(rk, variant, old != nil) {
		raw := strings.TrimSpace(sent.Get(fd.Name))
		t := fd.Type
		if t.Kind() == reflect.Bool {
			raw = strconv.FormatBool(sent.Get(fd.Name) != "")
		}
		if old != nil {
			if raw == oldValue(fd, old) {
				continue
			}
		} else if raw == "" || (t.Kind() == reflect.Bool && raw == "false") {
			continue
		}
		switch {
		case t.Kind() == reflect.Slice:
			lines := []string{}
			for l := range strings.SplitSeq(strings.ReplaceAll(raw, "\r\n", "\n"), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					lines = append(lines, l)
				}
			}
			body[fd.Name] = lines
		case t.Kind() == reflect.Bool:
			body[fd.Name] = raw == "true"
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
			if raw == "" {
				body[fd.Name] = 0
				continue
			}
			n, err := strconv.ParseUint(raw, 10, 64)
			if err != nil {
				errs[fd.Name] = fmt.Sprintf("%s: want a whole number, not %q", fd.Name, raw)
				continue
			}
			body[fd.Name] = json.Number(strconv.FormatUint(n, 10))
		default:
			body[fd.Name] = raw
		}
	}
	return body, errs
}

// setErrors places errors on their fields; the rest go to the form.
func (f *resForm) setErrors(errs map[string]string) {
	for i := range f.Fields {
		if e, ok := errs[f.Fields[i].Name]; ok {
			f.Fields[i].Error = e
			delete(errs, f.Fields[i].Name)
		}
	}
	for _, e := range errs {
		f.Error = e
	}
}

// setAPIError places an error the API answered: on the field its message
// names, else on the form.
func (f *resForm) setAPIError(err error) {
	names := make([]string, len(f.Fields))
	for i, fd := range f.Fields {
		names[i] = fd.Name
	}
	if n := fieldOf(err, names); n != "" {
		f.setErrors(map[string]string{n: eim.ErrorMessage(err)})
		return
	}
	f.Error = eim.ErrorMessage(err)
}
