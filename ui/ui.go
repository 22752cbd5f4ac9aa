// Package ui is EIM's web UI for fleet operators, served by `eim server`
// at /ui/: server-rendered HTML (html/template, so every value is escaped)
// with a little progressive JavaScript of its own (live refresh, the
// provisioning log's follow, select-all), embedded in the binary.
//
// A user signs in with a bearer token pasted into /ui/login. The token is
// kept in an HttpOnly, SameSite=Strict cookie (Secure under TLS) and
// checked on every request by the same Authenticator as the API, and every
// page reads and writes through the inventory with the rights the API
// would give that token: reads need the project's read role, writes its
// write role, checked here before any write whatever the page showed. A
// read-only user is shown no write controls and a forged write is refused.
//
// Forms carry a CSRF token derived from the session (a digest of the
// bearer token, which another origin cannot read), and a write whose
// Origin (or Sec-Fetch-Site) says it came from elsewhere is refused. The
// Content-Security-Policy allows scripts, styles and connections to this
// server only, and no inline script.
package ui

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/inventory"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Authenticator turns a bearer token into a principal (the API's own).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*eim.Principal, error)
}

// Reprovisioner retries an instance's failed provisioning.
type Reprovisioner interface {
	Reprovision(ctx context.Context, project, instanceID, subject string) (*eim.Workflow, error)
}

// Options configure the UI. Zero values select the defaults.
type Options struct {
	Logger *slog.Logger
	// Reprovisioner serves the reprovision button; nil hides it.
	Reprovisioner Reprovisioner
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// LogWait bounds a provisioning-log long poll (default 25 s).
	LogWait time.Duration
	// Store, when set, is the inventory's store, whose change feed keeps
	// the UI's summary of the fleet (Run); nil: every page asks the
	// inventory for everything.
	Store eim.Store
	// Hosts, when set, is the process's read model of the hosts, which
	// the summary of the fleet is a projection over (the process runs
	// it); nil: the UI keeps a view of Store of its own, and Run runs it.
	Hosts *hostview.View
	// OIDC, when set, offers sign-in through an external issuer
	// (authorization code with PKCE) besides a pasted token.
	OIDC *OIDC
	// API is EIM's northbound REST API, which the forms of the resource
	// and settings pages call in process with the session's token (see
	// apiCall); nil: those pages show, and their forms are refused.
	API http.Handler
	// V2 is the v2 API (the clusters and connect modules' /v2/ routes),
	// which the clusters pages read and write through in process with
	// the session's token, as the forms call API; nil: those pages say
	// the server has none.
	V2 http.Handler
	// Deployed returns the modules that run somewhere in the deployment:
	// the clusters pages are in the menu while "clusters" is, and show
	// the tunnels' state while "connect" is. nil: neither.
	Deployed func() []string
}

// Handler serves the UI under /ui/ and the browser redirect of /.
type Handler struct {
	inv     *inventory.Service
	authn   Authenticator
	log     *slog.Logger
	reprov  Reprovisioner
	now     func() time.Time
	logWait time.Duration
	pages   map[string]*template.Template
	mux     *http.ServeMux
	static  http.Handler
	fleet   *fleet
	oidc    *oidcClient // nil: no sign-in through an issuer
	api     http.Handler
	v2      http.Handler
	// store reads the clusters' nodes for the hosts picker (which hosts
	// are free); nil: the picker lists every host.
	store    eim.Store
	deployed func() []string
}

// New returns the UI handler over inv, authenticating with authn.
func New(inv *inventory.Service, authn Authenticator, opts Options) (*Handler, error) {
	h := &Handler{inv: inv, authn: authn, log: opts.Logger, reprov: opts.Reprovisioner, now: opts.Now, logWait: opts.LogWait, oidc: newOIDC(opts.OIDC), api: opts.API,
		v2: opts.V2, store: opts.Store, deployed: opts.Deployed}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.logWait <= 0 {
		h.logWait = 25 * time.Second
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h.pages = pages
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	if h.deployed == nil {
		h.deployed = func() []string { return nil }
	}
	h.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	if opts.Store != nil {
		h.fleet = newFleet(hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: h.log}))
	}
	h.routes()
	return h, nil
}

// Run runs the UI's own view of the hosts, when it has one (no Hosts),
// until ctx ends: a loop of every process that serves the UI. The summary
// of the fleet (counts, the built-in views of the host list) is a
// projection over the view; until the view is live and whole, the pages
// ask the store for everything.
func (h *Handler) Run(ctx context.Context) error {
	if h.fleet == nil {
		<-ctx.Done()
		return nil
	}
	return h.fleet.Run(ctx)
}

// Live reports whether the summary of the fleet is loaded and followed.
func (h *Handler) Live() bool { return h.fleet.live() }

// Loaded reports whether the summary of the fleet was loaded once (or
// there is none to load): /readyz waits for it, so that a process is not
// sent users before its pages can answer from memory. A later outage of
// the feed does not make it unready; the pages then ask the store.
func (h *Handler) Loaded() bool { return h.fleet == nil || h.fleet.view.Primed() }

// Patterns are the ServeMux patterns the handler is mounted on.
func Patterns() []string { return []string{"/ui/", "GET /{$}"} }

func (h *Handler) routes() {
	m := http.NewServeMux()
	h.mux = m
	m.HandleFunc("GET /{$}", h.root)
	m.HandleFunc("GET /ui/{$}", h.home)
	m.Handle("GET /ui/static/", h.staticFiles())
	m.HandleFunc("GET /ui/login", h.loginPage)
	m.HandleFunc("POST /ui/login", h.login)
	m.HandleFunc("POST /ui/logout", h.logout)
	m.HandleFunc("GET /ui/oidc/start", h.oidcStart)
	m.HandleFunc("GET /ui/oidc/callback", h.oidcCallback)

	p := "/ui/p/{project}"
	m.HandleFunc("GET "+p+"/{$}", h.read(h.overview))
	m.HandleFunc("GET "+p+"/hosts", h.read(h.hosts))
	m.HandleFunc("GET "+p+"/hosts.csv", h.read(h.hostsCSV))
	m.HandleFunc("POST "+p+"/hosts/bulk", h.write(h.bulk))
	m.HandleFunc("GET "+p+"/hosts/{id}", h.read(h.host))
	m.HandleFunc("GET "+p+"/hosts/{id}/log", h.read(h.hostLog))
	m.HandleFunc("POST "+p+"/hosts/{id}/reprovision", h.write(h.reprovision))
	m.HandleFunc("GET "+p+"/register", h.read(h.registerPage))
	m.HandleFunc("POST "+p+"/register", h.write(h.registerOne))
	m.HandleFunc("POST "+p+"/register/csv", h.write(h.registerCSV))
	m.HandleFunc("GET "+p+"/locations", h.read(h.locations))
	m.HandleFunc("POST "+p+"/regions", h.write(h.createRegion))
	m.HandleFunc("POST "+p+"/sites", h.write(h.createSite))
	m.HandleFunc("POST "+p+"/regions/edit", h.write(h.editRegion))
	m.HandleFunc("POST "+p+"/sites/edit", h.write(h.editSite))
	m.HandleFunc("GET "+p+"/schedules", h.read(h.schedules))
	m.HandleFunc("POST "+p+"/schedules", h.write(h.createSchedule))
	m.HandleFunc("GET "+p+"/events", h.clusterRead(h.events))
	m.HandleFunc("GET "+p+"/resources", h.read(h.resources))
	m.HandleFunc("GET "+p+"/resources/{kind}/{id}", h.read(h.resource))
	m.HandleFunc("POST "+p+"/resources/{kind}", h.write(h.createResource))
	m.HandleFunc("POST "+p+"/resources/{kind}/{id}", h.write(h.editResource))
	m.HandleFunc("POST "+p+"/resources/{kind}/{id}/delete", h.write(h.deleteResource))
	m.HandleFunc("GET "+p+"/settings", h.read(h.settings))
	m.HandleFunc("POST "+p+"/settings", h.write(h.saveSettings))
	m.HandleFunc("GET "+p+"/audit", h.read(h.audit))
	m.HandleFunc("GET "+p+"/lobby", h.read(h.lobby))
	m.HandleFunc("POST "+p+"/lobby/{id}", h.write(h.decideLobby))
	m.HandleFunc("GET "+p+"/edgeworkloads", h.read(h.edgeWorkloads))
	m.HandleFunc("POST "+p+"/edgeworkloads", h.write(h.applyEdgeWorkload))
	m.HandleFunc("GET "+p+"/edgeworkloads/{name}", h.read(h.edgeWorkload))
	m.HandleFunc("GET "+p+"/edgeworkloads/{name}/logs", h.read(h.edgeWorkloadLogs))
	m.HandleFunc("POST "+p+"/edgeworkloads/{name}", h.write(h.applyEdgeWorkload))
	m.HandleFunc("POST "+p+"/edgeworkloads/{name}/delete", h.write(h.deleteEdgeWorkload))
	m.HandleFunc("POST "+p+"/hosts/{id}/bmc", h.write(h.setBMC))
	m.HandleFunc("POST "+p+"/hosts/{id}/bmc/delete", h.write(h.deleteBMC))
	m.HandleFunc("POST "+p+"/hosts/{id}/power", h.write(h.powerJob))
	m.HandleFunc("POST "+p+"/objectstorage", h.write(h.saveObjectStorage))
	m.HandleFunc("POST "+p+"/objectstorage/delete", h.write(h.deleteObjectStorage))
	m.HandleFunc("GET "+p+"/clusters", h.clusterRead(h.clusters))
	m.HandleFunc("POST "+p+"/clusters", h.clusterWrite(h.createCluster))
	m.HandleFunc("GET "+p+"/newcluster", h.clusterRead(h.newCluster))
	m.HandleFunc("GET "+p+"/clusters/{name}", h.clusterRead(h.cluster))
	m.HandleFunc("GET "+p+"/clusters/{name}/kubeconfig", h.clusterRead(h.kubeconfig))
	m.HandleFunc("POST "+p+"/clusters/{name}/nodes", h.clusterWrite(h.addNodes))
	m.HandleFunc("POST "+p+"/clusters/{name}/nodes/{id}/remove", h.clusterWrite(h.removeNode))
	m.HandleFunc("POST "+p+"/clusters/{name}/template", h.clusterWrite(h.upgradeCluster))
	m.HandleFunc("POST "+p+"/clusters/{name}/labels", h.clusterWrite(h.clusterLabels))
	m.HandleFunc("POST "+p+"/clusters/{name}/delete", h.clusterWrite(h.deleteCluster))
	m.HandleFunc("GET "+p+"/templates", h.clusterRead(h.clusterTemplates))
	m.HandleFunc("POST "+p+"/templates", h.clusterWrite(h.createTemplate))
	m.HandleFunc("POST "+p+"/templates/{name}/{version}/delete", h.clusterWrite(h.deleteTemplate))
	m.HandleFunc("POST "+p+"/templates/{name}/{version}/default", h.clusterWrite(h.defaultTemplate))
	m.HandleFunc("/ui/", h.notFound)
}

// ServeHTTP sets the headers every answer carries, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

// root sends browsers to the UI; other clients get the API's answer to
// a path it does not serve.
func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/ui/", http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"code":"NotFound","message":"no operation ` + r.Method + ` /"}` + "\n"))
}

func (h *Handler) staticFiles() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			h.notFound(w, r) // no listings
			return
		}
		// Embedded files change only with the binary.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
	})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.renderError(w, r, nil, eim.Errorf(eim.ENOTFOUND, "no page %s", r.URL.Path))
}
