package clusters_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/clusters"
	gateway "github.com/eimhq/eim/connect"
	"github.com/eimhq/eim/inventory"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/tenant"
)

// env is the clusters module on a real store, its API beside the connect
// gateway's on one mux (as the server mounts them), and its nodes'
// service behind real node authentication.
type env struct {
	t     *testing.T
	ctx   context.Context
	store *sqlstore.Store
	inv   *inventory.Service
	svc   *clusters.Service
	opts  clusters.Options
	iss   *auth.Issuer
	key   *seal.Key
	api   *httptest.Server
	agent *httptest.Server
	proj  *eim.Project
	admin string
	arts  string
	// routes are the patterns mounted on api, as the server mounts the
	// two modules' Routes.
	routes []string
}

// engines runs f on SQLite and, with EIM_TEST_POSTGRES_URL, PostgreSQL.
func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, filepath.Join(t.TempDir(), "eim.db"))) })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(storetest.PostgresEnv) == "" {
			t.Skipf("%s is not set", storetest.PostgresEnv)
		}
		f(t, newEnv(t, storetest.PostgresURL(t)))
	})
}

func newEnv(t *testing.T, dsn string) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context()}
	st, err := sqlstore.Open(e.ctx, dsn, sqlstore.Options{MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	e.inv = inventory.New(st, inventory.Options{})
	dir := t.TempDir()
	if e.iss, err = auth.LoadIssuer(dir); err != nil {
		t.Fatal(err)
	}
	ver, err := auth.NewVerifier(e.ctx, e.iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.key, err = seal.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	e.arts = t.TempDir()
	// The artifact store holds the k3s releases the tests install.
	for _, v := range []string{"v1.33.5+k3s1", "v1.34.1+k3s1"} {
		if err := mkfile(filepath.Join(e.arts, "k3s", v), "k3s", "k3s "+v); err != nil {
			t.Fatal(err)
		}
	}
	sb := southbound.New(southbound.Options{Store: st, Issuer: e.iss})
	e.opts = clusters.Options{Store: st, Inventory: e.inv, Authenticator: ver, Key: e.key, AgentURL: "https://eim.example:8443",
		Artifacts: e.arts, Connect: func() bool { return true }}
	e.svc = clusters.New(e.opts)
	sb.Mount(clusterv1connect.NewClusterServiceHandler(e.svc, connect.WithInterceptors(sb.Interceptor())))
	sb.Mount(clusters.ArtifactsPath, sb.NodeHTTP(e.svc.ArtifactHandler()))
	e.agent = httptest.NewServer(sb)
	t.Cleanup(e.agent.Close)

	// Both modules' routes on one mux: a pattern conflict panics here.
	mux := http.NewServeMux()
	for p, h := range e.svc.Routes() {
		mux.Handle(p, h)
		e.routes = append(e.routes, p)
	}
	g := gateway.New(gateway.Options{Store: st, Authenticator: ver, Minter: e.iss, Replica: "r1", ClustersDeployed: func() bool { return true }})
	for p, h := range g.Routes() {
		mux.Handle(p, h)
		e.routes = append(e.routes, p)
	}
	e.api = httptest.NewServer(mux)
	t.Cleanup(e.api.Close)

	e.proj = e.project("acme")
	e.admin = e.token(eim.RoleAdmin)
	// The versions cache, as heartbeats read it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.Versions().Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// service returns another Service on the env's store, with the env's
// options as edit changes them (its reconciler, say).
func (e *env) service(edit func(*clusters.Options)) *clusters.Service {
	o := e.opts
	edit(&o)
	return clusters.New(o)
}

// project makes a project with its tenant defaults (the templates).
func (e *env) project(name string) *eim.Project {
	e.t.Helper()
	p := &eim.Project{Name: name, ID: newUUID()}
	if err := e.store.CreateProject(e.ctx, p); err != nil {
		e.t.Fatal(err)
	}
	if err := tenant.NewReconciler(tenant.Options{Store: e.store, Inventory: e.inv}).Reconcile(e.ctx, name); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func (e *env) token(roles ...string) string {
	e.t.Helper()
	tok, err := e.iss.Mint("user-"+fmt.Sprint(len(roles)), roles, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// node is a host with node credentials, an instance, an address, and its
// client of ClusterService with its own token.
type node struct {
	id     string
	uuid   string
	client clusterv1connect.ClusterServiceClient
	token  string
}

// setAddress makes addr the address the node's host reported.
func (e *env) setAddress(n *node, addr string) {
	e.t.Helper()
	err := e.store.Update(e.ctx, e.proj.Name, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, n.id)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		h.HostNics = eim.List[eim.HostNic]{{DeviceName: "eth0", IPAddresses: eim.List[eim.IPAddress]{{Address: addr + "/24"}}}}
		return tx.Update(e.ctx, h)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) host(project string, addr string) *node {
	e.t.Helper()
	_, hash := southbound.NewSecret()
	u := newUUID()
	h := &eim.Host{Name: "n", UUID: u, DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded, NodeSecretHash: hash, NodeCredGen: 1,
		HostNics: eim.List[eim.HostNic]{{DeviceName: "eth0", IPAddresses: eim.List[eim.IPAddress]{{Address: addr + "/24"}}}}}
	err := e.store.Update(e.ctx, project, func(tx eim.Tx) error {
		if err := tx.Create(e.ctx, h); err != nil {
			return err
		}
		return tx.Create(e.ctx, &eim.Instance{Name: "i", HostID: h.ResourceID})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	tok, _, err := e.iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(h.ResourceID), HostID: h.ResourceID, Project: project, Gen: 1}, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	bearer := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+tok)
			return next(ctx, req)
		}
	})
	return &node{id: h.ResourceID, uuid: u, token: tok, client: clusterv1connect.NewClusterServiceClient(http.DefaultClient, e.agent.URL, connect.WithInterceptors(bearer))}
}

// plan fetches the node's plan through the southbound service.
func (e *env) plan(n *node, have string) *clusterv1.GetPlanResponse {
	e.t.Helper()
	res, err := n.client.GetPlan(e.ctx, connect.NewRequest(&clusterv1.GetPlanRequest{Version: have}))
	if err != nil {
		e.t.Fatalf("GetPlan %s: %v", n.id, err)
	}
	return res.Msg
}

// report sends the node's state about its current plan as agent.Node
// does: INACTIVE (the end of a removal) names no version.
func (e *env) report(n *node, state clusterv1.ReportStatusRequest_State, msg string) {
	e.t.Helper()
	ver := ""
	if state != clusterv1.ReportStatusRequest_STATE_INACTIVE {
		ver = e.plan(n, "").GetVersion()
	}
	e.reportAt(n, state, ver, msg)
}

// reportAt sends the node's state about the plan version ver.
func (e *env) reportAt(n *node, state clusterv1.ReportStatusRequest_State, ver, msg string) {
	e.t.Helper()
	if _, err := n.client.ReportStatus(e.ctx, connect.NewRequest(&clusterv1.ReportStatusRequest{State: state, PlanVersion: ver, Message: msg})); err != nil {
		e.t.Fatalf("ReportStatus %s: %v", n.id, err)
	}
}

// reconcile runs the reconciler over every cluster, as its loop does at
// each event.
func (e *env) reconcile() {
	e.t.Helper()
	for range 3 { // a pass may enable the next (a node gone frees the rest)
		if err := e.svc.ReconcileOnce(e.ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

// call makes an API request; path is below /v2/projects/{project} unless
// header (the project's ID) is set, then below /v2.
func (e *env) call(token, method, path string, body any, out any) int {
	e.t.Helper()
	return e.callIn(e.proj, false, token, method, path, body, out)
}

func (e *env) callIn(p *eim.Project, header bool, token, method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	url := e.api.URL + "/v2/projects/" + p.Name + path
	if header {
		url = e.api.URL + "/v2" + path
	}
	req, _ := http.NewRequestWithContext(e.ctx, method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if header {
		req.Header.Set("Activeprojectid", p.ID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return res.StatusCode
}

// errBody is the API's error.
type errBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// eventually polls cond until it holds, for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mkfile(dir, name, content string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// jsonRaw is a body sent as it is.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

func newDeleter(e *env) *tenant.Deleter {
	return tenant.NewDeleter(tenant.Options{Store: e.store, Inventory: e.inv})
}
