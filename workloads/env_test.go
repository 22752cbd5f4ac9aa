package workloads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/inventory"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/workloads"
)

// env is the workloads module on a real store: its API on an httptest
// server as the server mounts it, its devices' service behind real node
// authentication, and its versions cache following the feed.
type env struct {
	t     testing.TB
	ctx   context.Context
	store *sqlstore.Store
	inv   *inventory.Service
	svc   *workloads.Service
	iss   *auth.Issuer
	api   *httptest.Server
	agent *httptest.Server
	proj  *eim.Project
	admin string
	key   *seal.Key
	// clock, when set, is the module's time (rollouts' timeouts).
	mu    sync.Mutex
	clock time.Time
}

// now is the module's clock: the test's when set.
func (e *env) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.clock.IsZero() {
		return time.Now()
	}
	return e.clock
}

// advance sets the test's clock (from now when unset) d later.
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.clock.IsZero() {
		e.clock = time.Now()
	}
	e.clock = e.clock.Add(d)
}

// engines runs f on SQLite and, with EIM_TEST_POSTGRES_URL, PostgreSQL.
func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, filepath.Join(t.TempDir(), "eim.db"), nil)) })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(storetest.PostgresEnv) == "" {
			t.Skipf("%s is not set", storetest.PostgresEnv)
		}
		f(t, newEnv(t, storetest.PostgresURL(t), nil))
	})
}

func newEnv(t testing.TB, dsn string, uploads eim.UploadGranter) *env {
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
	key, err := seal.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.key = key
	// A granter of uploads that grants downloads too is given both.
	downloads, _ := uploads.(eim.DownloadGranter)
	e.svc, err = workloads.New(workloads.Options{Store: st, FeedStore: st, Inventory: e.inv, Authenticator: ver, Key: key, Uploads: uploads,
		Downloads: downloads, LogWait: 5 * time.Second, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	sb := southbound.New(southbound.Options{Store: st, Issuer: e.iss})
	sb.Mount(workloadsv1connect.NewWorkloadServiceHandler(e.svc, connect.WithInterceptors(sb.Interceptor())))
	e.agent = httptest.NewServer(sb)
	t.Cleanup(e.agent.Close)
	mux := http.NewServeMux()
	for p, h := range e.svc.Routes() {
		mux.Handle(p, h)
	}
	e.api = httptest.NewServer(mux)
	t.Cleanup(e.api.Close)

	e.proj = e.project("acme")
	tok, err := e.iss.Mint("admin", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.admin = tok
	// The versions cache, as heartbeats read it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.Versions().Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func (e *env) project(name string) *eim.Project {
	e.t.Helper()
	p := &eim.Project{Name: name, ID: newUUID()}
	if err := e.store.CreateProject(e.ctx, p); err != nil {
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

// device is a host with node credentials and its client of
// WorkloadService with its own token.
type device struct {
	id     string
	client workloadsv1connect.WorkloadServiceClient
}

// device makes a host of the project with metadata md (key, value, …)
// and the architecture arch, and its node token.
func (e *env) device(project, siteID, arch string, md ...string) *device {
	e.t.Helper()
	_, hash := southbound.NewSecret()
	h := &eim.Host{Name: "dev", UUID: newUUID(), SiteID: siteID, DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded,
		NodeSecretHash: hash, NodeCredGen: 1, CPUArchitecture: arch}
	for i := 0; i+1 < len(md); i += 2 {
		h.Metadata = append(h.Metadata, eim.MetadataItem{Key: md[i], Value: md[i+1]})
	}
	if err := e.store.Update(e.ctx, project, func(tx eim.Tx) error { return tx.Create(e.ctx, h) }); err != nil {
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
	return &device{id: h.ResourceID, client: workloadsv1connect.NewWorkloadServiceClient(http.DefaultClient, e.agent.URL, connect.WithInterceptors(bearer))}
}

// setMetadata replaces a host's metadata.
func (e *env) setMetadata(project, id string, md ...string) {
	e.t.Helper()
	err := e.store.Update(e.ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		h.Metadata = nil
		for i := 0; i+1 < len(md); i += 2 {
			h.Metadata = append(h.Metadata, eim.MetadataItem{Key: md[i], Value: md[i+1]})
		}
		return tx.Update(e.ctx, h)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// reconcile sets the project's targets, as the targets loop does on
// every change.
func (e *env) reconcile(project string) {
	e.t.Helper()
	if err := e.svc.ReconcileProject(e.ctx, project); err != nil {
		e.t.Fatal(err)
	}
}

// get fetches the device's set, knowing version have.
func (e *env) get(d *device, have string) *workloadsv1.GetWorkloadsResponse {
	e.t.Helper()
	res, err := d.client.GetWorkloads(e.ctx, connect.NewRequest(&workloadsv1.GetWorkloadsRequest{Version: have}))
	if err != nil {
		e.t.Fatalf("GetWorkloads %s: %v", d.id, err)
	}
	return res.Msg
}

// resp is an API answer.
type resp struct {
	code   int
	body   []byte
	header http.Header
}

func (r resp) decode(t testing.TB, out any) {
	t.Helper()
	if err := json.Unmarshal(r.body, out); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
}

// call makes an API request below /v1/projects/{project}/edgeworkloads;
// body is JSON-encoded unless it is a string.
func (e *env) call(project, method, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequestWithContext(e.ctx, method, e.api.URL+"/v1/projects/"+project+"/edgeworkloads"+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, b, res.Header}
}

func (e *env) want(r resp, code int, what string) resp {
	e.t.Helper()
	if r.code != code {
		e.t.Fatalf("%s: got %d %s, want %d", what, r.code, r.body, code)
	}
	return r
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
