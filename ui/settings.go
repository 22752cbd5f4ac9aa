package ui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// The project's settings: shown to readers, changed by writers through
// the API's PATCH …/settings. The form's inputs are the API's members,
// derived from eim.ProjectSettings (whose JSON names they are), so a
// setting added there shows here and the API's errors name an input.

type settingsData struct {
	Settings      eim.ProjectSettings
	EnrollmentSet bool
	Form          *resForm // the write role only
	Token         string   // a new enrollment token, shown this once
	Msg           string
	// Storage is the project's object storage while the objectstorage
	// module is deployed (nil otherwise).
	Storage    *objectStorageData
	StorageMsg string
}

// settingRefs are the settings that name resources, and their kinds.
var settingRefs = map[string]eim.Kind{
	"defaultOsId":            eim.KindOS,
	"defaultLocalAccountId":  eim.KindLocalAccount,
	"defaultCustomConfigIds": eim.KindCustomConfig,
}

// settingLabels are the settings' labels in the form, as the page's list
// names them.
var settingLabels = map[string]string{
	"defaultOsId":                  "Zero-touch default OS",
	"defaultLocalAccountId":        "Default local account",
	"defaultCustomConfigIds":       "Default custom configs",
	"autoOnboardEnrolled":          "Onboard devices that present the enrollment token (else register them)",
	"heartbeatIntervalSeconds":     "Heartbeat interval",
	"heartbeatTimeoutSeconds":      "Heartbeat timeout",
	"osSecurityFeatureEnable":      "OS security feature on zero-touch instances",
	"exporterPerHostOff":           "Per-host metrics off",
	"edgeWorkloadsAllowPrivileged": "Allow privileged containers and the host network in edge workloads",
	"powerPolicy":                  "Power policy of hosts with a BMC (ALWAYS_ON powers a host found off on again; REPORT, or empty, only shows it)",
	"description":                  "Project description (its display name in the original's web UI)",
}

// settingFields are the settings the form changes: every member of
// eim.ProjectSettings but the enrollment token's hash (its own buttons).
func settingFields() []reflect.StructField {
	var out []reflect.StructField
	t := reflect.TypeFor[eim.ProjectSettings]()
	for i := range t.NumField() {
		f := t.Field(i)
		if name := jsonName(f); name != "" && !eim.SecretName(name) {
			out = append(out, f)
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if n == "-" {
		return ""
	}
	return n
}

func (h *Handler) settings(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.settingsData(r, c, nil)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("changed") != "" {
		d.Msg = "Saved."
	}
	switch r.URL.Query().Get("storage") {
	case "saved":
		d.StorageMsg = "Object storage saved; its check's outcome is below."
	case "removed":
		d.StorageMsg = "Object storage removed: devices upload to the embedded store."
	}
	h.render(w, r, http.StatusOK, "settings", c.view("settings", "Project settings", d))
	return nil
}

// settingsData reads the settings afresh; sent, when set, fills the form.
func (h *Handler) settingsData(r *http.Request, c *call, sent url.Values) (*settingsData, error) {
	p, err := h.inv.FindProject(r.Context(), c.project.Name)
	if err != nil {
		return nil, err
	}
	d := &settingsData{Settings: p.Settings, EnrollmentSet: p.Settings.EnrollmentTokenHash != ""}
	if c.modules["objectstorage"] {
		d.Storage = h.objectStorageOf(r, c)
	}
	if !c.canWrite {
		return d, nil
	}
	f := &resForm{Title: "Change the settings", Submit: "Save", Action: "/ui/p/" + url.PathEscape(c.project.Name) + "/settings"}
	cur := reflect.ValueOf(p.Settings)
	for _, sf := range settingFields() {
		name := jsonName(sf)
		ff := formField{Name: name, Label: settingLabels[name], Value: formValue(cur.FieldByIndex(sf.Index))}
		switch k := settingRefs[name]; {
		case k != "":
			items, err := h.refOptions(r, c, k)
			if err != nil {
				return nil, err
			}
			if items == nil {
				ff.Input, ff.Hint = "text", "an ID of a "+string(k)
				if sf.Type.Kind() == reflect.Slice {
					ff.Input, ff.Hint = "textarea", "IDs of "+string(k)+", one per line"
				}
				break
			}
			ff.Input = "select"
			if sf.Type.Kind() == reflect.Slice {
				ff.Input, ff.Hint = "multiple", "any number"
			} else {
				ff.Options = append(ff.Options, option{Value: "", Label: "— (none)"})
			}
			rsc := eim.SchemaOf(k)
			for _, it := range items {
				id := it.Base().ResourceID
				label := id
				for _, n := range []string{"name", "username"} {
					if v := fieldText(rsc, it, n); v != "—" {
						label = v + " (" + id + ")"
						break
					}
				}
				ff.Options = append(ff.Options, option{Value: id, Label: label})
			}
		case sf.Type.Kind() == reflect.Bool:
			ff.Input, ff.Checked = "checkbox", ff.Value == "true"
		case sf.Type.Kind() == reflect.Uint32:
			ff.Input, ff.Hint = "number", "seconds; empty: the server's default"
		default:
			ff.Input = "text"
		}
		if sent != nil {
			ff.Value = strings.TrimSpace(sent.Get(name))
			ff.Checked = sent.Get(name) != ""
			if ff.Input == "multiple" {
				ff.Value = strings.Join(sent[name], "\n")
			}
		}
		chosen := strings.Split(ff.Value, "\n")
		for i := range ff.Options {
			ff.Options[i].Selected = slices.Contains(chosen, ff.Options[i].Value)
		}
		f.Fields = append(f.Fields, ff)
	}
	d.Form = f
	return d, nil
}

// saveSettings sends the settings the user changed, or the enrollment
// token's change (a button of its own), to the API.
func (h *Handler) saveSettings(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := h.inv.FindProject(r.Context(), c.project.Name)
	if err != nil {
		return err
	}
	body, errs := map[string]any{}, map[string]string{}
	if tok := r.PostFormValue("enrollmentToken"); tok != "" {
		body["enrollmentToken"] = tok // the API checks it is "new" or "none"
	} else {
		cur := reflect.ValueOf(p.Settings)
		for _, sf := range settingFields() {
			name := jsonName(sf)
			old := formValue(cur.FieldByIndex(sf.Index))
			switch sf.Type.Kind() {
			case reflect.Bool:
				if v := r.PostFormValue(name) != ""; strconv.FormatBool(v) != old {
					body[name] = v
				}
			case reflect.Slice:
				var ids []string
				for _, v := range r.PostForm[name] {
					for l := range strings.SplitSeq(v, "\n") {
						if l = strings.TrimSpace(l); l != "" {
							ids = append(ids, l)
						}
					}
				}
				if strings.Join(ids, "\n") != old {
					body[name] = append([]string{}, ids...)
				}
			case reflect.Uint32:
				v := strings.TrimSpace(r.PostFormValue(name))
				if v == old {
					continue
				}
				if v == "" {
					v = "0"
				}
				if _, err := strconv.ParseUint(v, 10, 32); err != nil {
					errs[name] = name + ": want a whole number of seconds, not " + strconv.Quote(v)
					continue
				}
				body[name] = json.Number(v)
			default:
				if v := strings.TrimSpace(r.PostFormValue(name)); v != old {
					body[name] = v
				}
			}
		}
	}
	var apiErr error
	if len(errs) == 0 {
		if len(body) == 0 {
			apiErr = eim.Errorf(eim.EINVALID, "nothing to change: no setting differs from what is stored")
		} else {
			var out struct {
				EnrollmentToken string `json:"enrollmentToken"`
			}
			apiErr = h.apiCall(r.Context(), r, c, http.MethodPatch, "/settings", body, &out)
			if apiErr == nil && out.EnrollmentToken != "" {
				// Shown this once: rendered, never put in a URL.
				d, err := h.settingsData(r, c, nil)
				if err != nil {
					return err
				}
				d.Token = out.EnrollmentToken
				c.projects = h.readableProjects(r, c.p)
				h.render(w, r, http.StatusOK, "settings", c.view("settings", "Project settings", d))
				return nil
			}
		}
		if apiErr == nil {
			http.Redirect(w, r, "/ui/p/"+url.PathEscape(c.project.Name)+"/settings?changed=1", http.StatusSeeOther)
			return nil
		}
		if statusOf(apiErr) == http.StatusInternalServerError {
			return apiErr
		}
	}
	d, err := h.settingsData(r, c, r.PostForm)
	if err != nil {
		return err
	}
	status := http.StatusBadRequest
	if apiErr != nil {
		d.Form.setAPIError(apiErr)
		status = statusOf(apiErr)
	} else {
		d.Form.setErrors(errs)
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, status, "settings", c.view("settings", "Project settings", d))
	return nil
}
