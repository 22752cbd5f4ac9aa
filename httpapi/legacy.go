package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/api"
)

// The legacy paths, /edge-infra.orchestrator.apis/v2/…: each operation of
// api.Legacy is served by the handler of its twin under
// /v1/projects/{projectName}/…, with the project taken from the
// projectName query parameter or, when that is absent, from the
// ActiveProjectID header (the project's UUID). The twin's handler then
// checks the caller's role on that project exactly as on its own path.

// principalKey marks a request whose caller was authenticated already
// (a legacy request handed on to its twin).
type principalKey struct{}

// legacyRoutes registers the legacy operations whose twin is routed. It
// runs after every other route: a twin not served (a module not built)
// leaves its legacy operation unrouted too, answered as unknown paths are.
func (h *handler) legacyRoutes() {
	for _, op := range api.Legacy {
		twin, ok := h.twin(op)
		if !ok {
			continue
		}
		h.mux.HandleFunc(op.Method+" "+api.LegacyPrefix+op.Path, h.legacy(twin))
	}
}

// twin returns the handler of op's twin, if the mux routes it.
func (h *handler) twin(op api.LegacyOp) (http.Handler, bool) {
	want := op.Method + " " + projectPrefix + op.Twin
	probe := strings.NewReplacer("{projectName}", "p", "{resourceId}", "x").Replace(projectPrefix + op.Twin)
	hd, pattern := h.mux.Handler(&http.Request{Method: op.Method, URL: &url.URL{Path: probe}})
	switch pattern {
	case want:
		return hd, true
	case "", "/": // nothing, or (registered later) the catch-all
		return nil, false
	}
	// The table names a path that another route catches: a mistake in
	// api.Legacy, which the tests would show at once.
	panic(fmt.Sprintf("httpapi: legacy %s %s: twin %s is routed to %s", op.Method, op.Path, want, pattern))
}

func (h *handler) legacy(twin http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, p, err := h.legacyProject(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		if q := r.URL.Query(); q.Has(api.LegacyProjectParam) {
			// Taken: the twin, which reads the project from the path,
			// must not refuse it as an empty query value.
			q.Del(api.LegacyProjectParam)
			u := *r.URL
			u.RawQuery = q.Encode()
			r.URL = &u
		}
		r.SetPathValue("projectName", name)
		twin.ServeHTTP(w, r)
	}
}

// legacyProject authenticates the caller and names the project of a legacy
// request; the twin's handler looks the name up and checks the role.
func (h *handler) legacyProject(r *http.Request) (string, *eim.Principal, error) {
	p, err := h.authenticate(r)
	if err != nil {
		return "", nil, err
	}
	// Clients generated from the original's document send the parameter
	// empty when the header names the project: empty is absent.
	if name := r.URL.Query().Get(api.LegacyProjectParam); name != "" {
		return name, p, nil
	}
	id := r.Header.Get(api.LegacyProjectHeader)
	if id == "" {
		return "", nil, eim.Errorf(eim.EINVALID, "%s: required: name the project with the %s query parameter, or give its UUID in the %s header",
			api.LegacyProjectParam, api.LegacyProjectParam, api.LegacyProjectHeader)
	}
	if !eim.ValidUUID(id) {
		return "", nil, eim.Errorf(eim.EINVALID, "%s: not a UUID (the header carries the project's ID)", api.LegacyProjectHeader)
	}
	proj, err := h.findProjectByID(r, id)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND && !p.IsAdmin(),
		err == nil && !p.CanRead(proj):
		// As on the v1 path, a project the caller may not see answers as
		// one that is not theirs; named by the UUID it was asked by, so
		// that the answer does not tell a stranger the project's name.
		return "", nil, noAccess(id)
	case err != nil:
		return "", nil, err
	}
	return proj.Name, p, nil
}

// findProjectByID looks a project up by its UUID, reusing a recent answer
// (in the cache of findProject, under a key no project name can have).
func (h *handler) findProjectByID(r *http.Request, id string) (*eim.Project, error) {
	key := "id:" + strings.ToLower(id)
	if p, ok := h.cachedProject(key); ok {
		return p, nil
	}
	p, err := h.inv.FindProjectByID(r.Context(), id)
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, projectNotFound(id)
		}
		return nil, err
	}
	h.cacheProject(key, p)
	return p, nil
}
