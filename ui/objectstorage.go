package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// The project's object storage (docs/objectstorage.md) on the settings
// page: the S3 bucket its devices' workloads upload to, read and written
// through the objectstorage module's API (…/objectstorage). The secret
// key is write-only: never answered, never shown, kept when the field is
// left empty.

type objectStorageData struct {
	S    *eim.ObjectStorageView // nil: none (the embedded store)
	Note string                 // why it could not be read
	// Form is the form's values (the stored setting's, or what was sent
	// and refused with Err).
	Form    eim.ObjectStorageInput
	Err     string
	MaxFile string // the largest file in words
}

func (h *Handler) objectStorageOf(r *http.Request, c *call) *objectStorageData {
	d := &objectStorageData{}
	var v eim.ObjectStorageView
	err := h.apiCall(r.Context(), r, c, http.MethodGet, "/objectstorage", nil, &v)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		d.Form.PathStyle = true
	case err != nil:
		d.Note = eim.ErrorMessage(err)
	default:
		d.S = &v
		d.MaxFile = humanBytes(uint64(max(v.MaxFileSize, 0)))
		d.Form = eim.ObjectStorageInput{Endpoint: v.Endpoint, Bucket: v.Bucket, KeyPrefix: v.KeyPrefix, Region: v.Region,
			PathStyle: v.PathStyle, AccessKeyID: v.AccessKeyID, CACert: v.CACert, MaxFileSize: v.MaxFileSize}
	}
	return d
}

func settingsURL(c *call) string { return "/ui/p/" + url.PathEscape(c.project.Name) + "/settings" }

func (h *Handler) saveObjectStorage(w http.ResponseWriter, r *http.Request, c *call) error {
	in := eim.ObjectStorageInput{Endpoint: strings.TrimSpace(r.PostFormValue("endpoint")), Bucket: strings.TrimSpace(r.PostFormValue("bucket")),
		KeyPrefix: strings.TrimSpace(r.PostFormValue("keyPrefix")), Region: strings.TrimSpace(r.PostFormValue("region")),
		PathStyle: r.PostFormValue("pathStyle") != "", AccessKeyID: strings.TrimSpace(r.PostFormValue("accessKeyId")),
		CACert: strings.TrimSpace(r.PostFormValue("caCert"))}
	var apiErr error
	if s := strings.TrimSpace(r.PostFormValue("maxFileSize")); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			apiErr = eim.Errorf(eim.EINVALID, "maxFileSize: %q is not a number of bytes", s)
		}
		in.MaxFileSize = n
	}
	if sk := r.PostFormValue("secretAccessKey"); sk != "" {
		in.SecretAccessKey = &sk
	}
	if apiErr == nil {
		apiErr = h.apiCall(r.Context(), r, c, http.MethodPut, "/objectstorage", in, nil)
	}
	if apiErr == nil {
		http.Redirect(w, r, settingsURL(c)+"?storage=saved#storage", http.StatusSeeOther)
		return nil
	}
	in.SecretAccessKey = nil // never sent back to the browser
	return h.settingsStorageError(w, r, c, &in, apiErr)
}

func (h *Handler) deleteObjectStorage(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := h.apiCall(r.Context(), r, c, http.MethodDelete, "/objectstorage", nil, nil); err != nil {
		return h.settingsStorageError(w, r, c, nil, err)
	}
	http.Redirect(w, r, settingsURL(c)+"?storage=removed#storage", http.StatusSeeOther)
	return nil
}

// settingsStorageError shows the settings page again with the API's error
// beside the object storage form, what was typed (in, when set) kept.
func (h *Handler) settingsStorageError(w http.ResponseWriter, r *http.Request, c *call, in *eim.ObjectStorageInput, apiErr error) error {
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.settingsData(r, c, nil)
	if err != nil {
		return err
	}
	if d.Storage == nil {
		d.Storage = &objectStorageData{}
	}
	d.Storage.Err = eim.ErrorMessage(apiErr)
	if in != nil {
		d.Storage.Form = *in
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "settings", c.view("settings", "Project settings", d))
	return nil
}
