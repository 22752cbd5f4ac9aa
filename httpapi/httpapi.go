// Package httpapi is the northbound REST API of EIM: the original EIM's v1
// paths under /v1/projects/{projectName}/…, its JSON shapes, list envelope,
// error body and status codes, over an *inventory.Service.
//
// The handler authenticates every request except /healthz and
// /openapi.yaml with a bearer token, checks the caller's role on the
// project named in the path, decodes request bodies against the kind's
// eim.Schema (so a field is declared once, in the root package), and maps
// eim error codes to HTTP statuses in one place (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
)

// Authenticator turns a bearer token into a principal; errors are EUNAUTHORIZED.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*eim.Principal, error)
}

// Options configure the handler. Zero values select the defaults.
type Options struct {
	Logger       *slog.Logger
	MaxBodyBytes int64   // request body limit; 0 = 100 KiB
	RateLimit    float64 // requests per second per client IP; 0 = off
	// RequestTimeout bounds a request (0 = 15 s); a provisioning-log long
	// poll gets its wait on top (see timeoutOf).
	RequestTimeout time.Duration
	// Reprovisioner retries failed provisioning (POST …/reprovision); nil
	// answers that operation 503.
	Reprovisioner Reprovisioner
	// RecoveryKeys reads escrowed recovery keys (GET …/recoverykey); nil
	// answers 503.
	RecoveryKeys RecoveryKeys
	// AttestationKeys reads and resets hosts' pinned TPM keys (GET and
	// DELETE …/hosts/{id}/attestationkey); nil answers 503.
	AttestationKeys AttestationKeys
	// Deployed returns the modules that run somewhere in the deployment
	// (this process or another; ModuleOnboarding …). It is called per
	// request and must answer from memory. GET /v1/orchestrator lists the
	// original's features they provide, and the operations of a module
	// that runs nowhere answer 501 naming it. nil: every module runs.
	Deployed func() []string
	// DeployedNow, when set, reads the deployment again (at most about
	// once a second) before an operation is refused for its module running
	// nowhere: the module's process may have started since Deployed's
	// view was read.
	DeployedNow func(context.Context) []string
	// Initialisers are the modules that initialise every project and
	// record their readiness condition on it (the server's modules with
	// Initialises): GET /v1/projects/{name} shows the conditions of those
	// that run in the deployment.
	Initialisers []string
	// Version is the server's version, shown by GET /v1/orchestrator.
	Version string
	// Metrics is where the handler's own series are registered
	// (docs/metrics.md); nil keeps them unexposed.
	Metrics prometheus.Registerer
}

const (
	defaultMaxBody = 100 << 10
	requestTimeout = 15 * time.Second
	// projectTTL bounds how long a project looked up by name is reused.
	// Projects are created and deleted rarely; deletes through this handler
	// drop the entry at once.
	projectTTL = 2 * time.Second
)

// handler serves the API. It is safe for concurrent use.
type handler struct {
	inv         *inventory.Service
	authn       Authenticator
	log         *slog.Logger
	maxBody     int64
	limiter     *ipLimiter // nil when rate limiting is off
	mux         *http.ServeMux
	timeout     time.Duration
	reprov      Reprovisioner
	keys        RecoveryKeys
	akeys       AttestationKeys
	version     string
	deployed    func() []string
	deployedNow func(context.Context) []string
	inits       []string
	// encodeFailures counts the answers that could not be encoded.
	encodeFailures *prometheus.CounterVec
	// cur is the module whose routes are being registered (routes only).
	cur string

	projMu   sync.Mutex
	projects map[string]cachedProject
}

type cachedProject struct {
	p       *eim.Project
	expires time.Time
}

// New returns the API handler.
func New(inv *inventory.Service, authn Authenticator, opts Options) http.Handler {
	h := &handler{
		inv:         inv,
		authn:       authn,
		log:         opts.Logger,
		maxBody:     opts.MaxBodyBytes,
		mux:         http.NewServeMux(),
		timeout:     opts.RequestTimeout,
		reprov:      opts.Reprovisioner,
		keys:        opts.RecoveryKeys,
		akeys:       opts.AttestationKeys,
		version:     opts.Version,
		deployed:    opts.Deployed,
		deployedNow: opts.DeployedNow,
		inits:       opts.Initialisers,
		projects:    map[string]cachedProject{},
		encodeFailures: metrics.Register(opts.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eim_http_encode_failures_total",
			Help: "API answers that could not be encoded (a bug: answered 500, after any write the request made), by method and route.",
		}, []string{"method", "route"})),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody <= 0 {
		h.maxBody = defaultMaxBody
	}
	if h.timeout <= 0 {
		h.timeout = requestTimeout
	}
	if opts.RateLimit > 0 {
		h.limiter = newIPLimiter(opts.RateLimit)
	}
	h.routes()
	return h
}

type inProcessKey struct{}

// InProcess returns api (a handler New made) for a module of the same
// process that calls it on a user's behalf — the web UI, whose one form
// may make many calls (a bulk action, a CSV file's lines): its calls are
// not counted against the user's per-client rate limit again. Everything
// else applies: authentication, roles, checks, audit.
func InProcess(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), inProcessKey{}, true)))
	})
}

// ServeHTTP applies the limits every request is subject to, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := requestID(r)
	w.Header().Set("X-Request-Id", rid)
	sw := &statusWriter{ResponseWriter: w}
	ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), ridKey{}, rid), h.timeoutOf(r))
	defer cancel()
	r = trimSlash(r.WithContext(ctx))

	switch {
	case h.limiter != nil && r.Context().Value(inProcessKey{}) == nil && !h.limiter.allow(clientIP(r), start):
		// Refused before anything ran: a client may send it again as is.
		sw.Header().Set("Retry-After", h.limiter.retryAfter())
		h.writeError(sw, r, eim.Errorf(codeRateLimited, "too many requests from this client; slow down"))
	case !printableHeaders(r.Header):
		h.writeError(sw, r, eim.Errorf(eim.EINVALID, "request headers contain non-printable characters"))
	default:
		h.mux.ServeHTTP(sw, r)
		// The operation's template, for the listener's request metrics.
		metrics.SetRoute(w, r.Pattern)
		if sw.encodeErr != nil {
			h.encodeFailed(r, sw.encodeErr)
		}
	}
	if h.log.Enabled(ctx, slog.LevelDebug) {
		h.log.LogAttrs(ctx, slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status()), slog.Duration("took", time.Since(start)),
			slog.String("request_id", rid))
	}
}

// trimSlash drops one trailing slash from r's path, as the original's API
// server did before routing: its web UI asks GET …/regions/ (no region
// chosen), which is the list of regions there. r is a copy of the
// caller's request (WithContext), so its URL is copied before the change.
func trimSlash(r *http.Request) *http.Request {
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		u := *r.URL
		u.Path = strings.TrimSuffix(p, "/")
		u.RawPath = strings.TrimSuffix(u.RawPath, "/")
		r.URL = &u
	}
	return r
}

// statusWriter remembers the status for the request log, and an answer
// that could not be encoded.
type statusWriter struct {
	http.ResponseWriter
	code      int
	encodeErr error
}

// encodeFailed logs and counts an answer that could not be encoded (it
// was answered 500). The request may have changed something before: a
// write is committed by then, which the log says, so that it is never
// silent.
func (h *handler) encodeFailed(r *http.Request, err error) {
	route := metrics.RouteLabel(r.Pattern)
	h.encodeFailures.WithLabelValues(metrics.MethodLabel(r.Method), route).Inc()
	h.log.LogAttrs(r.Context(), slog.LevelError, "encode response: answered 500; any write the request made is committed",
		slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.String("request_id", ridFrom(r.Context())), slog.String("err", err.Error()))
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
