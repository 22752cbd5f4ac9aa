package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
)

// The forms of the resource and settings pages write through EIM's own
// REST API, called in process with the session's bearer token: the API
// authenticates it again and makes every check it makes for any client
// (the role, the decoding of each field, the project not being deleted,
// the module that owns the operation running somewhere), and its audit
// records name the user. The UI adds nothing to what a user may do and
// cannot forget a check the API makes.

// apiCall sends method path (below /v1/projects/{project}) with body (nil:
// none) as JSON to the API and decodes a 2xx answer into out (nil: not
// read). An error answer comes back as an eim error with the API's code
// and message, which names the field at fault.
func (h *Handler) apiCall(ctx context.Context, r *http.Request, c *call, method, path string, body, out any) error {
	if h.api == nil {
		return eim.Errorf(eim.EUNIMPLEMENTED, "this server's UI has no API to write through")
	}
	return h.callAPI(ctx, r, c, h.api, method, "/v1/projects/"+url.PathEscape(c.project.Name)+path, body, out)
}

// v2Call is apiCall on the v2 API (clusters, connect): path is below
// /v2/projects/{project}.
func (h *Handler) v2Call(ctx context.Context, r *http.Request, c *call, method, path string, body, out any) error {
	if h.v2 == nil {
		return eim.Errorf(eim.EUNIMPLEMENTED, "this server's UI has no clusters API to call")
	}
	return h.callAPI(ctx, r, c, h.v2, method, "/v2/projects/"+url.PathEscape(c.project.Name)+path, body, out)
}

func (h *Handler) callAPI(ctx context.Context, r *http.Request, c *call, api http.Handler, method, target string, body, out any) error {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("ui: encode %s %s: %w", method, target, err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("ui: %s %s: %w", method, target, err)
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr // the API's per-client limit is the user's
	// A kubeconfig names the server as the user reached it.
	req.TLS = r.TLS
	for _, k := range []string{"X-Forwarded-Proto", "X-Forwarded-Host"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := &apiAnswer{header: http.Header{}}
	api.ServeHTTP(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 300 {
		var e struct{ Code, Message string }
		if json.Unmarshal(w.body.Bytes(), &e) != nil || e.Message == "" {
			return eim.Errorf(eim.EINTERNAL, "the API answered %d", w.status)
		}
		return eim.Errorf(codeOfStatus(w.status), "%s", e.Message)
	}
	if out == nil || w.body.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
		return fmt.Errorf("ui: decode the answer to %s %s: %w", method, target, err)
	}
	return nil
}

// codeOfStatus is the eim code of an API error's HTTP status, so that the
// page answers with the same status.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return eim.EINVALID
	case http.StatusUnauthorized:
		return eim.EUNAUTHORIZED
	case http.StatusForbidden:
		return eim.EFORBIDDEN
	case http.StatusNotFound:
		return eim.ENOTFOUND
	case http.StatusConflict:
		return eim.ECONFLICT
	case http.StatusPreconditionFailed:
		return eim.EPRECONDITION
	case http.StatusRequestEntityTooLarge:
		return eim.ETOOLARGE
	case http.StatusNotImplemented:
		return eim.EUNIMPLEMENTED
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return eim.EUNAVAILABLE
	}
	return eim.EINTERNAL
}

// fieldOf returns the field an API error message names ("name: must be …"
// names name), when it is one of fields, and the message.
func fieldOf(err error, fields []string) string {
	msg := eim.ErrorMessage(err)
	name, _, ok := strings.Cut(msg, ":")
	if !ok {
		return ""
	}
	name = strings.TrimSpace(name)
	for _, f := range fields {
		if f == name {
			return f
		}
	}
	return ""
}

// apiAnswer keeps the API's answer to an in-process call.
type apiAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *apiAnswer) Header() http.Header { return a.header }

func (a *apiAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *apiAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

// wireFields is the named members of res as the API reads them (the
// domain's JSON is the API's: the same names and enum spellings), for a
// create or a change of just those fields. A name res does not have is a
// mistake of this package.
func wireFields(res any, names ...string) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("ui: encode %T: %w", res, err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("ui: encode %T: %w", res, err)
	}
	out := make(map[string]json.RawMessage, len(names))
	for _, n := range names {
		v, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("ui: %T has no field %q", res, n)
		}
		out[n] = v
	}
	return out, nil
}

// apiCreate creates res through the API with the named fields (those
// left empty are not sent) and returns the new resource's ID.
func (h *Handler) apiCreate(r *http.Request, c *call, path string, res any, names ...string) (string, error) {
	body, err := wireFields(res, names...)
	if err != nil {
		return "", err
	}
	for n, v := range body {
		switch string(v) {
		case `""`, "null", "[]", "{}", "0", "false":
			delete(body, n)
		}
	}
	var out struct {
		ResourceID string `json:"resourceId"`
	}
	if err := h.apiCall(r.Context(), r, c, http.MethodPost, path, body, &out); err != nil {
		return "", err
	}
	return out.ResourceID, nil
}

// apiPatch changes the named fields of the resource at path through the
// API to res's values.
func (h *Handler) apiPatch(r *http.Request, c *call, path string, res any, names ...string) error {
	body, err := wireFields(res, names...)
	if err != nil {
		return err
	}
	return h.apiCall(r.Context(), r, c, http.MethodPatch, path, body, nil)
}
