// Package apiv2 holds what the modules serving the original's v2 JSON
// APIs (connect, clusters) share: the caller's authentication, the project
// a request names — by name or ID in the path (/v2/projects/{projectName}/…)
// or by ID in the Activeprojectid header (/v2/…), as the original's
// clients send it — the cluster roles, and the error answers
// ({code, message}, as the v1 API's).
package apiv2

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/eimhq/eim"
)

// Authenticator verifies a user's bearer token (auth.Verifier).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*eim.Principal, error)
}

// Projects finds projects (eim.Store).
type Projects interface {
	FindProject(ctx context.Context, name string) (*eim.Project, error)
	FindProjectByID(ctx context.Context, id string) (*eim.Project, error)
}

// ProjectHeader carries the project's ID on the /v2/… paths.
const ProjectHeader = "Activeprojectid"

// Authenticate returns the caller of a request with a bearer token.
func Authenticate(r *http.Request, a Authenticator) (*eim.Principal, error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "missing bearer token")
	}
	p, err := a.Authenticate(r.Context(), strings.TrimSpace(tok))
	if err != nil || p == nil {
		if eim.ErrorCode(err) == eim.EUNAUTHORIZED {
			return nil, err
		}
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
	}
	return p, nil
}

// UUID matches a project ID.
var UUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Project returns the project a request names: the path's {projectName}
// (a name, or an ID), else the Activeprojectid header (an ID). A project
// that does not exist is EFORBIDDEN, as one the caller may not see, so
// that names cannot be probed.
func Project(r *http.Request, ps Projects) (*eim.Project, error) {
	name := r.PathValue("projectName")
	byID := UUID.MatchString(name)
	if name == "" {
		name = strings.TrimSpace(r.Header.Get(ProjectHeader))
		if name == "" {
			return nil, eim.Errorf(eim.EINVALID, "%s: the header naming the project (its ID) is required on /v2/ paths", ProjectHeader)
		}
		if !UUID.MatchString(name) {
			return nil, eim.Errorf(eim.EINVALID, "%s: %q is not a project ID (a UUID)", ProjectHeader, name)
		}
		byID = true
	}
	var proj *eim.Project
	var err error
	if byID {
		proj, err = ps.FindProjectByID(r.Context(), name)
	} else {
		proj, err = ps.FindProject(r.Context(), name)
	}
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, eim.Errorf(eim.EFORBIDDEN, "no access to project %q", name)
	}
	return proj, err
}

// ClusterAccess checks the caller's role on the project's clusters for a
// request of method: reads need a read role (the project's or a cluster
// role), anything else a write role.
func ClusterAccess(p *eim.Principal, proj *eim.Project, method string) error {
	read := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
	if p.CanWriteClusters(proj) || (read && p.CanReadClusters(proj)) {
		return nil
	}
	if p.CanReadClusters(proj) {
		return eim.Errorf(eim.EFORBIDDEN, "%s needs a write role on project %q (%s)", method, proj.Name, eim.ClusterRoleName(proj, true))
	}
	return eim.Errorf(eim.EFORBIDDEN, "no access to the clusters of project %q", proj.Name)
}

// TemplateAccess checks the caller's role on the project's cluster
// templates for a request of method: reads need a role that reads the
// project's clusters or the template read role (<project>_cl-tpl-r),
// anything else one that changes them or the template write role
// (_cl-tpl-rw), as the original's cluster manager took them.
func TemplateAccess(p *eim.Principal, proj *eim.Project, method string) error {
	read := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
	if p.CanWriteTemplates(proj) || (read && p.CanReadTemplates(proj)) {
		return nil
	}
	if p.CanReadTemplates(proj) {
		key := proj.ID
		if key == "" {
			key = proj.Name
		}
		return eim.Errorf(eim.EFORBIDDEN, "%s needs a write role on project %q (%s or %s_cl-tpl-rw)", method, proj.Name, eim.ClusterRoleName(proj, true), key)
	}
	return eim.Errorf(eim.EFORBIDDEN, "no access to the cluster templates of project %q", proj.Name)
}

// errorBody is the API's error shape.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

var statuses = map[string]struct {
	name   string
	status int
}{
	eim.EINVALID:       {"InvalidArgument", http.StatusBadRequest},
	eim.ENOTFOUND:      {"NotFound", http.StatusNotFound},
	eim.ECONFLICT:      {"AlreadyExists", http.StatusConflict},
	eim.EPRECONDITION:  {"FailedPrecondition", http.StatusConflict},
	eim.EUNAUTHORIZED:  {"Unauthenticated", http.StatusUnauthorized},
	eim.EFORBIDDEN:     {"PermissionDenied", http.StatusForbidden},
	eim.EUNAVAILABLE:   {"Unavailable", http.StatusServiceUnavailable},
	eim.ETOOLARGE:      {"InvalidArgument", http.StatusRequestEntityTooLarge},
	eim.EUNIMPLEMENTED: {"Unimplemented", http.StatusNotImplemented},
}

// Status is the HTTP status of an error.
func Status(err error) int {
	if s, ok := statuses[eim.ErrorCode(err)]; ok {
		return s.status
	}
	return http.StatusInternalServerError
}

// WriteError answers err as {code, message}; an internal error's details
// are not shown.
func WriteError(w http.ResponseWriter, err error) {
	s, ok := statuses[eim.ErrorCode(err)]
	msg := eim.ErrorMessage(err)
	if !ok {
		s.name, s.status, msg = "Internal", http.StatusInternalServerError, "internal error"
	}
	if s.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	WriteJSON(w, s.status, errorBody{Code: s.name, Message: msg})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// MaxBody bounds a request's body.
const MaxBody = 1 << 20

// Decode reads a JSON body into v. Members v does not have are ignored,
// as the original's gateway ignores them (its clients send the members of
// their own versions of the document).
func Decode(r *http.Request, v any) error { return decode(r, v, false) }

// DecodeStrict reads a JSON body into v and refuses members v does not
// have, naming them, so that a misspelt field is not silently dropped: for
// EIM's own operations, which no client of the original calls (the v1 API
// refuses unknown members alike).
func DecodeStrict(r *http.Request, v any) error { return decode(r, v, true) }

func decode(r *http.Request, v any, strict bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return eim.Errorf(eim.EINVALID, "Content-Type: %q, want application/json", ct)
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, MaxBody))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case asErr(err, &mbe):
			return eim.Errorf(eim.ETOOLARGE, "the body is over %d bytes", MaxBody)
		case asErr(err, &te):
			return eim.Errorf(eim.EINVALID, "%s", eim.JSONTypeProblem(te))
		case strict && strings.HasPrefix(err.Error(), "json: unknown field "):
			return eim.Errorf(eim.EINVALID, "%s: not a field of this request", strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return eim.Errorf(eim.EINVALID, "body: not valid JSON: %v", err)
	}
	return nil
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
