package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// pageNames are the templates/NAME.html pages, each rendered inside
// templates/layout.html.
var pageNames = []string{"login", "signedin", "error", "overview", "hosts", "host", "register", "locations", "schedules", "bulk", "resources", "resource", "settings", "audit", "lobby", "clusters", "cluster", "clusternew", "clustertemplates", "edgeworkloads", "edgeworkload", "edgeworkloadlogs"}

// view is what the layout renders around a page.
type view struct {
	Title    string
	Nav      string // the menu entry to mark current
	Project  string
	Projects []string
	CanWrite bool
	// ClustersOnly: the user may see the project's clusters pages and no
	// other (a cluster role alone).
	ClustersOnly bool
	CSRF         string
	User         string
	Modules      map[string]bool // the optional modules deployed (navItem.Module)
	Live         bool            // the page refreshes itself from the change feed
	LiveAll      bool            // … on a change of any kind (else: of liveKinds)
	Data         any
}

// navItem is an entry of the main menu: the page's Nav key, its title
// and its path below the project. A page of another feature is one entry
// here and its routes.
type navItem struct {
	Key, Title, Path string
	Write            bool   // shown to writers only
	Module           string // shown while this module is deployed ("": always)
}

var navItems = []navItem{
	{"overview", "Overview", "", false, ""},
	{"hosts", "Hosts", "hosts", false, ""},
	{"register", "Register", "register", true, ""},
	{"locations", "Locations", "locations", false, ""},
	{"schedules", "Schedules", "schedules", false, ""},
	{"clusters", "Clusters", "clusters", false, "clusters"},
	{"edgeworkloads", "Edge workloads", "edgeworkloads", false, "workloads"},
	{"resources", "Resources", "resources", false, ""},
	{"lobby", "Lobby", "lobby", false, "onboarding"},
	{"audit", "Audit log", "audit", false, ""},
	{"settings", "Settings", "settings", false, ""},
}

var funcs = template.FuncMap{
	"ind":     indicatorClass,
	"indText": indicatorText,
	"unix":    unixTime,
	"etime":   eimTime,
	"pct":     func(n, total int) int { return pct(n, total) },
	"add":     func(a, b int) int { return a + b },
	"sub":     func(a, b int) int { return a - b },
	"mul":     func(a, b int) int { return a * b },
	"short":   shortEnum,
	"bmcKind": bmcKind,
	"bytes":   humanBytes,
	"nav":     func() []navItem { return navItems },
	"args": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"formArgs": func(f *resForm, csrf, id string) map[string]any {
		return map[string]any{"F": f, "CSRF": csrf, "ID": id}
	},
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/forms.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parse page %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// render writes page name with v, or an error page when it fails.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		h.log.Error("ui: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// page renders a project page.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, c *call, name, title string, data any) {
	h.render(w, r, http.StatusOK, name, c.view(name, title, data))
}

func (c *call) view(nav, title string, data any) *view {
	return &view{Title: title, Nav: nav, Project: c.project.Name, Projects: c.projects, CanWrite: c.canWrite, ClustersOnly: c.clustersOnly,
		CSRF: c.csrf, User: c.p.Subject, Modules: c.modules, Data: data}
}

type errorData struct {
	Status  int
	Message string
}

// renderError answers err as a page, its status from its code.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, c *call, err error) {
	status := statusOf(err)
	msg := eim.ErrorMessage(err)
	if status == http.StatusInternalServerError {
		h.log.Error("ui: request failed", "path", r.URL.Path, "error", err)
		msg = "something went wrong on the server; it has been logged"
	}
	v := &view{Title: http.StatusText(status), Data: errorData{Status: status, Message: msg}}
	if c != nil {
		v = c.view("", http.StatusText(status), v.Data)
	}
	h.render(w, r, status, "error", v)
}

// renderSignedInError answers err as a page for a signed-in user outside
// any project: the header keeps the project switcher and the sign-out.
func (h *Handler) renderSignedInError(w http.ResponseWriter, r *http.Request, p *eim.Principal, tok string, err error) {
	status := statusOf(err)
	h.render(w, r, status, "error", &view{Title: http.StatusText(status), Projects: h.readableProjects(r, p),
		CSRF: csrfToken(tok), User: p.Subject, Data: errorData{Status: status, Message: eim.ErrorMessage(err)}})
}

func statusOf(err error) int {
	switch eim.ErrorCode(err) {
	case eim.EINVALID, eim.ETOOLARGE:
		return http.StatusBadRequest
	case eim.ENOTFOUND:
		return http.StatusNotFound
	case eim.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case eim.EFORBIDDEN:
		return http.StatusForbidden
	case eim.ECONFLICT:
		return http.StatusConflict
	case eim.EPRECONDITION:
		return http.StatusPreconditionFailed
	case eim.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	case eim.EUNIMPLEMENTED:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

func indicatorClass(s eim.StatusIndication) string {
	switch s {
	case eim.StatusError:
		return "st-error"
	case eim.StatusInProgress:
		return "st-progress"
	case eim.StatusIdle:
		return "st-idle"
	}
	return "st-unknown"
}

// indicatorText is the indicator in words, for those who do not see the
// colour.
func indicatorText(s eim.StatusIndication) string {
	switch s {
	case eim.StatusError:
		return "error"
	case eim.StatusInProgress:
		return "in progress"
	case eim.StatusIdle:
		return "ok"
	}
	return "unknown"
}

// heardView is when a host's node was last heard from: relative ("12 s
// ago"), with the absolute time for <time datetime> and its title.
type heardView struct {
	Ago, Abs, DateTime string
}

func heardOf(t, now time.Time) heardView {
	if t.IsZero() {
		return heardView{Ago: "never"}
	}
	return heardView{Ago: ago(now.Sub(t)), Abs: t.UTC().Format("2006-01-02 15:04:05Z"), DateTime: t.UTC().Format(time.RFC3339)}
}

// ago says how long ago d was, in its largest whole unit.
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%d d ago", int(d/(24*time.Hour)))
}

func unixTime(sec uint64) string {
	if sec == 0 {
		return "—"
	}
	return time.Unix(int64(sec), 0).UTC().Format("2006-01-02 15:04:05Z")
}

func eimTime(t eim.Time) string {
	tt := t.Time
	if tt.IsZero() {
		return "—"
	}
	return tt.UTC().Format("2006-01-02 15:04:05Z")
}

func pct(n, total int) int {
	if total <= 0 {
		return 0
	}
	return n * 100 / total
}

// shortEnum drops an enum's type prefix: HOST_STATE_ONBOARDED → ONBOARDED.
func shortEnum(s any) string {
	v := fmt.Sprint(s)
	for _, p := range []string{"HOST_STATE_", "INSTANCE_STATE_", "POWER_STATE_", "WORKFLOW_STATE_", "ACTION_STATE_", "SCHEDULE_STATUS_", "SECURITY_FEATURE_", "INSTANCE_KIND_", "STATUS_CONDITION_", "SECURE_BOOT_STATE_"} {
		if strings.HasPrefix(v, p) {
			return strings.TrimPrefix(v, p)
		}
	}
	return v
}

// bmcKind is a host's baseboard management controller in words.
func bmcKind(k eim.BaremetalControllerKind) string {
	switch k {
	case eim.BaremetalControllerKindNone:
		return "None"
	case "BAREMETAL_CONTROLLER_KIND_IPMI":
		return "IPMI"
	case "BAREMETAL_CONTROLLER_KIND_VPRO":
		return "Intel vPro (AMT)"
	case "BAREMETAL_CONTROLLER_KIND_PDU":
		return "PDU"
	case eim.BaremetalControllerKindRedfish:
		return "Redfish"
	case "", eim.BaremetalControllerKindUnspecified:
		return "not reported"
	}
	return string(k)
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
