package southbound_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/pki"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var pgURL string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if base := os.Getenv(storetest.PostgresEnv); base != "" {
		u, drop, err := storetest.PostgresDB(base, "eim_southbound")
		if err != nil {
			fmt.Fprintln(os.Stderr, "southbound tests:", err)
			return 1
		}
		defer func() {
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, "southbound tests:", err)
			}
		}()
		pgURL = u
	}
	return m.Run()
}

// hostSvc is the HostService under the interceptor: it records the node
// each call came from.
type hostSvc struct {
	hostv1connect.UnimplementedHostServiceHandler
	mu    sync.Mutex
	nodes []southbound.Node
}

func (h *hostSvc) ReportIn(ctx context.Context, _ *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	n, ok := southbound.NodeFrom(ctx)
	if !ok {
		return nil, connect.NewError(connect.CodeInternal, errors.New("no node in context"))
	}
	h.mu.Lock()
	h.nodes = append(h.nodes, n)
	h.mu.Unlock()
	return connect.NewResponse(&hostv1.ReportInResponse{HeartbeatIntervalSeconds: 10}), nil
}

// onboardingSvc answers Discover without a token.
type onboardingSvc struct {
	onboardingv1connect.UnimplementedOnboardingServiceHandler
}

func (onboardingSvc) Discover(ctx context.Context, _ *connect.Request[onboardingv1.DiscoverRequest]) (*connect.Response[onboardingv1.DiscoverResponse], error) {
	if _, ok := southbound.NodeFrom(ctx); ok {
		return nil, connect.NewError(connect.CodeInternal, errors.New("node in context of an unauthenticated service"))
	}
	return connect.NewResponse(&onboardingv1.DiscoverResponse{Status: onboardingv1.DiscoverResponse_STATUS_REGISTERED}), nil
}

// env is a southbound server over real TLS, a client that trusts only the
// ca.crt file, a project and an onboarded host with credentials.
type env struct {
	t       *testing.T
	ctx     context.Context
	store   eim.Store
	dsn     string
	iss     *auth.Issuer
	srv     *httptest.Server
	client  *http.Client
	host    hostv1connect.HostServiceClient
	svc     *hostSvc
	project string
	hostID  string
	secret  string
	now     atomic.Pointer[time.Time]
}

func run(t *testing.T, f func(t *testing.T, e *env)) {
	engines := map[string]string{"sqlite": ""}
	if pgURL != "" {
		engines["postgres"] = pgURL
	}
	for name, dsn := range engines {
		t.Run(name, func(t *testing.T) {
			if dsn == "" {
				dsn = filepath.Join(t.TempDir(), "eim.db")
			}
			f(t, newEnv(t, dsn))
		})
	}
}

// newEnv builds the env on the store at dsn; tweak, when given, changes
// the server's options.
func newEnv(t *testing.T, dsn string, tweak ...func(*southbound.Options)) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), dsn: dsn}
	st, err := sqlstore.Open(e.ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	dir := t.TempDir()
	if e.iss, err = auth.LoadIssuer(dir); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.Load(dir, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e.now.Store(&now)

	o := southbound.Options{Store: st, Issuer: e.iss, Now: func() time.Time { return *e.now.Load() }}
	for _, fn := range tweak {
		fn(&o)
	}
	sb := southbound.New(o)
	e.svc = &hostSvc{}
	sb.Mount(hostv1connect.NewHostServiceHandler(e.svc, connect.WithInterceptors(sb.Interceptor())))
	sb.Mount(onboardingv1connect.NewOnboardingServiceHandler(onboardingSvc{}))
	e.srv = httptest.NewUnstartedServer(sb)
	e.srv.TLS = ca.ServerTLS()
	e.srv.EnableHTTP2 = true
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)

	pem, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("ca.crt holds no certificate")
	}
	tr := &http.Transport{ForceAttemptHTTP2: true}
	tr.TLSClientConfig = ca.ServerTLS().Clone()
	tr.TLSClientConfig.Certificates = nil
	tr.TLSClientConfig.RootCAs = pool
	e.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	e.host = hostv1connect.NewHostServiceClient(e.client, e.srv.URL)

	e.project = "sb-" + eim.NewID(eim.KindHost)[5:]
	if err := st.CreateProject(e.ctx, &eim.Project{Name: e.project, ID: newUUID()}); err != nil {
		t.Fatal(err)
	}
	secret, hash := southbound.NewSecret()
	h := &eim.Host{Name: "node-1", DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded, NodeSecretHash: hash, NodeCredGen: 1}
	e.update(func(tx eim.Tx) error { return tx.Create(e.ctx, h) })
	e.hostID, e.secret = h.ResourceID, secret
	return e
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func (e *env) update(fn func(tx eim.Tx) error) {
	e.t.Helper()
	if err := e.store.Update(e.ctx, e.project, fn); err != nil {
		e.t.Fatal(err)
	}
}

// changeHost applies fn to the stored host.
func (e *env) changeHost(fn func(h *eim.Host)) {
	e.t.Helper()
	e.update(func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, e.hostID)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		fn(h)
		return tx.Update(e.ctx, h)
	})
}

type tokenAnswer struct {
	Status int
	Body   map[string]any
	Header http.Header
}

func (e *env) postToken(contentType, authz, body string) tokenAnswer {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+southbound.TokenPath, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := tokenAnswer{Status: resp.StatusCode, Header: resp.Header}
	if err := json.NewDecoder(resp.Body).Decode(&a.Body); err != nil {
		e.t.Fatalf("token answer (%d) not JSON: %v", resp.StatusCode, err)
	}
	return a
}

const formType = "application/x-www-form-urlencoded"

func credForm(id, secret string) string {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}.Encode()
}

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// token returns a node token for the env's host, failing the test if none.
func (e *env) token() string {
	e.t.Helper()
	a := e.postToken(formType, "", credForm(southbound.ClientID(e.hostID), e.secret))
	if a.Status != http.StatusOK {
		e.t.Fatalf("token: status %d %v, want 200", a.Status, a.Body)
	}
	return a.Body["access_token"].(string)
}

func (e *env) reportIn(token string) error {
	req := connect.NewRequest(&hostv1.ReportInRequest{AgentVersion: "test"})
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	_, err := e.host.ReportIn(e.ctx, req)
	return err
}

// TestTokenAdmission: beyond the endpoint's rate and burst, a node is
// answered 503 temporarily_unavailable with a Retry-After (whole seconds,
// rounded up) instead of a token, and served again once the rate allows.
func TestTokenAdmission(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"), func(o *southbound.Options) { o.TokenRate, o.TokenBurst = 10, 2 })
	form := credForm(southbound.ClientID(e.hostID), e.secret)
	for i := range 2 {
		if a := e.postToken(formType, "", form); a.Status != http.StatusOK {
			t.Fatalf("request %d within the burst: got %d %v, want 200", i+1, a.Status, a.Body)
		}
	}
	for i := range 3 {
		a := e.postToken(formType, "", form)
		if a.Status != http.StatusServiceUnavailable || a.Body["error"] != "temporarily_unavailable" || a.Header.Get("Retry-After") != "1" ||
			!strings.Contains(a.Body["error_description"].(string), "retry after 1 s") {
			t.Fatalf("request %d beyond the burst: got %d %v (Retry-After %q), want 503 temporarily_unavailable, Retry-After 1",
				i+3, a.Status, a.Body, a.Header.Get("Retry-After"))
		}
	}
	later := e.now.Load().Add(time.Second)
	e.now.Store(&later)
	if a := e.postToken(formType, "", form); a.Status != http.StatusOK {
		t.Fatalf("a second later: got %d %v, want 200", a.Status, a.Body)
	}
	// Malformed requests are answered as such, whatever the rate.
	if a := e.postToken("application/json", "", "{}"); a.Status != http.StatusBadRequest {
		t.Fatalf("malformed: got %d %v, want 400", a.Status, a.Body)
	}
}

func TestTokenEndpoint(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		id := southbound.ClientID(e.hostID)
		good := func(name string, a tokenAnswer) {
			t.Helper()
			if a.Status != http.StatusOK || a.Body["token_type"] != "Bearer" || a.Body["expires_in"] != float64(900) {
				t.Fatalf("%s: got %d %v, want 200 with a Bearer token for 900 s", name, a.Status, a.Body)
			}
			if cc := a.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("%s: Cache-Control %q, want no-store", name, cc)
			}
			c, err := auth.NewNodeVerifier(e.iss, 0, nil).Verify(a.Body["access_token"].(string))
			if err != nil {
				t.Fatalf("%s: token does not verify: %v", name, err)
			}
			if want := (auth.NodeClaims{Subject: id, HostID: e.hostID, Project: e.project, Gen: 1, Expiry: c.Expiry}); c != want {
				t.Errorf("%s: claims %+v, want %+v", name, c, want)
			}
		}
		good("form", e.postToken(formType, "", credForm(id, e.secret)))
		good("basic", e.postToken(formType+"; charset=utf-8", basic(id, e.secret), "grant_type=client_credentials"))
		good("basic with client_id", e.postToken(formType, basic(id, e.secret), "grant_type=client_credentials&client_id="+id))

		for _, tc := range []struct {
			name, contentType, authz, body string
			status                         int
			code                           string
		}{
			{"wrong secret", formType, "", credForm(id, e.secret+"x"), 401, "invalid_client"},
			{"wrong basic secret", formType, basic(id, "nope"), "grant_type=client_credentials", 401, "invalid_client"},
			{"unknown host", formType, "", credForm(southbound.ClientID("host-00000000"), e.secret), 401, "invalid_client"},
			{"not a node", formType, "", credForm("alice", e.secret), 401, "invalid_client"},
			{"no credentials", formType, "", "grant_type=client_credentials", 401, "invalid_client"},
			{"bearer instead of basic", formType, "Bearer x", "grant_type=client_credentials", 401, "invalid_client"},
			{"malformed basic", formType, "Basic !!!", "grant_type=client_credentials", 401, "invalid_client"},
			{"malformed form", formType, "", "grant_type=client_credentials&client_id=%zz", 400, "invalid_request"},
			{"json body", "application/json", "", `{"grant_type":"client_credentials"}`, 400, "invalid_request"},
			{"no content type", "", "", credForm(id, e.secret), 400, "invalid_request"},
			{"no grant type", formType, "", "client_id=" + id + "&client_secret=" + e.secret, 400, "invalid_request"},
			{"password grant", formType, "", "grant_type=password&client_id=" + id + "&client_secret=" + e.secret, 400, "unsupported_grant_type"},
			{"repeated parameter", formType, "", credForm(id, e.secret) + "&client_id=" + id, 400, "invalid_request"},
			{"two authentications", formType, basic(id, e.secret), credForm(id, e.secret), 400, "invalid_request"},
			{"basic and other client_id", formType, basic(id, e.secret), "grant_type=client_credentials&client_id=edgenode-host-11111111", 400, "invalid_request"},
			{"huge body", formType, "", credForm(id, e.secret) + "&scope=" + strings.Repeat("a", 9000), 400, "invalid_request"},
		} {
			a := e.postToken(tc.contentType, tc.authz, tc.body)
			if a.Status != tc.status || a.Body["error"] != tc.code || a.Body["error_description"] == "" {
				t.Errorf("%s: got %d %v, want %d %s with a description", tc.name, a.Status, a.Body, tc.status, tc.code)
			}
			if tc.status == 401 && a.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
			}
		}

		// Unknown clients and wrong secrets are told apart by nothing, so
		// host IDs cannot be probed.
		same := map[string]tokenAnswer{
			"unknown host":        e.postToken(formType, "", credForm(southbound.ClientID("host-00000000"), "whatever")),
			"not a node":          e.postToken(formType, "", credForm("alice", "whatever")),
			"too long":            e.postToken(formType, "", credForm(strings.Repeat("a", 100), "whatever")),
			"known, wrong":        e.postToken(formType, "", credForm(id, "whatever")),
			"known, wrong, basic": e.postToken(formType, basic(id, "whatever"), "grant_type=client_credentials"),
		}
		for name, a := range same {
			if a.Status != 401 || a.Body["error"] != "invalid_client" || a.Body["error_description"] != "invalid client credentials" {
				t.Errorf("%s: got %d %v, want 401 invalid_client \"invalid client credentials\" as for every bad client", name, a.Status, a.Body)
			}
		}

		resp, err := e.client.Get(e.srv.URL + southbound.TokenPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET: status %d, want 405", resp.StatusCode)
		}

		// Revoked: invalidated, being deleted, credentials cleared.
		for _, tc := range []struct {
			name string
			fn   func(h *eim.Host)
		}{
			{"untrusted", func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted }},
			{"deleted", func(h *eim.Host) { h.DesiredState = eim.HostStateDeleted }},
			{"cleared", func(h *eim.Host) { h.DesiredState = eim.HostStateOnboarded; h.NodeSecretHash = ""; h.NodeCredGen++ }},
		} {
			e.changeHost(tc.fn)
			if a := e.postToken(formType, "", credForm(id, e.secret)); a.Status != 401 || a.Body["error"] != "invalid_client" || a.Body["error_description"] != "invalid client credentials" {
				t.Errorf("%s host: got %d %v, want 401 invalid_client", tc.name, a.Status, a.Body)
			}
		}
	})
}

func TestInterceptor(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		unauth := func(name string, err error) {
			t.Helper()
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("%s: got %v, want unauthenticated", name, err)
			}
		}
		tok := e.token()
		if err := e.reportIn(tok); err != nil {
			t.Fatalf("ReportIn with a good token: %v", err)
		}
		if want := (southbound.Node{HostID: e.hostID, Project: e.project, Gen: 1}); len(e.svc.nodes) != 1 || e.svc.nodes[0] != want {
			t.Errorf("handler saw %+v, want [%+v]", e.svc.nodes, want)
		}

		// Discover is mounted without the interceptor.
		ob := onboardingv1connect.NewOnboardingServiceClient(e.client, e.srv.URL)
		if _, err := ob.Discover(e.ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{})); err != nil {
			t.Errorf("Discover without a token: %v", err)
		}

		unauth("no token", e.reportIn(""))
		unauth("garbage token", e.reportIn("abc"))
		user, err := e.iss.Mint("alice", []string{eim.RoleAdmin}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unauth("user token", e.reportIn(user))
		other, err := auth.LoadIssuer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		forged, _, err := other.MintNode(auth.NodeClaims{Subject: southbound.ClientID(e.hostID), HostID: e.hostID, Project: e.project, Gen: 1}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unauth("another server's token", e.reportIn(forged))
		otherHost, _, err := e.iss.MintNode(auth.NodeClaims{Subject: "edgenode-host-99999999", HostID: e.hostID, Project: e.project, Gen: 1}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unauth("subject not the host's client", e.reportIn(otherHost))
		wrongProject, _, err := e.iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(e.hostID), HostID: e.hostID, Project: "default", Gen: 1}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unauth("token naming another project", e.reportIn(wrongProject))

		// Expired: the server's clock moves past the token's expiry.
		later := e.now.Load().Add(16 * time.Minute)
		e.now.Store(&later)
		err = e.reportIn(tok)
		unauth("expired token", err)
		if err != nil && !strings.Contains(err.Error(), "expired") {
			t.Errorf("expired token: message %q does not say expired", err)
		}
		now := time.Now()
		e.now.Store(&now)
		if err := e.reportIn(tok); err != nil {
			t.Fatalf("ReportIn with the token again in time: %v", err)
		}
		// The leeway past expiry is auth.DefaultLeeway (5 s).
		short, exp, err := e.iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(e.hostID), HostID: e.hostID, Project: e.project, Gen: 1}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		at := func(d time.Duration) error {
			t := exp.Add(d)
			e.now.Store(&t)
			return e.reportIn(short)
		}
		if err := at(2 * time.Second); err != nil {
			t.Errorf("2 s past expiry: got %v, want accepted", err)
		}
		unauth("10 s past expiry", at(10*time.Second))
		e.now.Store(&now)

		// New credentials (a new Discover) move the generation on: the
		// old token stops working at once.
		e.changeHost(func(h *eim.Host) { h.NodeCredGen++ })
		err = e.reportIn(tok)
		unauth("generation moved on", err)
		if err != nil && !strings.Contains(err.Error(), "credentials revoked") {
			t.Errorf("gen mismatch: message %q, want credentials revoked", err)
		}
		tok = e.token() // same secret still stored, new generation
		if err := e.reportIn(tok); err != nil {
			t.Fatalf("ReportIn with a token of the new generation: %v", err)
		}

		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted })
		unauth("invalidated host", e.reportIn(tok))
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateOnboarded })
		if err := e.reportIn(tok); err != nil {
			t.Fatalf("ReportIn after the host is trusted again: %v", err)
		}
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateDeleted })
		unauth("host being deleted", e.reportIn(tok))
		e.update(func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindHost, e.hostID) })
		unauth("host removed", e.reportIn(tok))
	})
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "eim.db"))
	tok := e.token()
	req := connect.NewRequest(&hostv1.ReportInRequest{Hostname: strings.Repeat("x", southbound.DefaultMaxBodyBytes+1)})
	req.Header().Set("Authorization", "Bearer "+tok)
	_, err := e.host.ReportIn(e.ctx, req)
	if err == nil {
		t.Fatal("ReportIn with a body over the limit: got nil error, want one")
	}
	if code := connect.CodeOf(err); code != connect.CodeResourceExhausted && code != connect.CodeInvalidArgument && code != connect.CodeUnknown {
		t.Errorf("over the limit: code %v (%v)", code, err)
	}
}

func TestSecrets(t *testing.T) {
	s1, h1 := southbound.NewSecret()
	s2, _ := southbound.NewSecret()
	if s1 == s2 || len(s1) != 43 || strings.ContainsAny(s1, "+/=") {
		t.Errorf("NewSecret = %q, %q; want distinct 43-character base64url strings", s1, s2)
	}
	if len(h1) != 64 || h1 != strings.ToLower(h1) || h1 != southbound.HashSecret(s1) {
		t.Errorf("hash %q: want the lower-case hex SHA-256 of the secret", h1)
	}
	if !southbound.CheckSecret(h1, s1) || southbound.CheckSecret(h1, s2) || southbound.CheckSecret("", "") {
		t.Error("CheckSecret: wrong answer")
	}
	for _, tc := range []struct {
		id   string
		host string
		ok   bool
	}{
		{"edgenode-host-0123abcd", "host-0123abcd", true},
		{southbound.ClientID("host-ffffffff"), "host-ffffffff", true},
		{"edgenode-host-0123ABCD", "", false},
		{"edgenode-inst-0123abcd", "", false},
		{"host-0123abcd", "", false},
		{"edgenode-", "", false},
		{"", "", false},
	} {
		if got, ok := southbound.HostIDOfClient(tc.id); got != tc.host || ok != tc.ok {
			t.Errorf("HostIDOfClient(%q) = %q, %v; want %q, %v", tc.id, got, ok, tc.host, tc.ok)
		}
	}
}

// TestConcurrentNodes: many nodes fetch tokens and call at once, each seen
// as itself.
func TestConcurrentNodes(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		const n = 50
		secrets := make(map[string]string, n)
		for i := range n {
			secret, hash := southbound.NewSecret()
			h := &eim.Host{Name: fmt.Sprintf("c-%d", i), DesiredState: eim.HostStateOnboarded, NodeSecretHash: hash, NodeCredGen: 1}
			e.update(func(tx eim.Tx) error { return tx.Create(e.ctx, h) })
			secrets[h.ResourceID] = secret
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for id, secret := range secrets {
			wg.Go(func() {
				body := credForm(southbound.ClientID(id), secret)
				resp, err := e.client.Post(e.srv.URL+southbound.TokenPath, formType, strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				var tr struct {
					AccessToken string `json:"access_token"`
				}
				json.NewDecoder(resp.Body).Decode(&tr)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("%s: token status %d", id, resp.StatusCode)
					return
				}
				if err := e.reportIn(tr.AccessToken); err != nil {
					errs <- fmt.Errorf("%s: ReportIn: %w", id, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		seen := map[string]bool{}
		for _, nd := range e.svc.nodes {
			if _, ok := secrets[nd.HostID]; !ok || nd.Project != e.project {
				t.Errorf("handler saw %+v, not one of the nodes", nd)
			}
			seen[nd.HostID] = true
		}
		if len(seen) != n {
			t.Errorf("handler saw %d distinct nodes, want %d", len(seen), n)
		}
	})
}
