package httpapi

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/eimhq/eim"
)

// call is what a project-scoped handler works with: the project (as the
// inventory names it) and the caller.
type call struct {
	project string
	p       *eim.Principal
}

// authenticate reads the bearer token and asks the Authenticator.
func (h *handler) authenticate(r *http.Request) (*eim.Principal, error) {
	if p, ok := r.Context().Value(principalKey{}).(*eim.Principal); ok {
		return p, nil // a legacy request, authenticated before it was handed on
	}
	hdr := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(hdr, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "missing bearer token")
	}
	p, err := h.authn.Authenticate(r.Context(), strings.TrimSpace(tok))
	if err != nil {
		if eim.ErrorCode(err) == eim.EUNAUTHORIZED {
			return nil, err
		}
		if r.Context().Err() != nil {
			return nil, err
		}
		// An authenticator that fails for another reason must not let the
		// request through, nor leak its internals as a 500 with details.
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
	}
	if p == nil {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
	}
	return p, nil
}

// inProject wraps a project-scoped handler: authenticate, resolve the
// project named in the path, check the role (reads need read, everything
// else write).
func (h *handler) inProject(fn func(w http.ResponseWriter, r *http.Request, c *call) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.serveInProject(w, r, fn); err != nil {
			h.writeError(w, r, err)
		}
	}
}

func (h *handler) serveInProject(w http.ResponseWriter, r *http.Request, fn func(http.ResponseWriter, *http.Request, *call) error) error {
	p, err := h.authenticate(r)
	if err != nil {
		return err
	}
	name := r.PathValue("projectName")
	proj, err := h.findProject(r, name)
	if eim.ErrorCode(err) == eim.ENOTFOUND && !p.CanRead(&eim.Project{Name: name}) {
		// A project the caller may not see answers as one that is not
		// theirs, so that project names cannot be probed.
		return noAccess(name)
	}
	if err != nil {
		return err
	}
	allowed := p.CanWrite(proj)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		allowed = p.CanRead(proj)
	}
	if !allowed {
		if p.CanRead(proj) {
			// The caller sees the project: say what it lacks.
			return eim.Errorf(eim.EFORBIDDEN, "%s needs a write role on project %q (%s); this token may only read it",
				r.Method, name, eim.ProjectRole(proj, true))
		}
		return noAccess(name)
	}
	if proj.Deleting && r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodDelete {
		// What it would create or change is about to go.
		return eim.Errorf(eim.ECONFLICT, "project %s is being deleted", proj.Name)
	}
	if err := h.checkModule(r); err != nil {
		return err
	}
	if err := checkQuery(r); err != nil {
		return err
	}
	r = r.WithContext(eim.WithActor(r.Context(), eim.UserActor(p.Subject)))
	return fn(w, r, &call{project: proj.Name, p: p})
}

func noAccess(project string) error {
	return eim.Errorf(eim.EFORBIDDEN, "no access to project %q", project)
}

// admin wraps the project administration endpoints.
func (h *handler) admin(fn func(w http.ResponseWriter, r *http.Request, p *eim.Principal) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := h.authenticate(r)
		if err == nil {
			err = checkQuery(r)
		}
		if err == nil {
			err = fn(w, r.WithContext(eim.WithActor(r.Context(), eim.UserActor(p.Subject))), p)
		}
		if err != nil {
			h.writeError(w, r, err)
		}
	}
}

// findProject looks a project up by name, reusing a recent answer.
func (h *handler) findProject(r *http.Request, name string) (*eim.Project, error) {
	if name == "" || len(name) > 100 {
		return nil, eim.Errorf(eim.EINVALID, "projectName: must be 1 to 100 characters")
	}
	if p, ok := h.cachedProject(name); ok {
		return p, nil
	}
	p, err := h.inv.FindProject(r.Context(), name)
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, projectNotFound(name)
		}
		return nil, err
	}
	h.cacheProject(name, p)
	return p, nil
}

// projectNotFound is the answer for a project that does not exist, named
// by its name or (on the legacy paths) its ID.
func projectNotFound(name string) error {
	return eim.Errorf(eim.ENOTFOUND, "project %q not found", name)
}

func (h *handler) cachedProject(key string) (*eim.Project, bool) {
	h.projMu.Lock()
	c, ok := h.projects[key]
	h.projMu.Unlock()
	if ok && time.Now().Before(c.expires) {
		return c.p, true
	}
	return nil, false
}

func (h *handler) cacheProject(key string, p *eim.Project) {
	h.projMu.Lock()
	if len(h.projects) > 10000 { // bound memory against many names
		clear(h.projects)
	}
	h.projects[key] = cachedProject{p: p, expires: time.Now().Add(projectTTL)}
	h.projMu.Unlock()
}

// forgetProject drops the cached answers for the project, by name and by ID.
func (h *handler) forgetProject(name string) {
	h.projMu.Lock()
	for k, c := range h.projects {
		if k == name || c.p.Name == name {
			delete(h.projects, k)
		}
	}
	h.projMu.Unlock()
}

// checkQuery rejects empty query values (`?filter=`), as the original's
// gateway did.
func checkQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			if v == "" {
				return eim.Errorf(eim.EINVALID, "query parameter %q has an empty value", k)
			}
			if !printable(v) {
				return eim.Errorf(eim.EINVALID, "query parameter %q contains non-printable characters", k)
			}
		}
	}
	return nil
}

// printable reports whether s is free of control characters (tab allowed).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func printableHeaders(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			if !printable(v) {
				return false
			}
		}
	}
	return true
}

// clientIP is the peer address. Forwarding headers are not trusted: a
// proxy in front should do its own limiting.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ipLimiter is a token bucket per client IP. Idle buckets are swept when
// the table grows, so it needs no goroutine.
type ipLimiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newIPLimiter(perSecond float64) *ipLimiter {
	return &ipLimiter{rate: rate.Limit(perSecond), burst: max(1, int(perSecond)), buckets: map[string]*bucket{}}
}

// retryAfter is the Retry-After of a refused request, in whole seconds:
// the time one token takes to come back, at least a second.
func (l *ipLimiter) retryAfter() string {
	return strconv.Itoa(max(1, int(math.Ceil(1/float64(l.rate)))))
}

func (l *ipLimiter) allow(ip string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[ip]
	if !ok {
		if len(l.buckets) >= 4096 {
			for k, v := range l.buckets {
				if now.Sub(v.seen) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[ip] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}
