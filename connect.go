package eim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"
)

// ConnectCredential is a secret an edge cluster's connect agent presents
// to open its tunnel (package connect). Only a hash of the secret is
// stored; the secret itself is shown once, when it is issued.
type ConnectCredential struct {
	ID      string // public part of the token, "ct-" and hex
	Project string // project name
	Cluster string // cluster name in the project
	Hash    []byte // SHA-256 of the secret part
	Created time.Time
	Expires time.Time
}

// Tunnel is an edge cluster's open tunnel as the registry holds it: which
// gateway replica holds it, where the other replicas reach that replica,
// and what the agent reported.
type Tunnel struct {
	Project      string
	Cluster      string
	Replica      string // the holder's replica ID
	Address      string // the holder's URL for forwarded requests
	AgentVersion string
	Connected    time.Time // when the tunnel opened
	LastSeen     time.Time // the holder's last successful ping
	RTT          time.Duration
}

// ConnectStore keeps the connect module's credentials and tunnel
// registry. Neither is a resource: no events, no feed.
type ConnectStore interface {
	// CreateConnectCredential stores c. When others is not nil, the
	// cluster's other credentials expire at *others at the latest (a
	// rotation leaves the old one a grace period; a revocation is now).
	CreateConnectCredential(ctx context.Context, c *ConnectCredential, others *time.Time) error
	// FindConnectCredential returns the credential id; ENOTFOUND when
	// there is none (expired ones are returned: the caller checks).
	FindConnectCredential(ctx context.Context, id string) (*ConnectCredential, error)
	// ListConnectCredentials returns the project's credentials that have
	// not expired, by cluster then creation.
	ListConnectCredentials(ctx context.Context, project string) ([]*ConnectCredential, error)
	// ExpireConnectCredentials makes every credential of the cluster
	// expire at until at the latest, and removes those long expired.
	ExpireConnectCredentials(ctx context.Context, project, cluster string, until time.Time) error

	// SaveTunnel records t as held by t.Replica, replacing whatever held
	// the cluster's tunnel before (the agent connects to one gateway at a
	// time; the newest connection wins).
	SaveTunnel(ctx context.Context, t *Tunnel) error
	// TouchTunnel updates the last ping and RTT of the tunnel replica
	// holds; it reports false when another replica holds it now.
	TouchTunnel(ctx context.Context, project, cluster, replica string, seen time.Time, rtt time.Duration) (bool, error)
	// FindTunnel returns the cluster's tunnel; ENOTFOUND when none is
	// registered.
	FindTunnel(ctx context.Context, project, cluster string) (*Tunnel, error)
	// ListTunnels returns the project's tunnels ("": every project's).
	ListTunnels(ctx context.Context, project string) ([]*Tunnel, error)
	// DeleteTunnel removes the cluster's tunnel if replica holds it.
	DeleteTunnel(ctx context.Context, project, cluster, replica string) error
	// DeleteConnectOf removes every credential and tunnel of a project's
	// clusters (the project is being deleted).
	DeleteConnectOf(ctx context.Context, project string) error
}

// ConnectTokenPrefix starts every connect token: "eimct_<id>.<secret>".
const ConnectTokenPrefix = "eimct_"

// NewConnectToken makes a credential for a cluster's connect agent and its
// token (shown once; the credential keeps only the secret's SHA-256). The
// connect module issues them through its API, the clusters module for the
// install plans of control-plane nodes.
func NewConnectToken(project, cluster string, now time.Time, ttl time.Duration) (*ConnectCredential, string, error) {
	var id [8]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, "", fmt.Errorf("token id: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, "", fmt.Errorf("token secret: %w", err)
	}
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(sec))
	c := &ConnectCredential{
		ID: "ct-" + hex.EncodeToString(id[:]), Project: project, Cluster: cluster,
		Hash: sum[:], Created: now.UTC(), Expires: now.Add(ttl).UTC(),
	}
	return c, ConnectTokenPrefix + c.ID + "." + sec, nil
}
