package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts a listener's requests by route template, method and status
// code, and times them by route and method.
//
// The route is the pattern of the ServeMux entry that served the request
// (the API's operation template, "/v1/projects/{projectName}/compute/hosts/{resourceId}",
// never the raw path), refined by a handler that routes further itself
// (SetRoute). A request no route matched is "unmatched". So the series
// stay bounded whatever paths clients send: routes are the registered
// patterns, methods the standard ones (others are "other"), codes what
// the handlers answer.
type HTTP struct {
	listener string
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu       sync.RWMutex
	children map[httpKey]*httpChild
	pool     sync.Pool
}

type httpKey struct {
	method, route string
	code          int
}

// httpChild is a key's resolved series: a request costs a map read, no
// label hashing.
type httpChild struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// Unmatched is the route of a request no route matched.
const Unmatched = "unmatched"

// durationBuckets (seconds) of the request and RPC histograms: from a
// heartbeat answered from memory to an API long poll.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// NewHTTP returns the instrument of the listener named listener ("http",
// "agent", "metrics"), registered on reg: the listeners of a process
// share the series, told apart by their listener label.
func NewHTTP(reg prometheus.Registerer, listener string) *HTTP {
	m := &HTTP{
		listener: listener,
		requests: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eim_http_requests_total",
			Help: "HTTP requests answered, by listener, method, route (the pattern that served it; \"unmatched\" for none) and status code.",
		}, []string{"listener", "method", "route", "code"})),
		duration: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eim_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests (until the handler returned), by listener, method and route.",
			Buckets: durationBuckets,
		}, []string{"listener", "method", "route"})),
		children: map[httpKey]*httpChild{},
	}
	m.pool.New = func() any { return &recorder{} }
	return m
}

// Wrap returns next instrumented. next is typically a ServeMux: its
// pattern is read from the request once it has served it.
func (m *HTTP) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := m.pool.Get().(*recorder)
		rec.ResponseWriter, rec.code, rec.route = w, 0, ""
		next.ServeHTTP(rec, r)
		route := rec.route
		if route == "" {
			route = r.Pattern
		}
		m.observe(r.Method, route, rec.status(), time.Since(start))
		rec.ResponseWriter = nil
		m.pool.Put(rec)
	})
}

// observe counts a request.
func (m *HTTP) observe(method, pattern string, code int, took time.Duration) {
	k := httpKey{method: MethodLabel(method), route: RouteLabel(pattern), code: code}
	m.mu.RLock()
	c := m.children[k]
	m.mu.RUnlock()
	if c == nil {
		c = m.child(k)
	}
	c.requests.Inc()
	c.duration.Observe(took.Seconds())
}

// child resolves and keeps k's series.
func (m *HTTP) child(k httpKey) *httpChild {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.children[k]; c != nil {
		return c
	}
	c := &httpChild{
		requests: m.requests.WithLabelValues(m.listener, k.method, k.route, strconv.Itoa(k.code)),
		duration: m.duration.WithLabelValues(m.listener, k.method, k.route),
	}
	m.children[k] = c
	return c
}

// RouteLabel is a ServeMux pattern without its method ("GET /v1/x" →
// "/v1/x"); the catch-all "/" and no pattern are Unmatched.
func RouteLabel(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if pattern == "" || pattern == "/" {
		return Unmatched
	}
	return pattern
}

// MethodLabel keeps the standard methods and folds the rest, which a
// client may make up, into "other".
func MethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// SetRoute names the route of the request w answers, for a handler that
// routes further than the listener's mux did (the API handler, mounted
// at "/", with its own mux): pattern is the ServeMux pattern that served
// it. It does nothing when w is not instrumented.
func SetRoute(w http.ResponseWriter, pattern string) {
	for {
		switch x := w.(type) {
		case *recorder:
			x.route = pattern
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// recorder remembers the status code and the route of a request.
type recorder struct {
	http.ResponseWriter
	code  int
	route string
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes a flush on (long polls and streams flush as they go).
func (r *recorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	switch {
	case r.code == 0:
		return http.StatusOK // nothing written: net/http answers 200
	case r.code > 599:
		return 599
	}
	return r.code
}
