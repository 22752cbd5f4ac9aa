package connect

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// call is what an API handler works with.
type call struct {
	p       *eim.Principal
	proj    *eim.Project
	cluster string // "" on the list
}

// api wraps the connect API's handlers: authenticate, find the project
// (by name, or by ID as the original's clients name it), check the role:
// a read role for GET, a write role on the project for the rest.
func (g *Gateway) api(fn func(w http.ResponseWriter, r *http.Request, c *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.serveAPI(w, r, fn); err != nil {
			writeError(w, err)
		}
	})
}

func (g *Gateway) serveAPI(w http.ResponseWriter, r *http.Request, fn func(http.ResponseWriter, *http.Request, *call) error) error {
	p, err := g.authenticate(r)
	if err != nil {
		return err
	}
	proj, err := apiv2.Project(r, g.opts.Store)
	if err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		err = allowed(p, proj, r.Method)
	} else if !p.CanWrite(proj) {
		err = eim.Errorf(eim.EFORBIDDEN, "connect tokens of project %q are issued by its writers (%s)", proj.Name, eim.ProjectRole(proj, true))
	}
	if err != nil {
		return err
	}
	c := &call{p: p, proj: proj, cluster: r.PathValue("cluster")}
	if c.cluster != "" && !eim.ValidClusterName(c.cluster) {
		return eim.Errorf(eim.EINVALID, "cluster: %q is not a cluster name (letters, digits, '-' and '.', at most 63)", c.cluster)
	}
	return fn(w, r, c)
}

// IssuedToken is the answer of a token issue: the token is shown once.
type IssuedToken struct {
	ID      string    `json:"id"`
	Cluster string    `json:"cluster"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// issue makes a new connect token for the cluster. The cluster's other
// tokens expire at once, or after ?grace=DURATION (a planned rotation).
// ?ttl=DURATION sets the lifetime (the gateway's default otherwise).
func (g *Gateway) issue(w http.ResponseWriter, r *http.Request, c *call) error {
	ttl := g.opts.TokenTTL
	if s := r.URL.Query().Get("ttl"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute || d > 366*24*time.Hour {
			return eim.Errorf(eim.EINVALID, "ttl: %q is not a duration from 1m to 8784h", s)
		}
		ttl = d
	}
	now := g.opts.Now()
	others := now
	if s := r.URL.Query().Get("grace"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > 30*24*time.Hour {
			return eim.Errorf(eim.EINVALID, "grace: %q is not a duration from 0 to 720h", s)
		}
		others = now.Add(d)
	}
	cred, tok, err := newToken(c.proj.Name, c.cluster, now, ttl)
	if err != nil {
		return err
	}
	if err := g.opts.Store.CreateConnectCredential(r.Context(), cred, &others); err != nil {
		return err
	}
	g.log.Info("connect: token issued", "cluster", key{c.proj.Name, c.cluster}.String(), "credential", cred.ID, "by", c.p.Subject, "expires", cred.Expires)
	writeJSON(w, http.StatusCreated, IssuedToken{ID: cred.ID, Cluster: c.cluster, Token: tok, Expires: cred.Expires})
	return nil
}

// revoke makes every token of the cluster expire now. A tunnel open
// already stays until it drops; the agent cannot open another.
func (g *Gateway) revoke(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := g.opts.Store.ExpireConnectCredentials(r.Context(), c.proj.Name, c.cluster, g.opts.Now()); err != nil {
		return err
	}
	g.log.Info("connect: tokens revoked", "cluster", key{c.proj.Name, c.cluster}.String(), "by", c.p.Subject)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Connection is a cluster's tunnel as the API shows it.
type Connection struct {
	Cluster      string     `json:"cluster"`
	Connected    bool       `json:"connected"`
	LastSeen     *time.Time `json:"lastSeen,omitempty"`
	AgentVersion string     `json:"agentVersion,omitempty"`
	// RTTMillis is the last ping's round-trip time through the tunnel.
	RTTMillis    float64    `json:"rttMillis,omitempty"`
	Replica      string     `json:"replica,omitempty"`
	TokenExpires *time.Time `json:"tokenExpires,omitempty"`
}

// ConnectionList is the answer of the list.
type ConnectionList struct {
	Clusters []Connection `json:"clusters"`
}

func (g *Gateway) connections(r *http.Request, project, only string) ([]Connection, error) {
	creds, err := g.opts.Store.ListConnectCredentials(r.Context(), project)
	if err != nil {
		return nil, err
	}
	ts, err := g.opts.Store.ListTunnels(r.Context(), project)
	if err != nil {
		return nil, err
	}
	by := map[string]*Connection{}
	get := func(name string) *Connection {
		if by[name] == nil {
			by[name] = &Connection{Cluster: name}
		}
		return by[name]
	}
	for _, c := range creds {
		if only != "" && c.Cluster != only {
			continue
		}
		cn := get(c.Cluster)
		if cn.TokenExpires == nil || c.Expires.After(*cn.TokenExpires) {
			e := c.Expires
			cn.TokenExpires = &e
		}
	}
	// A tunnel is connected while its holder's pings are recorded: a
	// holder that died leaves its row, whose lastSeen then ages.
	stale := g.opts.Now().Add(-3 * g.opts.Timing.Interval)
	for _, t := range ts {
		if only != "" && t.Cluster != only {
			continue
		}
		cn := get(t.Cluster)
		seen := t.LastSeen
		cn.LastSeen, cn.AgentVersion, cn.Replica = &seen, t.AgentVersion, t.Replica
		cn.RTTMillis = float64(t.RTT.Microseconds()) / 1000
		cn.Connected = seen.After(stale)
	}
	out := make([]Connection, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Connection) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out, nil
}

func (g *Gateway) list(w http.ResponseWriter, r *http.Request, c *call) error {
	cs, err := g.connections(r, c.proj.Name, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ConnectionList{Clusters: cs})
	return nil
}

func (g *Gateway) get(w http.ResponseWriter, r *http.Request, c *call) error {
	cs, err := g.connections(r, c.proj.Name, c.cluster)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return eim.Errorf(eim.ENOTFOUND, "cluster %q of project %q has no connect token and no tunnel", c.cluster, c.proj.Name)
	}
	writeJSON(w, http.StatusOK, cs[0])
	return nil
}

// Kubeconfig is the answer of the kubeconfigs endpoint, as the original's.
type Kubeconfig struct {
	Kubeconfig string `json:"kubeconfig"`
}

// kubeconfig returns a kubeconfig that reaches the cluster through this
// gateway with a short-lived token for the caller, carrying only the
// caller's roles on this project.
func (g *Gateway) kubeconfig(w http.ResponseWriter, r *http.Request, c *call) error {
	if g.opts.Minter == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "this server has no local token issuer: kubeconfigs cannot be issued")
	}
	if g.opts.ClustersDeployed != nil && g.opts.ClustersDeployed() {
		if _, err := g.opts.Store.FindCluster(r.Context(), c.proj.Name, c.cluster); err != nil {
			if eim.ErrorCode(err) == eim.ENOTFOUND {
				// The original's words.
				return eim.Errorf(eim.ENOTFOUND, "kubeconfig not found: project %q has no cluster %q", c.proj.Name, c.cluster)
			}
			return err
		}
	}
	var roles []string
	for _, role := range c.p.Roles {
		if role == eim.RoleAdmin || strings.HasPrefix(role, c.proj.Name+"_") || (c.proj.ID != "" && strings.HasPrefix(role, c.proj.ID+"_")) {
			roles = append(roles, role)
		}
	}
	tok, err := g.opts.Minter.Mint(c.p.Subject, roles, g.opts.KubeconfigTTL)
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	host := r.Host
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		host = fh
	}
	target := c.proj.Name
	if c.proj.ID != "" {
		target = c.proj.ID
	}
	name := c.proj.Name + "-" + c.cluster
	server := fmt.Sprintf("%s://%s/kubernetes/%s-%s", scheme, host, target, c.cluster)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]q
  cluster:
    server: %[2]q
users:
- name: %[3]q
  user:
    token: %[4]q
contexts:
- name: %[1]q
  context:
    cluster: %[1]q
    user: %[3]q
current-context: %[1]q
`, name, server, c.p.Subject+"@"+name, tok)
	writeJSON(w, http.StatusOK, Kubeconfig{Kubeconfig: kc})
	return nil
}
