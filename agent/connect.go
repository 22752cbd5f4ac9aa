package agent

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/eimhq/eim/connect/wire"
)

// Connect is the agent of the connect tunnel (eim-agent connect): it
// dials out to the gateway (the agent listener, TLS with the pinned CA),
// authenticates with the cluster's connect token and serves the
// gateway's streams by proxying them to its one upstream, the cluster's
// Kubernetes API, with its own upstream credentials. It reconnects with
// back-off and jitter, finds a dead connection by pings with deadlines,
// and rotates its token over the tunnel before it expires.
type Connect struct {
	// Server is the gateway's agent listener (https); Pin the CA trusted.
	Server string
	Pin    *Pin
	// Cluster is "project/cluster"; the gateway checks it against the
	// token's.
	Cluster string
	// TokenFile holds the connect token; rotated tokens replace it
	// atomically.
	TokenFile string
	// Upstream is the one address streams are proxied to; Transport
	// reaches it (TLS to the API server with its CA, a client
	// certificate); UpstreamToken, when set, returns the bearer token the
	// agent presents upstream.
	Upstream      *url.URL
	Transport     *http.Transport
	UpstreamToken func() (string, error)
	Timing        wire.Timing
	Backoff       Backoff
	Logger        *slog.Logger
	Version       string
	// OnConnect, when set, is told each time a tunnel opens.
	OnConnect func()
}

// Run keeps the tunnel open until ctx ends.
func (c *Connect) Run(ctx context.Context) error {
	if c.Upstream == nil || c.Upstream.Host == "" {
		return errors.New("connect: no upstream")
	}
	proxy := c.upstreamProxy()
	r := &retrier{b: c.Backoff}
	for {
		start := time.Now()
		err := c.session(ctx, proxy)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			r.reset() // the tunnel was up a while: reconnect soon
		}
		d := r.next(err)
		c.log().Warn("tunnel closed; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		if err := sleep(ctx, d); err != nil {
			return nil
		}
	}
}

func (c *Connect) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// upstreamProxy forwards the gateway's requests to the upstream and no
// other address: the dialer ignores the address asked for.
func (c *Connect) upstreamProxy() *httputil.ReverseProxy {
	tr := c.Transport
	if tr == nil {
		tr = &http.Transport{}
	}
	tr = tr.Clone()
	host := c.Upstream.Host
	if c.Upstream.Port() == "" {
		host = net.JoinHostPort(c.Upstream.Hostname(), map[string]string{"https": "443", "http": "80"}[c.Upstream.Scheme])
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", host) }
	tr.Proxy = nil
	// HTTP/1.1 upstream: upgrades (exec, attach, port-forward) need it.
	tr.ForceAttemptHTTP2 = false
	tr.MaxIdleConnsPerHost = 64
	tr.DisableCompression = true
	up := c.Upstream
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Host = up.Host
			pr.Out.Header.Del("Authorization")
			if c.UpstreamToken != nil {
				if tok, err := c.UpstreamToken(); err == nil && tok != "" {
					pr.Out.Header.Set("Authorization", "Bearer "+tok)
				}
			}
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c.log().Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			http.Error(w, "eim-agent connect: upstream "+up.Redacted()+": "+err.Error(), http.StatusBadGateway)
		},
	}
}

// readToken reads the token file.
func (c *Connect) readToken() (string, error) {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("connect token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("connect token: %s is empty", c.TokenFile)
	}
	return tok, nil
}

// session opens one tunnel and serves it until it ends.
func (c *Connect) session(ctx context.Context, proxy http.Handler) error {
	tok, err := c.readToken()
	if err != nil {
		return err
	}
	conn, expires, err := c.dial(ctx, tok)
	if err != nil {
		return err
	}
	t := c.Timing
	sess, err := yamux.Server(conn, wire.Config(t, true))
	if err != nil {
		conn.Close()
		return err
	}
	defer sess.Close()
	c.log().Info("tunnel open", "server", c.Server, "token_expires", expires)
	if c.OnConnect != nil {
		c.OnConnect()
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 30 * time.Second, ErrorLog: nil}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = srv.Serve(sess)
	}()
	go func() {
		defer wg.Done()
		c.rotate(sctx, sess, expires)
	}()
	select {
	case <-ctx.Done():
	case <-sess.CloseChan():
	}
	cancel()
	sess.Close()
	srv.Close()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("the tunnel's connection ended (the gateway went away, or its pings were not answered in time)")
}

// dial opens the connection and upgrades it; it returns the connection
// and the token's expiry.
func (c *Connect) dial(ctx context.Context, tok string) (net.Conn, time.Time, error) {
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, time.Time{}, fmt.Errorf("server %q is not an https URL", c.Server)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg := c.Pin.TLSConfig()
	cfg.ServerName = u.Hostname()
	cfg.NextProtos = []string{"http/1.1"} // an upgrade takes the connection over: not HTTP/2
	td := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := td.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("dial %s: %w", addr, err)
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	if dl, has := dctx.Deadline(); has {
		_ = conn.SetDeadline(dl)
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+u.Host+wire.Path, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.Protocol)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(wire.ClusterHeader, c.Cluster)
	req.Header.Set(wire.VersionHeader, c.version())
	if err := req.Write(conn); err != nil {
		return nil, time.Time{}, fmt.Errorf("tunnel request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("tunnel answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, time.Time{}, fmt.Errorf("the gateway refused the tunnel: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	expires, _ := time.Parse(time.RFC3339, resp.Header.Get(wire.ExpiresHeader))
	_ = conn.SetDeadline(time.Time{})
	ok = true
	return wire.Conn(conn, br), expires, nil
}

func (c *Connect) version() string {
	if c.Version != "" {
		return c.Version
	}
	return Version
}

// rotate asks the gateway for a fresh token when a third of the current
// one's remaining life is left, and stores it in the token file.
func (c *Connect) rotate(ctx context.Context, sess *yamux.Session, expires time.Time) {
	if expires.IsZero() {
		return
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return sess.Open() },
	}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	r := &retrier{b: Backoff{Min: 5 * time.Second, Max: 5 * time.Minute}}
	for {
		wait := time.Until(expires) * 2 / 3
		if err := sleep(ctx, max(wait, 0)); err != nil {
			return
		}
		next, err := c.fetchToken(ctx, client)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d := r.next(err)
			c.log().Warn("token rotation failed; trying again", "err", err, "in", d.Round(time.Second), "expires", expires)
			if err := sleep(ctx, d); err != nil {
				return
			}
			continue
		}
		r.reset()
		expires = next
		c.log().Info("token rotated", "expires", expires)
	}
}

func (c *Connect) fetchToken(ctx context.Context, client *http.Client) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway"+wire.RotatePath, nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return time.Time{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var t wire.Token
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&t); err != nil {
		return time.Time{}, fmt.Errorf("rotated token: %w", err)
	}
	if t.Token == "" || t.Expires.IsZero() {
		return time.Time{}, errors.New("rotated token: empty answer")
	}
	if err := writeFileAtomic(c.TokenFile, []byte(t.Token+"\n"), 0o600, 0o700); err != nil {
		return time.Time{}, fmt.Errorf("store the rotated token: %w", err)
	}
	return t.Expires, nil
}
