package connect_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/connect"
	"github.com/eimhq/eim/connect/wire"
	"github.com/eimhq/eim/sqlstore"
)

// env is a deployment of gateways on one store, each with its agent
// listener (TLS, one certificate) and HTTP listener, and an upstream
// that shows what reached it.
type env struct {
	t        testing.TB
	store    eim.Store
	iss      *auth.Issuer
	ver      *auth.Verifier
	proj     *eim.Project
	timing   wire.Timing
	tokenTTL time.Duration
	tls      *httptest.Server // gives the certificate
	upstream *httptest.Server
	lb       *relay // in front of the agent listeners

	mu  sync.Mutex // guards gws and their agent listeners, read by lb
	gws []*gateway
}

type gateway struct {
	g      *connect.Gateway
	agent  *httptest.Server
	http   *httptest.Server
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(t testing.TB, replicas int) *env { return newEnvTTL(t, replicas, time.Hour) }

// newEnvTTL is newEnv with gateways issuing tokens valid for ttl.
func newEnvTTL(t testing.TB, replicas int, ttl time.Duration) *env {
	t.Helper()
	ctx := t.Context()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	proj := &eim.Project{Name: "p-one", ID: "5b0e7c4e-7f4f-4a57-9a11-0c1f3d7e0a01"}
	if err := store.CreateProject(ctx, proj); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	iss, err := auth.NewIssuer(key)
	if err != nil {
		t.Fatal(err)
	}
	ver, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: store, iss: iss, ver: ver, proj: proj,
		timing: wire.Timing{Interval: 200 * time.Millisecond, Timeout: time.Second}, tokenTTL: ttl}
	e.tls = httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(e.tls.Close)
	e.upstream = httptest.NewServer(http.HandlerFunc(upstream))
	t.Cleanup(e.upstream.Close)
	for range replicas {
		e.startGateway()
	}
	e.lb = newRelay(t, func() []string {
		e.mu.Lock()
		defer e.mu.Unlock()
		var addrs []string
		for _, g := range e.gws {
			if g.agent != nil {
				addrs = append(addrs, g.agent.Listener.Addr().String())
			}
		}
		return addrs
	})
	return e
}

func (e *env) startGateway() *gateway {
	i := len(e.gws)
	gw := &gateway{done: make(chan struct{})}
	gw.http = httptest.NewUnstartedServer(nil)
	addr := "http://" + gw.http.Listener.Addr().String()
	gw.g = connect.New(connect.Options{
		Store: e.store, Authenticator: e.ver, Minter: e.iss, Replica: fmt.Sprintf("r%d", i),
		PeerURL: func() string { return addr }, Timing: e.timing, TokenTTL: e.tokenTTL, TokenCheck: 2 * e.timing.Interval,
	})
	mux := http.NewServeMux()
	for p, h := range gw.g.Routes() {
		mux.Handle(p, h)
	}
	gw.http.Config.Handler = mux
	gw.http.Start()
	amux := http.NewServeMux()
	for p, h := range gw.g.AgentRoutes() {
		amux.Handle(p, h)
	}
	gw.agent = httptest.NewUnstartedServer(amux)
	gw.agent.TLS = e.tls.TLS.Clone()
	gw.agent.StartTLS()
	ctx, cancel := context.WithCancel(context.Background())
	gw.cancel = cancel
	go func() {
		defer close(gw.done)
		_ = gw.g.Run(ctx)
	}()
	e.mu.Lock()
	e.gws = append(e.gws, gw)
	e.mu.Unlock()
	e.t.Cleanup(func() { e.kill(gw) })
	return gw
}

// kill stops a gateway as a killed process would: its listeners close
// and its tunnels end without unregistering being awaited.
func (e *env) kill(gw *gateway) {
	e.mu.Lock()
	agentSrv := gw.agent
	gw.agent = nil // the relay sends no more connections there
	e.mu.Unlock()
	if agentSrv == nil {
		return
	}
	agentSrv.CloseClientConnections()
	agentSrv.Close()
	gw.http.CloseClientConnections()
	gw.http.Close()
	gw.cancel()
	<-gw.done
}

// token issues the cluster's connect token through the API, into a file.
func (e *env) token(gw *gateway, cluster string, query string) string {
	e.t.Helper()
	var tok connect.IssuedToken
	resp := e.do(gw, http.MethodPost, "/v2/projects/"+e.proj.Name+"/connect/clusters/"+cluster+"/token"+query, e.admin(), nil)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("issue token: %s: %s", resp.Status, readAll(resp))
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	f := filepath.Join(e.t.TempDir(), "connect.token")
	if err := os.WriteFile(f, []byte(tok.Token+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) admin() string { return e.mint("admin@example.com", eim.RoleAdmin) }

func (e *env) mint(subject string, roles ...string) string {
	tok, err := e.iss.Mint(subject, roles, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *env) do(gw *gateway, method, path, token string, hdr http.Header) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, gw.http.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// runAgent runs an agent for cluster through the relay.
func (e *env) runAgent(cluster, tokenFile string) (connected chan struct{}, stop func()) {
	e.t.Helper()
	pin, err := agent.NewPin(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.tls.Certificate().Raw})))
	if err != nil {
		e.t.Fatal(err)
	}
	up, _ := url.Parse(e.upstream.URL)
	connected = make(chan struct{}, 16)
	a := &agent.Connect{
		Server: "https://" + e.lb.addr(), Pin: pin, Cluster: e.proj.Name + "/" + cluster, TokenFile: tokenFile,
		Upstream: up, UpstreamToken: func() (string, error) { return "upstream-secret", nil },
		Timing: e.timing, Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Version: "v9.9.9-test",
		OnConnect: func() {
			select {
			case connected <- struct{}{}:
			default:
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return connected, stop
}

// await waits for the agent to connect and a gateway to hold its tunnel
// (the agent hears the answer before the gateway has registered it).
func (e *env) await(connected chan struct{}, _ func()) {
	e.t.Helper()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		e.t.Fatal("the agent did not connect within 10 s")
	}
	waitFor(e.t, "a gateway holds the tunnel", 5*time.Second, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, g := range e.gws {
			if g.agent != nil && g.g.Held() > 0 {
				return true
			}
		}
		return false
	})
}

// registered is the replica the registry names for the cluster's tunnel
// ("" when none): the other replicas forward to it only once it is there.
func (e *env) registered(cluster string) string {
	tun, err := e.store.FindTunnel(context.Background(), e.proj.Name, cluster)
	if err != nil {
		return ""
	}
	return tun.Replica
}

func waitFor(t testing.TB, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b)
}

// upstream stands for the Kubernetes API: / answers what reached it;
// /watch streams a line every 50 ms until the client goes; an upgrade
// request is taken over and echoed.
func upstream(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Header.Get("Upgrade") != "":
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		brw.Flush()
		_, _ = io.Copy(conn, brw)
	case r.URL.Path == "/big":
		_, _ = io.WriteString(w, bigBody)
	case r.URL.Path == "/watch":
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"authorization": r.Header.Get("Authorization"), "user": r.Header.Get("Impersonate-User"),
			"groups": r.Header.Values("Impersonate-Group"), "uid": r.Header.Get("Impersonate-Uid"),
		})
	}
}

// relay is a TCP relay to the first of its backends that answers (a load
// balancer in front of the agent listeners); freeze stops it carrying
// bytes without closing anything, as a dead network path.
type relay struct {
	ln       net.Listener
	backends func() []string
	mu       sync.Mutex
	frozen   chan struct{} // closed when frozen
	done     chan struct{} // closed at the test's end
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newRelay(t testing.TB, backends func() []string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, backends: backends, frozen: make(chan struct{}), done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.serve()
	}()
	t.Cleanup(func() {
		ln.Close()
		close(r.done)
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.frozen)
}

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(c)
		}()
	}
}

func (r *relay) handle(c net.Conn) {
	var b net.Conn
	for _, addr := range r.backends() {
		var err error
		if b, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if b == nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns = append(r.conns, c, b)
	frozen := r.frozen
	r.mu.Unlock()
	select {
	case <-r.done: // the cleanup closed the others already
		c.Close()
		b.Close()
		return
	default:
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				<-r.done // hold, carrying nothing, until the test ends
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); pipe(b, c) }()
	go func() { defer r.wg.Done(); pipe(c, b) }()
}

// TestTunnelProxiesAsCaller: through the tunnel the upstream sees the
// agent's credentials and the caller's identity (prefixed), never the
// caller's token nor the impersonation the caller asked for; the path
// and query arrive as sent; the status shows the tunnel.
func TestTunnelProxiesAsCaller(t *testing.T) {
	e := newEnv(t, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	user := e.mint("alice", e.proj.Name+"_cl-rw", "other_im-r")
	resp := e.do(gw, http.MethodGet, "/kubernetes/p-one-edge/api/v1/namespaces/x/configmaps?watch=false&limit=5", user,
		http.Header{"Impersonate-User": {"system:admin"}, "Impersonate-Group": {"system:masters"}, "Impersonate-Uid": {"0"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET through the tunnel: %s: %s", resp.Status, readAll(resp))
	}
	var got struct {
		Method, Path, Query, Authorization, User, UID string
		Groups                                        []string
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Path != "/api/v1/namespaces/x/configmaps" || got.Query != "watch=false&limit=5" {
		t.Errorf("upstream got path %q query %q", got.Path, got.Query)
	}
	if got.Authorization != "Bearer upstream-secret" {
		t.Errorf("upstream got Authorization %q, want the agent's", got.Authorization)
	}
	if got.User != "eim:alice" || strings.Join(got.Groups, ",") != "eim:p-one_cl-rw,eim:other_im-r" || got.UID != "" {
		t.Errorf("upstream got user %q groups %v uid %q, want eim:alice [eim:p-one_cl-rw eim:other_im-r] and no uid", got.User, got.Groups, got.UID)
	}
	// The project's ID names it too (the original's kubeconfigs).
	if resp := e.do(gw, http.MethodGet, "/kubernetes/"+e.proj.ID+"-edge/version", user, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("by project ID: %s: %s", resp.Status, readAll(resp))
	} else {
		resp.Body.Close()
	}
	var st connect.Connection
	waitFor(t, "status connected with an RTT", 5*time.Second, func() bool {
		resp := e.do(gw, http.MethodGet, "/v2/projects/p-one/connect/clusters/edge", e.admin(), nil)
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Connected && st.RTTMillis > 0
	})
	if st.AgentVersion != "v9.9.9-test" || st.Replica != "r0" || st.LastSeen == nil || st.TokenExpires == nil {
		t.Errorf("status: got %+v", st)
	}
}

// TestProxyRefuses: no token, a bad token, no role on the project, a
// read-only role writing: refused by the gateway, before the tunnel.
func TestProxyRefuses(t *testing.T) {
	e := newEnv(t, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	for _, c := range []struct {
		name, method, token string
		want                int
	}{
		{"no token", http.MethodGet, "", http.StatusUnauthorized},
		{"bad token", http.MethodGet, "not-a-jwt", http.StatusUnauthorized},
		{"another project's role", http.MethodGet, e.mint("bob", "other_cl-rw"), http.StatusForbidden},
		{"read-only writes", http.MethodPost, e.mint("carol", "p-one_cl-r"), http.StatusForbidden},
		{"read-only reads", http.MethodGet, e.mint("carol", "p-one_cl-r"), http.StatusOK},
		{"project reader reads", http.MethodGet, e.mint("dan", "p-one_im-r"), http.StatusOK},
		{"project writer writes", http.MethodPost, e.mint("erin", e.proj.ID+"_im-rw"), http.StatusOK},
	} {
		resp := e.do(gw, c.method, "/kubernetes/p-one-edge/api/v1/namespaces", c.token, nil)
		body := readAll(resp)
		if resp.StatusCode != c.want {
			t.Errorf("%s: got %s (%s), want %d", c.name, resp.Status, body, c.want)
		}
	}
	resp := e.do(gw, http.MethodGet, "/kubernetes/p-one-nowhere/api", e.admin(), nil)
	if body := readAll(resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "not connected") {
		t.Errorf("a cluster without a tunnel: got %s %s, want 503 not connected", resp.Status, body)
	}
}

// TestTunnelStreams: a watch streams through the tunnel across many
// pings, and an upgraded connection carries bytes both ways.
func TestTunnelStreams(t *testing.T) {
	e := newEnv(t, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	resp := e.do(gw, http.MethodGet, "/kubernetes/p-one-edge/watch", e.admin(), nil)
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	n := 0
	for time.Since(start) < 6*e.timing.Interval {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("watch ended after %d events, %v: %v", n, time.Since(start), err)
		}
		n++
	}
	resp.Body.Close()
	if n < 10 {
		t.Errorf("watch: %d events in %v", n, time.Since(start))
	}

	conn, err := net.Dial("tcp", gw.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /kubernetes/p-one-edge/api/v1/namespaces/x/pods/y/exec?command=sh HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n", e.admin())
	cr := bufio.NewReader(conn)
	ur, err := http.ReadResponse(cr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ur.StatusCode != http.StatusSwitchingProtocols || ur.Header.Get("Upgrade") != "SPDY/3.1" {
		t.Fatalf("upgrade: got %s Upgrade %q", ur.Status, ur.Header.Get("Upgrade"))
	}
	for i := range 3 {
		msg := fmt.Sprintf("frame %d\n", i)
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := cr.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("upgraded stream: got %q, %v; want %q", got, err, msg)
		}
	}
}

// TestReplicaForward: a request to the replica without the tunnel is
// forwarded to its holder; killing the holder makes the agent reconnect
// to the other, which then serves it itself.
func TestReplicaForward(t *testing.T) {
	e := newEnv(t, 2)
	g0, g1 := e.gws[0], e.gws[1]
	connected, _ := e.runAgent("edge", e.token(g1, "edge", ""))
	<-connected // through the relay: to g0, the first backend
	waitFor(t, "r0 holds the tunnel, in the registry", 5*time.Second, func() bool { return g0.g.Held() == 1 && e.registered("edge") == "r0" })
	if g1.g.Held() != 0 {
		t.Fatalf("r1 holds %d tunnels, want 0", g1.g.Held())
	}
	user := e.mint("alice", "p-one_cl-rw")
	resp := e.do(g1, http.MethodGet, "/kubernetes/p-one-edge/api", user, nil)
	if body := readAll(resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"eim:alice"`) {
		t.Fatalf("through r1 (forwarded to r0): %s %s", resp.Status, body)
	}
	killed := time.Now()
	e.kill(g0)
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not reconnect within 10 s after its replica was killed")
	}
	t.Logf("agent reconnected %v after its replica was killed", time.Since(killed).Round(time.Millisecond))
	waitFor(t, "r1 serves the cluster", 5*time.Second, func() bool {
		resp := e.do(g1, http.MethodGet, "/kubernetes/p-one-edge/api", user, nil)
		readAll(resp)
		return resp.StatusCode == http.StatusOK && g1.g.Held() == 1
	})
}

// TestDeadTunnel: a connection that stops carrying anything is found by
// the pings on both ends within interval + timeout (and some slack), and
// the agent reconnects.
func TestDeadTunnel(t *testing.T) {
	e := newEnv(t, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	waitFor(t, "the gateway holds the tunnel", 5*time.Second, func() bool { return gw.g.Held() == 1 })
	frozen := time.Now()
	e.lb.freeze()
	limit := e.timing.Interval + e.timing.Timeout + time.Second
	waitFor(t, "the gateway drops the dead tunnel", limit, func() bool { return gw.g.Held() == 0 })
	t.Logf("gateway found the dead tunnel after %v (interval %v, timeout %v)", time.Since(frozen).Round(time.Millisecond), e.timing.Interval, e.timing.Timeout)
	if _, err := e.store.FindTunnel(t.Context(), "p-one", "edge"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("the registry still has the dead tunnel: %v", err)
	}
}

// TestTokenRotation: the agent trades its token for a fresh one over the
// tunnel before it expires and writes it to its file, and the tunnel
// lives on past the first token's expiry; a token of another cluster, an unknown or a
// revoked one opens no tunnel.
func TestTokenRotation(t *testing.T) {
	e := newEnvTTL(t, 1, 3*time.Second)
	gw := e.gws[0]
	file := e.token(gw, "edge", "")
	first, _ := os.ReadFile(file)
	e.await(e.runAgent("edge", file))
	waitFor(t, "the token file rotated", 5*time.Second, func() bool {
		b, _ := os.ReadFile(file)
		return len(b) > 0 && string(b) != string(first)
	})
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("rotated token file: mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// The old token stays valid until its own expiry (other agents of
	// the cluster may hold it); the new one is another credential.
	oldID := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(first)), "eimct_"), ".", 2)[0]
	old, err := e.store.FindConnectCredential(t.Context(), oldID)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Expires.After(time.Now()) {
		t.Errorf("the rotated-out token expired at %v, want it valid until its own expiry", old.Expires)
	}
	rotated, _ := os.ReadFile(file)
	if newID := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(rotated)), "eimct_"), ".", 2)[0]; newID == oldID {
		t.Errorf("the rotated token has the old one's ID %s", newID)
	}
	// The tunnel lives on the new token: it outlives the old one's expiry.
	waitFor(t, "the old token expires", 5*time.Second, func() bool { return time.Now().After(old.Expires) })
	time.Sleep(3 * e.timing.Interval) // token checks of the open tunnel
	if gw.g.Held() != 1 {
		t.Error("the tunnel closed when its first token expired, although it had rotated")
	}

	dial := func(tok, cluster string) int {
		t.Helper()
		conn, err := net.Dial("tcp", gw.agent.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return upgradeStatus(t, conn, e, tok, cluster)
	}
	other := e.token(gw, "other", "")
	otherTok, _ := os.ReadFile(other)
	if got := dial(strings.TrimSpace(string(otherTok)), "p-one/edge"); got != http.StatusForbidden {
		t.Errorf("another cluster's token for edge: got %d, want 403", got)
	}
	if got := dial("eimct_ct-00.nope", ""); got != http.StatusUnauthorized {
		t.Errorf("unknown token: got %d, want 401", got)
	}
	if got := dial(strings.TrimSpace(string(otherTok))+"x", ""); got != http.StatusUnauthorized {
		t.Errorf("wrong secret: got %d, want 401", got)
	}
	resp := e.do(gw, http.MethodDelete, "/v2/projects/p-one/connect/clusters/other/token", e.admin(), nil)
	readAll(resp)
	if got := dial(strings.TrimSpace(string(otherTok)), ""); got != http.StatusUnauthorized {
		t.Errorf("revoked token: got %d, want 401", got)
	}
}

// upgradeStatus asks for a tunnel over TLS on conn and returns the
// answer's status.
func upgradeStatus(t *testing.T, raw net.Conn, e *env, tok, cluster string) int {
	t.Helper()
	pin, _ := agent.NewPin(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.tls.Certificate().Raw})))
	cfg := pin.TLSConfig()
	cfg.ServerName = "127.0.0.1"
	cfg.NextProtos = []string{"http/1.1"}
	conn := tls.Client(raw, cfg)
	req, _ := http.NewRequest(http.MethodGet, "https://x"+wire.Path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.Protocol)
	req.Header.Set("Authorization", "Bearer "+tok)
	if cluster != "" {
		req.Header.Set(wire.ClusterHeader, cluster)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestSeveralAgents: a cluster's agents on two control-plane nodes hold
// a tunnel each, on different replicas, without pushing each other off;
// the newest serves; when its replica dies the other replica's tunnel
// takes the cluster over without reconnecting.
func TestSeveralAgents(t *testing.T) {
	e := newEnv(t, 2)
	g0, g1 := e.gws[0], e.gws[1]
	file := e.token(g0, "edge", "")
	e.await(e.runAgent("edge", file)) // the relay sends it to r0
	// The second agent reaches r1 directly (another balancer's choice).
	e.mu.Lock()
	e.gws[0], e.gws[1] = g1, g0
	e.mu.Unlock()
	second, _ := e.runAgent("edge", file)
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second agent did not connect")
	}
	waitFor(t, "both replicas hold a tunnel, r1 the registry row", 5*time.Second, func() bool {
		reg, err := e.store.FindTunnel(t.Context(), "p-one", "edge")
		return g0.g.Held() == 1 && g1.g.Held() == 1 && err == nil && reg.Replica == "r1"
	})
	// Several intervals later: still both, no reconnects.
	time.Sleep(5 * e.timing.Interval)
	if g0.g.Held() != 1 || g1.g.Held() != 1 {
		t.Fatalf("after 5 pings: r0 holds %d, r1 %d; want both 1", g0.g.Held(), g1.g.Held())
	}
	select {
	case <-second:
		t.Fatal("an agent reconnected: the tunnels pushed each other off")
	default:
	}
	user := e.mint("alice", "p-one_cl-r")
	e.kill(g1)
	waitFor(t, "r0 takes the cluster over", 5*time.Second, func() bool {
		reg, err := e.store.FindTunnel(t.Context(), "p-one", "edge")
		return err == nil && reg.Replica == "r0"
	})
	resp := e.do(g0, http.MethodGet, "/kubernetes/p-one-edge/api", user, nil)
	if body := readAll(resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the takeover: %s %s", resp.Status, body)
	}
}

// TestRevokedTunnelCloses: revoking a cluster's tokens closes its open
// tunnel at the next token check, and the agent cannot open another.
func TestRevokedTunnelCloses(t *testing.T) {
	e := newEnv(t, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	resp := e.do(gw, http.MethodDelete, "/v2/projects/p-one/connect/clusters/edge/token", e.admin(), nil)
	if readAll(resp); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %s", resp.Status)
	}
	waitFor(t, "the revoked tunnel closes", 10*e.timing.Interval, func() bool { return gw.g.Held() == 0 })
	time.Sleep(3 * e.timing.Interval) // the agent's reconnects are refused
	if gw.g.Held() != 0 {
		t.Fatal("the agent opened a tunnel with a revoked token")
	}
}
