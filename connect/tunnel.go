package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/connect/wire"
)

// tunnel is an agent's connection this replica holds.
type tunnel struct {
	key     key
	cred    string // the credential the agent authenticated with, or rotated to (guarded by mu)
	version string
	sess    *yamux.Session
	tr      *http.Transport
	proxy   *httputil.ReverseProxy

	once   sync.Once
	cancel context.CancelFunc

	mu  sync.Mutex
	rtt time.Duration
}

func (t *tunnel) close() {
	t.once.Do(func() {
		t.cancel()
		t.sess.Close()
		t.tr.CloseIdleConnections()
	})
}

// accept is the agent listener's tunnel endpoint: it checks the token,
// takes over the connection and holds the tunnel until it closes.
func (g *Gateway) accept(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !strings.EqualFold(r.Header.Get("Upgrade"), wire.Protocol) {
		http.Error(w, "want an upgrade to "+wire.Protocol+" over HTTP/1.1", http.StatusUpgradeRequired)
		return
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		http.Error(w, "missing connect token", http.StatusUnauthorized)
		return
	}
	cred, err := checkToken(ctx, g.opts.Store, strings.TrimSpace(tok), g.opts.Now())
	if err != nil {
		g.log.Warn("connect: tunnel refused", "remote", r.RemoteAddr, "err", eim.ErrorMessage(err))
		http.Error(w, eim.ErrorMessage(err), statusOf(err))
		return
	}
	k := key{cred.Project, cred.Cluster}
	if want := r.Header.Get(wire.ClusterHeader); want != "" && want != k.String() {
		http.Error(w, fmt.Sprintf("the token is cluster %s's, not %s's", k, want), http.StatusForbidden)
		return
	}
	version := r.Header.Get(wire.VersionHeader)
	if len(version) > 64 {
		version = version[:64]
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "the tunnel needs HTTP/1.1 (the connection cannot be taken over)", http.StatusHTTPVersionNotSupported)
		return
	}
	// The listener's read and write timeouts were set on the connection
	// for this request; a tunnel lives on.
	_ = conn.SetDeadline(time.Time{})
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n%s: %s\r\n\r\n",
		wire.Protocol, wire.ExpiresHeader, cred.Expires.UTC().Format(time.RFC3339))
	if err := brw.Flush(); err != nil {
		conn.Close()
		return
	}
	sess, err := yamux.Client(wire.Conn(conn, brw.Reader), wire.Config(g.opts.Timing, false))
	if err != nil {
		conn.Close()
		return
	}
	g.hold(k, cred.ID, version, sess)
}

// hold registers the tunnel, replacing the cluster's previous one, and
// starts its loops.
func (g *Gateway) hold(k key, credID, version string, sess *yamux.Session) {
	ctx, cancel := context.WithCancel(context.Background())
	t := &tunnel{key: k, cred: credID, version: version, sess: sess, cancel: cancel}
	t.tr = &http.Transport{
		DialContext:           func(context.Context, string, string) (net.Conn, error) { return sess.Open() },
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // watches answer when they have news
		DisableCompression:    true,
	}
	t.proxy = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "tunnel" },
		Transport:     t.tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				writeError(w, eim.Errorf(eim.EUNAVAILABLE, "cluster %s: the tunnel failed: %v", k, err))
			}
		},
	}
	// A cluster may have several agents (one per control-plane node),
	// here or on other replicas: the newest tunnel serves, the others
	// stand by and take over when it ends.
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		t.close()
		return
	}
	g.tunnels[k] = append(g.tunnels[k], t)
	g.wg.Add(2)
	g.mu.Unlock()
	now := g.opts.Now()
	if err := g.opts.Store.SaveTunnel(ctx, &eim.Tunnel{Project: k.project, Cluster: k.cluster, Replica: g.opts.Replica,
		Address: g.opts.PeerURL(), AgentVersion: version, Connected: now, LastSeen: now}); err != nil {
		g.log.Warn("connect: tunnel not registered (other replicas cannot forward to it until a ping records it)", "cluster", k.String(), "err", err)
	}
	g.log.Info("connect: tunnel open", "cluster", k.String(), "agent_version", version, "credential", credID)
	go func() {
		defer g.wg.Done()
		g.control(ctx, t)
	}()
	go func() {
		defer g.wg.Done()
		g.ping(ctx, t)
		t.close()
		g.mu.Lock()
		g.tunnels[k] = slices.DeleteFunc(g.tunnels[k], func(o *tunnel) bool { return o == t })
		left := len(g.tunnels[k])
		if left == 0 {
			delete(g.tunnels, k)
		}
		g.mu.Unlock()
		if left == 0 {
			// The registry row goes with this replica's last tunnel of the
			// cluster: a standby elsewhere takes it at its next ping.
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.opts.Store.DeleteTunnel(dctx, k.project, k.cluster, g.opts.Replica); err != nil {
				g.log.Warn("connect: tunnel not unregistered", "cluster", k.String(), "err", err)
			}
		}
		g.log.Info("connect: tunnel closed", "cluster", k.String(), "left_here", left)
	}()
}

// ping checks the tunnel every interval until it fails or ends, and
// records the round-trip time in the registry. A ping not answered
// within the timeout ends the tunnel. Every TokenCheck it checks that
// the tunnel's token is still valid: a revoked or expired token (an
// agent that failed to rotate it) ends the tunnel too.
func (g *Gateway) ping(ctx context.Context, t *tunnel) {
	tick := time.NewTicker(g.opts.Timing.Interval)
	defer tick.Stop()
	checkEvery := max(int(g.opts.TokenCheck/g.opts.Timing.Interval), 1)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.sess.CloseChan():
			return
		case <-tick.C:
		}
		rtt, err := t.sess.Ping()
		if err != nil {
			g.log.Warn("connect: tunnel ping failed: closing it", "cluster", t.key.String(), "err", err)
			return
		}
		t.mu.Lock()
		t.rtt = rtt
		cred := t.cred
		t.mu.Unlock()
		if n%checkEvery == 0 {
			c, err := g.opts.Store.FindConnectCredential(ctx, cred)
			if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && !g.opts.Now().Before(c.Expires)) {
				g.log.Warn("connect: the tunnel's token expired or was revoked: closing it", "cluster", t.key.String(), "credential", cred)
				return
			}
		}
		held, err := g.opts.Store.TouchTunnel(ctx, t.key.project, t.key.cluster, g.opts.Replica, g.opts.Now(), rtt)
		if err == nil && !held {
			// Another replica holds the cluster's row (a newer agent's
			// tunnel: this one stands by), or nobody does (the holder's
			// tunnel ended, or its replica died and its pings stopped):
			// then this replica takes the cluster over.
			other, ferr := g.opts.Store.FindTunnel(ctx, t.key.project, t.key.cluster)
			stale := g.opts.Now().Add(-3 * g.opts.Timing.Interval)
			if ferr == nil && other.Replica != g.opts.Replica && other.LastSeen.After(stale) {
				continue
			}
			if ferr != nil && eim.ErrorCode(ferr) != eim.ENOTFOUND {
				err = ferr
			} else {
				now := g.opts.Now()
				err = g.opts.Store.SaveTunnel(ctx, &eim.Tunnel{Project: t.key.project, Cluster: t.key.cluster, Replica: g.opts.Replica,
					Address: g.opts.PeerURL(), AgentVersion: t.version, Connected: now, LastSeen: now, RTT: rtt})
				if err == nil {
					g.log.Info("connect: took the cluster over", "cluster", t.key.String())
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			g.log.Warn("connect: tunnel heartbeat not recorded", "cluster", t.key.String(), "err", err)
		}
	}
}

// control serves the streams the agent opens: token rotation.
func (g *Gateway) control(ctx context.Context, t *tunnel) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.RotatePath, func(w http.ResponseWriter, r *http.Request) {
		c, tok, err := newToken(t.key.project, t.key.cluster, g.opts.Now(), g.opts.TokenTTL)
		if err == nil {
			// The old token stays valid until its own expiry: a cluster's
			// agents may share it (one per control-plane node), each
			// rotating its own copy. Revocation ends them all.
			err = g.opts.Store.CreateConnectCredential(r.Context(), c, nil)
		}
		if err != nil {
			g.log.Warn("connect: token rotation failed", "cluster", t.key.String(), "err", err)
			writeError(w, err)
			return
		}
		t.mu.Lock()
		t.cred = c.ID // the tunnel lives on the new token now
		t.mu.Unlock()
		g.log.Info("connect: agent token rotated", "cluster", t.key.String(), "credential", c.ID, "expires", c.Expires)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(wire.Token{Token: tok, Expires: c.Expires})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		select {
		case <-ctx.Done():
		case <-t.sess.CloseChan():
		}
		srv.Close()
	}()
	_ = srv.Serve(t.sess)
}
