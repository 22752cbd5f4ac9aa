package connect

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// forwardHeader marks a request one replica forwarded to the holder of
// the tunnel; the holder does not forward it again.
const forwardHeader = "Eim-Connect-Forwarded"

// UserPrefix and GroupPrefix are put before the caller's subject and
// roles in the impersonation headers, so that no EIM name can pass for a
// Kubernetes built-in one (system:masters): bind RBAC roles to "eim:…".
const (
	UserPrefix  = "eim:"
	GroupPrefix = "eim:"
)

// proxy serves /kubernetes/{project}-{cluster}/…: the caller's request,
// as the caller (impersonated), to the cluster's API through its tunnel,
// here or on the replica that holds it.
func (g *Gateway) proxy(w http.ResponseWriter, r *http.Request) {
	start := g.opts.Now()
	target, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/kubernetes/"), "/")
	p, err := g.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	proj, cluster, err := g.resolve(r.Context(), target, p, r.Method)
	if err != nil {
		writeError(w, err)
		return
	}
	k := key{proj.Name, cluster}
	// Watches and upgraded streams outlive the listener's timeouts.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	rec := &recorder{ResponseWriter: w}
	holder := g.opts.Replica
	forwarded, unanswered := false, new(bool)
	defer func() {
		if forwarded && !*unanswered {
			return // the replica holding the tunnel recorded it
		}
		g.record(Record{Time: start, Subject: p.Subject, Project: k.project, Cluster: k.cluster, Method: r.Method,
			Path: "/" + rest, Status: rec.status, Upgrade: r.Header.Get("Upgrade"), Replica: holder, Duration: g.opts.Now().Sub(start)})
	}()

	var t *tunnel
	g.mu.Lock()
	if l := g.tunnels[k]; len(l) > 0 {
		t = l[len(l)-1]
	}
	g.mu.Unlock()
	if t != nil {
		out := r.Clone(r.Context())
		out.URL.Path, out.URL.RawPath = "/"+rest, ""
		out.Header.Del(forwardHeader)
		impersonate(out.Header, p)
		t.proxy.ServeHTTP(rec, out)
		return
	}
	reg, err := g.opts.Store.FindTunnel(r.Context(), k.project, k.cluster)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && reg.Replica == g.opts.Replica):
		writeError(rec, eim.Errorf(eim.EUNAVAILABLE, "cluster %q of project %q is not connected (no agent holds a tunnel)", k.cluster, k.project))
		return
	case err != nil:
		writeError(rec, err)
		return
	case r.Header.Get(forwardHeader) != "":
		writeError(rec, eim.Errorf(eim.EUNAVAILABLE, "cluster %q: the replica %s forwarded here does not hold its tunnel (it moved: try again)", k.cluster, r.Header.Get(forwardHeader)))
		return
	}
	holder = reg.Replica
	fwd, err := g.forwarder(reg.Address)
	if err != nil {
		writeError(rec, eim.Errorf(eim.EUNAVAILABLE, "cluster %q: its tunnel's replica %s: %v", k.cluster, reg.Replica, err))
		return
	}
	out := r.Clone(context.WithValue(r.Context(), unansweredKey{}, unanswered))
	out.Header.Set(forwardHeader, g.opts.Replica)
	forwarded = true
	fwd.ServeHTTP(rec, out)
}

// unansweredKey marks a forwarded request the holder's replica did not
// answer (*bool in its context, set by the forwarder's error handler).
type unansweredKey struct{}

// forwarder returns the reverse proxy to a replica's address.
func (g *Gateway) forwarder(addr string) (*httputil.ReverseProxy, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.forwarders[addr]; ok {
		return f, nil
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "replica address %q is not an http(s) URL", addr)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = false
	tr.MaxIdleConnsPerHost = 64
	tr.DisableCompression = true
	f := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header[forwardHeader] = pr.In.Header[forwardHeader]
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if u, ok := r.Context().Value(unansweredKey{}).(*bool); ok {
				*u = true // the forwarding replica records the request
			}
			if r.Context().Err() == nil {
				writeError(w, eim.Errorf(eim.EUNAVAILABLE, "the replica holding the tunnel (%s) did not answer: %v", addr, err))
			}
		},
	}
	if g.forwarders == nil {
		g.forwarders = map[string]*httputil.ReverseProxy{}
	}
	g.forwarders[addr] = f
	return f, nil
}

// impersonate replaces the caller's credentials and any impersonation
// they asked for with the caller's own identity, for the cluster's RBAC.
// The agent adds its own credentials upstream.
func impersonate(h http.Header, p *eim.Principal) {
	h.Del("Authorization")
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "impersonate-") {
			delete(h, name)
		}
	}
	h.Set("Impersonate-User", UserPrefix+p.Subject)
	for _, role := range p.Roles {
		h.Add("Impersonate-Group", GroupPrefix+role)
	}
}

// authenticate reads the caller's bearer token.
func (g *Gateway) authenticate(r *http.Request) (*eim.Principal, error) {
	return apiv2.Authenticate(r, g.opts.Authenticator)
}

// resolve finds the project and cluster of "{project}-{cluster}" (the
// project by ID, as the original's kubeconfigs name it, or by name; a
// name with hyphens is tried at each of them) that the caller may reach
// with method.
func (g *Gateway) resolve(ctx context.Context, target string, p *eim.Principal, method string) (*eim.Project, string, error) {
	now := g.opts.Now()
	g.mu.Lock()
	r, ok := g.resolved[target]
	g.mu.Unlock()
	if ok && now.Before(r.expires) {
		if err := allowed(p, r.proj, method); err != nil {
			return nil, "", err
		}
		return r.proj, r.cluster, nil
	}
	proj, cluster, err := g.lookup(ctx, target, p, method)
	if err == nil && g.connected(ctx, key{proj.Name, cluster}) {
		// A connected cluster's target is kept a little: a name with
		// hyphens costs a lookup per hyphen, and a watch's reconnects and
		// kubectl's discovery come in bursts.
		g.mu.Lock()
		if len(g.resolved) >= maxResolved {
			clear(g.resolved)
		}
		if g.resolved == nil {
			g.resolved = map[string]resolution{}
		}
		g.resolved[target] = resolution{proj: proj, cluster: cluster, expires: now.Add(resolveTTL)}
		g.mu.Unlock()
	}
	return proj, cluster, err
}

// resolution is a target's project and cluster, as resolve found them.
type resolution struct {
	proj    *eim.Project
	cluster string
	expires time.Time
}

const (
	resolveTTL  = 30 * time.Second
	maxResolved = 10000
)

// lookup is resolve without its cache.
func (g *Gateway) lookup(ctx context.Context, target string, p *eim.Principal, method string) (*eim.Project, string, error) {
	if len(target) > 37 && target[36] == '-' && apiv2.UUID.MatchString(target[:36]) {
		proj, err := g.opts.Store.FindProjectByID(ctx, target[:36])
		if err == nil {
			if err := allowed(p, proj, method); err != nil {
				return nil, "", err
			}
			return proj, target[37:], nil
		}
		if eim.ErrorCode(err) != eim.ENOTFOUND {
			return nil, "", err
		}
	}
	var found *eim.Project
	var cluster string
	for i := 0; i < len(target); i++ {
		if target[i] != '-' || i == 0 || i == len(target)-1 {
			continue
		}
		proj, err := g.opts.Store.FindProject(ctx, target[:i])
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if allowed(p, proj, method) != nil {
			continue
		}
		if found == nil {
			found, cluster = proj, target[i+1:]
		}
		if g.connected(ctx, key{proj.Name, target[i+1:]}) {
			return proj, target[i+1:], nil
		}
	}
	if found == nil {
		return nil, "", eim.Errorf(eim.EFORBIDDEN, "no access to cluster %q (want /kubernetes/{project}-{cluster}/ and a role on the project)", target)
	}
	return found, cluster, nil
}

// connected reports whether the cluster has a tunnel here or in the
// registry.
func (g *Gateway) connected(ctx context.Context, k key) bool {
	g.mu.Lock()
	_, ok := g.tunnels[k]
	g.mu.Unlock()
	if ok {
		return true
	}
	_, err := g.opts.Store.FindTunnel(ctx, k.project, k.cluster)
	return err == nil
}

// allowed checks the caller's role on the project for a request of
// method (apiv2.ClusterAccess): reads need a read role, anything else a
// write role. The cluster's RBAC then decides for the impersonated
// caller.
func allowed(p *eim.Principal, proj *eim.Project, method string) error {
	return apiv2.ClusterAccess(p, proj, method)
}

// recorder keeps the status of a response; Unwrap lets the reverse
// proxy take the connection over for upgrades and flush watches.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func statusOf(err error) int { return apiv2.Status(err) }

func writeError(w http.ResponseWriter, err error) { apiv2.WriteError(w, err) }

func writeJSON(w http.ResponseWriter, status int, v any) { apiv2.WriteJSON(w, status, v) }
