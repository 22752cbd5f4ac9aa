package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// The session is the bearer token itself, in a cookie the page's scripts
// cannot read: nothing is kept on the server, so replicas behind a load
// balancer all accept it, and it ends when the token expires.
const (
	cookieName = "eim_session"
	// maxTokenLen bounds the pasted token (a cookie holds about 4 KiB).
	maxTokenLen = 3800
)

// call is what a project page works with.
type call struct {
	project  *eim.Project
	p        *eim.Principal
	canWrite bool
	// clustersOnly: the user's role in the project is a cluster role
	// alone, which opens the clusters pages and no other.
	clustersOnly bool
	csrf         string
	token        string          // the session's bearer token, for the API's calls
	projects     []string        // the projects the user may read, for the switcher
	modules      map[string]bool // the modules deployed (Options.Deployed)
}

// csrfToken is the form token of a session: a digest of its bearer token,
// which a page of another origin can neither read nor compute.
func csrfToken(token string) string {
	sum := sha256.Sum256([]byte("eim-ui-csrf\x00" + token))
	return base64.RawURLEncoding.EncodeToString(sum[:24])
}

// sameOrigin reports whether a state-changing request comes from a page of
// this server: its Origin (sent by browsers on every POST) names this
// host, or, without one, Sec-Fetch-Site does not say cross-site.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && o != "null" && strings.EqualFold(u.Host, r.Host)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	return true
}

// sessionToken returns the request's bearer token from its cookie.
func sessionToken(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// setRefresh keeps (or, maxAge -1, drops) the refresh token of a session
// signed in through the issuer: HttpOnly as the session, sent only to the
// UI's pages.
func setRefresh(w http.ResponseWriter, r *http.Request, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: refreshCookie, Value: token, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// dropRefresh drops the refresh token the browser sent, if any.
func dropRefresh(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(refreshCookie); err == nil {
		setRefresh(w, r, "", -1)
	}
}

func setSession(w http.ResponseWriter, r *http.Request, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: token, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// principal authenticates the session, or answers nil.
func (h *Handler) principal(r *http.Request) (*eim.Principal, string) {
	tok := sessionToken(r)
	if tok == "" {
		return nil, ""
	}
	p, err := h.authn.Authenticate(r.Context(), tok)
	if err != nil || p == nil {
		return nil, ""
	}
	return p, tok
}

// session is principal, and for a session signed in through the issuer
// whose access token was refused (expired, most often) a new one from
// its refresh token (see refreshSession), set in w's cookies. prev is the
// refused token when it was replaced, whose CSRF tokens this request still
// takes (the form was made before).
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (p *eim.Principal, tok, prev string) {
	if p, tok = h.principal(r); p != nil {
		return p, tok, ""
	}
	old := sessionToken(r)
	if p, tok = h.refreshSession(w, r); p != nil {
		return p, tok, old
	}
	return nil, "", ""
}

// read wraps a project page that only reads: the project's read role.
func (h *Handler) read(fn func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return h.inProject(false, false, fn)
}

// clusterRead wraps a clusters page that only reads: the project's read
// role or a cluster role (`<project>_cl-r`, `_cl-rw`), as the v2 API it
// calls allows.
func (h *Handler) clusterRead(fn func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return h.inProject(false, true, fn)
}

// clusterWrite wraps a clusters form's target: as write, with the
// project's write role or the cluster write role.
func (h *Handler) clusterWrite(fn func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return h.inProject(true, true, fn)
}

// write wraps a form's target: same origin, the session's CSRF token and
// the project's write role, whatever the page that sent it showed.
func (h *Handler) write(fn func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return h.inProject(true, false, fn)
}

// inProject checks the session and the user's role in the page's project
// (clusters: a clusters page, open to the cluster roles too) before fn.
func (h *Handler) inProject(write, clusters bool, fn func(http.ResponseWriter, *http.Request, *call) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, tok, prev := h.session(w, r)
		if p == nil {
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/log") {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.renderError(w, r, nil, eim.Errorf(eim.EUNAUTHORIZED, "sign in first: your session is missing or has expired"))
			return
		}
		name := r.PathValue("project")
		proj, err := h.inv.FindProject(r.Context(), name)
		if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && !p.CanReadClusters(proj)) {
			// Not found and not allowed look alike: names cannot be probed.
			// The page keeps the project switcher and the sign-out.
			h.renderSignedInError(w, r, p, tok, eim.Errorf(eim.EFORBIDDEN, "no access to project %q", name))
			return
		}
		if err != nil {
			h.renderError(w, r, nil, err)
			return
		}
		// A user with only a cluster role sees the clusters pages alone.
		clustersOnly := !p.CanRead(proj)
		if clustersOnly && !clusters {
			if r.Method == http.MethodGet && r.URL.Path == "/ui/p/"+proj.Name+"/" {
				http.Redirect(w, r, "/ui/p/"+url.PathEscape(proj.Name)+"/clusters", http.StatusSeeOther)
				return
			}
			h.renderError(w, r, nil, eim.Errorf(eim.EFORBIDDEN, "your role in project %q gives access to its clusters only", proj.Name))
			return
		}
		canWrite := p.CanWrite(proj)
		if clusters {
			canWrite = p.CanWriteClusters(proj)
		}
		c := &call{project: proj, p: p, canWrite: canWrite, clustersOnly: clustersOnly, csrf: csrfToken(tok), token: tok, modules: map[string]bool{}}
		for _, m := range h.deployed() {
			c.modules[m] = true
		}
		if write {
			switch {
			case !sameOrigin(r):
				h.renderError(w, r, nil, eim.Errorf(eim.EFORBIDDEN, "refused: the form was sent from another site"))
				return
			case subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(c.csrf)) != 1 &&
				(prev == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(csrfToken(prev))) != 1):
				h.renderError(w, r, nil, eim.Errorf(eim.EFORBIDDEN, "refused: the form's security token is missing or stale; reload the page and try again"))
				return
			case !c.canWrite:
				c.projects = h.readableProjects(r, p) // the page keeps the menu
				h.renderError(w, r, c, eim.Errorf(eim.EFORBIDDEN, "your role in project %q is read-only", proj.Name))
				return
			case proj.Deleting:
				h.renderError(w, r, nil, eim.Errorf(eim.ECONFLICT, "project %s is being deleted", proj.Name))
				return
			}
			// The audit log names the user, as for the API's writes.
			r = r.WithContext(eim.WithActor(r.Context(), eim.UserActor(p.Subject)))
		}
		if r.Method == http.MethodGet {
			c.projects = h.readableProjects(r, p)
		}
		if err := fn(w, r, c); err != nil {
			h.renderError(w, r, c, err)
		}
	}
}

// readableProjects lists the names of the projects p may read (some only
// their clusters).
func (h *Handler) readableProjects(r *http.Request, p *eim.Principal) []string {
	all, err := h.inv.ListProjects(r.Context())
	if err != nil {
		return nil
	}
	var out []string
	for _, pr := range all {
		if p.CanReadClusters(pr) {
			out = append(out, pr.Name)
		}
	}
	slices.Sort(out)
	return out
}

// home sends a signed-in user to their first project.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	p, _, _ := h.session(w, r)
	if p == nil {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	ps := h.readableProjects(r, p)
	if want := r.URL.Query().Get("project"); want != "" {
		// The project switcher's form.
		if !slices.Contains(ps, want) {
			_, tok, _ := h.session(w, r)
			h.renderSignedInError(w, r, p, tok, eim.Errorf(eim.EFORBIDDEN, "no access to project %q", want))
			return
		}
		http.Redirect(w, r, "/ui/p/"+url.PathEscape(want)+"/", http.StatusSeeOther)
		return
	}
	switch {
	case slices.Contains(ps, eim.DefaultProject):
		http.Redirect(w, r, "/ui/p/"+url.PathEscape(eim.DefaultProject)+"/", http.StatusSeeOther)
	case len(ps) > 0:
		http.Redirect(w, r, "/ui/p/"+url.PathEscape(ps[0])+"/", http.StatusSeeOther)
	default:
		h.renderError(w, r, nil, eim.Errorf(eim.EFORBIDDEN, "your token gives access to no project"))
	}
}

type loginData struct {
	Next  string
	Error string
	OIDC  bool // sign-in through an issuer is offered
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", &view{Title: "Sign in", Data: loginData{Next: safeNext(r.URL.Query().Get("next")), OIDC: h.oidc != nil}})
}

// login checks the pasted token and keeps it in the session cookie. The
// form has no session yet to bind a CSRF token to: its origin is checked.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	fail := func(status int, msg string) {
		h.render(w, r, status, "login", &view{Title: "Sign in", Data: loginData{Next: next, Error: msg, OIDC: h.oidc != nil}})
	}
	if !sameOrigin(r) {
		fail(http.StatusForbidden, "refused: the form was sent from another site")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	tok = strings.TrimSpace(strings.TrimPrefix(tok, "Bearer "))
	if tok == "" || len(tok) > maxTokenLen {
		fail(http.StatusBadRequest, "paste a bearer token (eim token create prints one)")
		return
	}
	p, err := h.authn.Authenticate(r.Context(), tok)
	if err != nil || p == nil {
		msg := "the token is not valid"
		if err != nil && eim.ErrorCode(err) == eim.EUNAUTHORIZED {
			msg = eim.ErrorMessage(err)
		}
		fail(http.StatusUnauthorized, msg)
		return
	}
	setSession(w, r, tok, 0)
	dropRefresh(w, r) // a pasted token is not refreshed
	if next == "" {
		next = "/ui/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	_, tok := h.principal(r)
	if !sameOrigin(r) || tok == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(csrfToken(tok))) != 1 {
		h.renderError(w, r, nil, eim.Errorf(eim.EFORBIDDEN, "refused: the sign-out form is not this session's"))
		return
	}
	setSession(w, r, "", -1)
	dropRefresh(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a post-login destination only when it is a UI path of
// this server (no open redirect).
func safeNext(s string) string {
	if !strings.HasPrefix(s, "/ui/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n") {
		return ""
	}
	return s
}
