// Package connect is the gateway of the connect tunnel: edge clusters
// behind NAT reach out to it (eim-agent connect), and users reach each
// cluster's Kubernetes API through it at /kubernetes/{project}-{cluster}/
// with their EIM token, impersonated so that the cluster's own RBAC
// decides what each user may do.
//
// The agent opens one long-lived connection to the agent listener (an
// HTTP upgrade over TLS, the CA the agent pins) authenticated by the
// cluster's connect token, and both ends run yamux over it (package
// wire). The tunnels a replica holds are in memory; the registry in the
// database says which replica holds which cluster's tunnel and where the
// others reach it, so a request that lands on another replica is
// forwarded to the holder.
package connect

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/connect/wire"
)

// Authenticator verifies a user's bearer token (auth.Verifier).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*eim.Principal, error)
}

// Minter issues EIM tokens (auth.Issuer): the kubeconfig's.
type Minter interface {
	Mint(subject string, roles []string, ttl time.Duration) (string, error)
}

// Record is one proxied request, for an audit log.
type Record struct {
	Time     time.Time
	Subject  string
	Project  string
	Cluster  string
	Method   string
	Path     string
	Status   int
	Upgrade  string // the Upgrade header of an upgrade request
	Replica  string // the replica that holds the tunnel
	Duration time.Duration
}

// Options configure a Gateway. Store, Authenticator and Replica are
// required.
type Options struct {
	Store         eim.Store
	Authenticator Authenticator
	Minter        Minter
	Logger        *slog.Logger
	// Replica is this process's replica ID; PeerURL returns the URL of its
	// HTTP listener as the other replicas reach it (asked when a tunnel
	// opens: the listener may be bound after the gateway is built).
	Replica string
	PeerURL func() string
	// Timing of the tunnels' pings (wire.DefaultTiming when zero).
	Timing wire.Timing
	// TokenTTL is the lifetime of the connect tokens the gateway issues
	// (30 days when zero); agents rotate theirs when a third is left.
	TokenTTL time.Duration
	// TokenCheck is how often an open tunnel's token is checked again
	// (a revoked or expired one closes the tunnel); 1 minute when zero.
	TokenCheck time.Duration
	// KubeconfigTTL is the lifetime of a kubeconfig's token (1 h when
	// zero).
	KubeconfigTTL time.Duration
	// ClustersDeployed, when set, says whether the clusters module runs
	// in the deployment: the kubeconfig of a cluster it does not know is
	// then 404 (without it any name is served: clusters made elsewhere).
	ClustersDeployed func() bool
	// Audit, when set, receives every proxied request; otherwise they are
	// written to the store's audit log (see audit.go).
	Audit func(Record)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Gateway holds this replica's tunnels and serves the agents' tunnel
// endpoint, the users' proxy and the connect API.
type Gateway struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	tunnels    map[key][]*tunnel                 // the newest last
	forwarders map[string]*httputil.ReverseProxy // by replica address
	resolved   map[string]resolution             // by /kubernetes/{target}
	closed     bool
	wg         sync.WaitGroup // the tunnels' goroutines
	audit      auditLog
}

// key names a cluster.
type key struct{ project, cluster string }

func (k key) String() string { return k.project + "/" + k.cluster }

// New returns a Gateway.
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 30 * 24 * time.Hour
	}
	if opts.TokenCheck <= 0 {
		opts.TokenCheck = time.Minute
	}
	if opts.KubeconfigTTL <= 0 {
		opts.KubeconfigTTL = time.Hour
	}
	if opts.PeerURL == nil {
		opts.PeerURL = func() string { return "" }
	}
	if opts.Timing.Interval <= 0 {
		opts.Timing.Interval = wire.DefaultTiming.Interval
	}
	if opts.Timing.Timeout <= 0 {
		opts.Timing.Timeout = wire.DefaultTiming.Timeout
	}
	return &Gateway{opts: opts, log: opts.Logger, tunnels: map[key][]*tunnel{}, audit: auditLog{wake: make(chan struct{}, 1)}}
}

// Run waits for ctx to end, then closes the tunnels this replica holds
// (their agents reconnect to another replica) and waits for their
// goroutines.
func (g *Gateway) Run(ctx context.Context) error {
	g.writeAudit(ctx) // until ctx ends (at once when Options.Audit takes the records)
	<-ctx.Done()
	g.mu.Lock()
	g.closed = true
	var ts []*tunnel
	for _, l := range g.tunnels {
		ts = append(ts, l...)
	}
	g.mu.Unlock()
	for _, t := range ts {
		t.close()
	}
	g.wg.Wait()
	g.mu.Lock()
	g.closed = false // a Run after this one starts afresh
	g.mu.Unlock()
	return nil
}

// Held returns how many clusters this replica holds tunnels of.
func (g *Gateway) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.tunnels)
}

// AgentRoutes are mounted on the agent listener; Routes on the HTTP one.
func (g *Gateway) AgentRoutes() map[string]http.Handler {
	return map[string]http.Handler{"GET " + wire.Path: http.HandlerFunc(g.accept)}
}

// Routes are the users' proxy and the connect API.
func (g *Gateway) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"/kubernetes/": http.HandlerFunc(g.proxy),
		"POST /v2/projects/{projectName}/connect/clusters/{cluster}/token":   g.api(g.issue),
		"DELETE /v2/projects/{projectName}/connect/clusters/{cluster}/token": g.api(g.revoke),
		"GET /v2/projects/{projectName}/connect/clusters":                    g.api(g.list),
		"GET /v2/projects/{projectName}/connect/clusters/{cluster}":          g.api(g.get),
		"GET /v2/projects/{projectName}/clusters/{cluster}/kubeconfigs":      g.api(g.kubeconfig),
		// The original's form: the project's ID in the Activeprojectid
		// header.
		"GET /v2/clusters/{cluster}/kubeconfigs": g.api(g.kubeconfig),
	}
}
