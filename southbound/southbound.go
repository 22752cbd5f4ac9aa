// Package southbound is the agent-facing API server: the HTTPS handler that
// nodes talk to. It authenticates nodes and leaves the protocol to the
// modules, which mount their Connect handlers on it.
//
// A node gets its client credentials from the onboarding module's Discover
// (client ID "edgenode-<hostID>", a random secret of which the host keeps
// only a hash), exchanges them at /oauth2/token for a short-lived node token
// (OAuth2 client credentials, RFC 6749 §4.4), and sends that as a bearer token
// on every other call. Interceptor checks the token and then the host itself,
// so invalidating or deleting a host, or issuing it new credentials, cuts its
// node off at once rather than when the token expires.
package southbound

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/metrics"
)

// Defaults of Options.
const (
	DefaultTokenTTL     = 15 * time.Minute
	DefaultMaxBodyBytes = 4 << 20
	// maxTokenRequest bounds the body of a token request; a real one is
	// about 150 bytes.
	maxTokenRequest = 8 << 10
)

// Options configure a Server. Store and Issuer are required.
type Options struct {
	Store  eim.Store
	Issuer *auth.Issuer
	// Logger receives one line per refused token request, and the
	// credential cache's; nil discards.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// TokenTTL is the lifetime of node tokens; default 15 minutes.
	TokenTTL time.Duration
	// MaxBodyBytes bounds the request body of mounted handlers; default 4 MiB.
	MaxBodyBytes int64
	// TokenLeeway is how long past its expiry a node token is still
	// accepted (clock skew); 0 means auth.DefaultLeeway, negative none.
	TokenLeeway time.Duration
	// Metrics, when set, gets the token endpoint's counts
	// (eim_node_token_requests_total).
	Metrics prometheus.Registerer
	// TokenRate is how many token requests a second the token endpoint
	// serves, TokenBurst how many more at once (0: DefaultTokenRate,
	// DefaultTokenBurst; a negative rate: no bound). The others are
	// answered 503 temporarily_unavailable with a Retry-After that spreads
	// them over the time the rate needs (admission.go).
	TokenRate  float64
	TokenBurst int
	// Hosts is the process's shared per-host view, which node
	// authentication reads on every call; nil: the server keeps a view
	// of its own, which Run follows.
	Hosts *hostview.View
}

// Server is the southbound HTTP handler: /oauth2/token and the mounted
// Connect handlers. Serve it over TLS (see pki).
type Server struct {
	store    eim.Store
	issuer   *auth.Issuer
	verifier *auth.NodeVerifier
	log      *slog.Logger
	now      func() time.Time
	ttl      time.Duration
	maxBody  int64
	mux      *http.ServeMux
	hosts    *hostview.View
	ownHosts bool

	// admission bounds the rate of token requests served (nil: none).
	admission *admission

	// tokens counts the token requests by result.
	tokens   *prometheus.CounterVec
	issued   prometheus.Counter
	deferred prometheus.Counter

	// storeWarn's count of failed calls and when it last logged.
	storeFails  atomic.Int64
	storeWarned atomic.Int64
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Store == nil || opts.Issuer == nil {
		panic("southbound.New: Store and Issuer are required")
	}
	s := &Server{
		store:   opts.Store,
		issuer:  opts.Issuer,
		log:     opts.Logger,
		now:     opts.Now,
		ttl:     opts.TokenTTL,
		maxBody: opts.MaxBodyBytes,
		mux:     http.NewServeMux(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.ttl <= 0 {
		s.ttl = DefaultTokenTTL
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	leeway := opts.TokenLeeway
	switch {
	case leeway == 0:
		leeway = auth.DefaultLeeway
	case leeway < 0:
		leeway = 0
	}
	tokenRate, tokenBurst := opts.TokenRate, opts.TokenBurst
	if tokenRate == 0 {
		tokenRate = DefaultTokenRate
	}
	if tokenBurst <= 0 {
		tokenBurst = DefaultTokenBurst
	}
	s.admission = newAdmission(tokenRate, tokenBurst)
	s.verifier = auth.NewNodeVerifier(opts.Issuer, leeway, s.now)
	s.hosts, s.ownHosts = hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: s.log, Now: s.now, Metrics: opts.Metrics})
	s.tokens = metrics.Register(opts.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_node_token_requests_total",
		Help: "Node token requests (POST /oauth2/token) by result: \"issued\"; \"deferred\" (beyond the endpoint's rate: asked to retry after a while); or the OAuth error code of the refusal."},
		[]string{"result"}))
	s.issued = s.tokens.WithLabelValues("issued")
	s.deferred = s.tokens.WithLabelValues("deferred")
	s.mux.HandleFunc(TokenPath, s.token)
	return s
}

// TokenPath is where nodes exchange their client credentials for a token.
const TokenPath = "/oauth2/token"

// Mount serves h under path (a ServeMux pattern, e.g. the path returned by
// onboardingv1connect.NewOnboardingServiceHandler), with the body limit.
func (s *Server) Mount(path string, h http.Handler) {
	limit := s.maxBody
	s.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	}))
}

// MountStream serves h under path without the body limit: for a handler
// that bounds its body itself (the embedded object store's uploads, whose
// size a signed grant names).
func (s *Server) MountStream(path string, h http.Handler) {
	s.mux.Handle(path, h)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}
