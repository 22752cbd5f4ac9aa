// Package clusters is EIM's clusters module: Kubernetes (k3s) clusters
// built from a project's hosts, from versioned cluster templates, behind
// the original cluster manager's v2 API.
//
// The API writes what a cluster should be (its template, its nodes and
// their roles, a removal, a deletion); the reconciler — one process of the
// deployment at a time, woken by the change feed — decides each node's
// install plan from that and from what the nodes report (the first
// control-plane node initialises the cluster, the others join it one
// control-plane node at a time, workers once it is up; upgrades roll one
// node at a time and stop at the first failure; removals drain first),
// and derives the cluster's status. Nodes learn that their plan changed
// from heartbeat answers (Versions, kept in memory by every process that
// runs the host module) and fetch it through ClusterService (plan.go),
// authenticated by their own token.
package clusters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/seal"
)

// Options configure a Service. Store, Inventory and Key are required.
type Options struct {
	Store     eim.Store
	Inventory *inventory.Service
	// Authenticator verifies the API's callers (auth.Verifier); required
	// for Routes.
	Authenticator apiv2.Authenticator
	// Key seals the clusters' join and connect tokens in the database.
	Key     *seal.Key
	Logger  *slog.Logger
	Metrics prometheus.Registerer
	Now     func() time.Time
	// AgentURL is the agent listener's URL (https://…): the connect
	// agents of control-plane nodes dial it, and nodes download the
	// artifact store's files from it.
	AgentURL string
	// Artifacts is the artifact store's directory ("" none): see
	// artifacts.go.
	Artifacts string
	// Connect says whether the connect module runs in the deployment:
	// control-plane nodes' plans then carry a connect token and agent.
	Connect func() bool
	// ConnectTokenTTL is the lifetime of the connect tokens issued for
	// plans (30 days when zero); a token with a third of it left is
	// replaced.
	ConnectTokenTTL time.Duration
	// Relist is how often every cluster is reconciled again (default
	// 30 s); DrainTimeout bounds a node's drain (default 10 min).
	Relist       time.Duration
	DrainTimeout time.Duration
	// RetryWait is the first pause of the feed runners after a failure.
	RetryWait time.Duration
}

// Service is the clusters module: its API, its reconciler, the nodes'
// service and the heartbeats' plan versions.
type Service struct {
	o        Options
	log      *slog.Logger
	versions *Versions
	sums     artifactSums
}

// New returns a Service.
func New(o Options) *Service {
	if o.Store == nil || o.Key == nil {
		panic("clusters.New: Store and Key are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Connect == nil {
		o.Connect = func() bool { return false }
	}
	if o.ConnectTokenTTL <= 0 {
		o.ConnectTokenTTL = 30 * 24 * time.Hour
	}
	if o.Relist <= 0 {
		o.Relist = 30 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Minute
	}
	s := &Service{o: o, log: o.Logger.With("module", "clusters")}
	s.versions = newVersions(o.Store, s.log, o.Metrics, o.RetryWait)
	return s
}

// Versions is the per-host cache of plan versions that heartbeats read.
func (s *Service) Versions() *Versions { return s.versions }

// Version implements hostmgr.Clusters: the version of the host's plan,
// from memory.
func (s *Service) Version(ctx context.Context, project, hostID string) string {
	return s.versions.Version(project, hostID)
}

// adJoin and adConnect bind a sealed token to its cluster and purpose.
func adJoin(c *eim.Cluster) string    { return c.Project + "/" + c.ID + "/join" }
func adConnect(c *eim.Cluster) string { return c.Project + "/" + c.ID + "/connect" }

// newJoinToken makes a cluster's k3s token: 32 random bytes, hex.
func newJoinToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}
