package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// pgURL is this package's PostgreSQL database for the run ("" when
// EIM_TEST_POSTGRES_URL is unset).
var pgURL string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if base := os.Getenv(storetest.PostgresEnv); base != "" {
		u, drop, err := storetest.PostgresDB(base, "eim_provisioning")
		if err != nil {
			fmt.Fprintln(os.Stderr, "provisioning tests:", err)
			return 1
		}
		defer func() {
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, "provisioning tests:", err)
			}
		}()
		pgURL = u
	}
	return m.Run()
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// asNode returns a context carrying the node identity the southbound
// interceptor would set.
func asNode(ctx context.Context, project, hostID string) context.Context {
	return southbound.WithNode(ctx, southbound.Node{HostID: hostID, Project: project})
}

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

// env is one test's store, services and project on one engine.
type env struct {
	t     *testing.T
	ctx   context.Context
	store eim.Store
	inv   *inventory.Service
	svc   *provisioning.Service
	clock *clock
	proj  string
	opts  provisioning.Options
}

// run runs f on SQLite and, when configured, PostgreSQL, each as its
// capabilities decide: SQLite reading before it writes, PostgreSQL
// writing directly (concurrent writers); and SQLite as a store that says
// it takes concurrent writers, so that both paths are tested without
// PostgreSQL.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	runWith(t, nil, f)
}

// runWith is run with the service's options edited.
func runWith(t *testing.T, edit func(*provisioning.Options), f func(t *testing.T, e *env)) {
	t.Helper()
	sqlite := func(t *testing.T) string { return filepath.Join(t.TempDir(), "eim.db") }
	type engine struct {
		dsn    func(t *testing.T) string
		direct bool
	}
	engines := map[string]engine{"sqlite": {sqlite, false}, "sqlite-direct": {sqlite, true}}
	if pgURL != "" {
		engines["postgres"] = engine{func(*testing.T) string { return pgURL }, false}
	}
	for name, en := range engines {
		t.Run(name, func(t *testing.T) {
			f(t, newEnv(t, en.dsn(t), func(o *provisioning.Options) {
				if en.direct {
					o.Store = concurrentWriters{o.Store}
				}
				if edit != nil {
					edit(o)
				}
			}))
		})
	}
}

// concurrentWriters is a store that says it takes concurrent writers.
type concurrentWriters struct{ eim.Store }

func (concurrentWriters) Capabilities() eim.Capabilities {
	return eim.Capabilities{ConcurrentWriters: true}
}

var projSeq int64
var projMu sync.Mutex

func newEnv(t *testing.T, dsn string, edit func(*provisioning.Options)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	projMu.Lock()
	projSeq++
	proj := fmt.Sprintf("p%d-%d", time.Now().UnixNano(), projSeq)
	projMu.Unlock()
	inv := inventory.New(st, inventory.Options{})
	if _, err := inv.CreateProject(ctx, proj, ""); err != nil {
		t.Fatalf("create project: %v", err)
	}
	b := inventory.NewBatcher(st, inventory.BatcherOptions{MaxBatch: 128})
	t.Cleanup(b.Close)
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	opts := provisioning.Options{
		Store: st, Batcher: b, Now: c.Now, AgentURL: "https://eim.example:8443",
		CACertPEM: []byte(testCA), CAFingerprint: "ab12",
	}
	if edit != nil {
		edit(&opts)
	}
	return &env{t: t, ctx: ctx, store: st, inv: inv, svc: provisioning.New(opts), clock: c, proj: proj, opts: opts}
}

func (e *env) create(r eim.Resource) eim.Resource {
	e.t.Helper()
	out, err := e.inv.Create(e.ctx, e.proj, r)
	if err != nil {
		e.t.Fatalf("create %s: %v", r.ResourceKind(), err)
	}
	return out
}

const goodSha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func (e *env) os(url, sha string) *eim.OS {
	return e.create(&eim.OS{Name: "ubuntu-" + fmt.Sprint(time.Now().UnixNano()), ImageURL: url, Sha256: sha,
		ProfileName: "ubuntu", Architecture: "x86_64", SecurityFeature: "SECURITY_FEATURE_NONE"}).(*eim.OS)
}

func (e *env) host() *eim.Host {
	return e.create(&eim.Host{Name: "edge", UUID: newUUID()}).(*eim.Host)
}

var uuidSeq int64

func newUUID() string {
	projMu.Lock()
	defer projMu.Unlock()
	uuidSeq++
	return fmt.Sprintf("4c4c4544-0000-4000-8000-%012x", time.Now().UnixNano()%1e9*1000+uuidSeq)
}

func (e *env) instance(h *eim.Host, os *eim.OS, edit func(*eim.Instance)) *eim.Instance {
	in := &eim.Instance{Name: "inst", Kind: eim.InstanceKindMetal, HostID: h.ResourceID, OSID: os.ResourceID}
	if edit != nil {
		edit(in)
	}
	return e.create(in).(*eim.Instance)
}

func (e *env) getInstance(id string) *eim.Instance {
	e.t.Helper()
	r, err := e.inv.Get(e.ctx, e.proj, eim.KindInstance, id)
	if err != nil {
		e.t.Fatalf("get instance: %v", err)
	}
	return r.(*eim.Instance)
}

func (e *env) getHost(id string) *eim.Host {
	e.t.Helper()
	r, err := e.inv.Get(e.ctx, e.proj, eim.KindHost, id)
	if err != nil {
		e.t.Fatalf("get host: %v", err)
	}
	return r.(*eim.Host)
}

// workflow reads the stored workflow of the host.
func (e *env) workflow(hostID string) *eim.Workflow {
	e.t.Helper()
	var wf *eim.Workflow
	err := e.store.View(e.ctx, e.proj, func(tx eim.Tx) error {
		items, _, err := tx.List(e.ctx, eim.KindWorkflow, eim.Query{Where: []eim.Cond{{Field: "hostId", Value: hostID}}})
		if err != nil {
			return err
		}
		if len(items) != 1 {
			return fmt.Errorf("%d workflows, want 1", len(items))
		}
		wf = items[0].(*eim.Workflow)
		return nil
	})
	if err != nil {
		e.t.Fatalf("read workflow: %v", err)
	}
	return wf
}

func (e *env) getWorkflow(hostID string) *provisioningv1.GetWorkflowResponse {
	e.t.Helper()
	return e.getWorkflowSB(hostID, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED)
}

// getWorkflowSB asks for the workflow as a node reporting Secure Boot
// state sb.
func (e *env) getWorkflowSB(hostID string, sb provisioningv1.SecureBootState) *provisioningv1.GetWorkflowResponse {
	e.t.Helper()
	return e.getWorkflowMB(hostID, sb, nil)
}

// getWorkflowMB asks for the workflow as a node reporting Secure Boot
// state sb and the measured boot mb.
func (e *env) getWorkflowMB(hostID string, sb provisioningv1.SecureBootState, mb *provisioningv1.MeasuredBoot) *provisioningv1.GetWorkflowResponse {
	e.t.Helper()
	resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, hostID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{AgentVersion: "test", SecureBoot: sb, MeasuredBoot: mb}))
	if err != nil {
		e.t.Fatalf("GetWorkflow: %v", err)
	}
	return resp.Msg
}

func (e *env) report(hostID string, m *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error) {
	resp, err := e.svc.ReportAction(asNode(e.ctx, e.proj, hostID), connect.NewRequest(m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// mustReport reports and fails the test on an error or a cancel.
func (e *env) mustReport(hostID string, wf *provisioningv1.Workflow, i int, state provisioningv1.ActionState, msg, out string) {
	e.t.Helper()
	resp, err := e.report(hostID, &provisioningv1.ReportActionRequest{
		WorkflowId: wf.Id, Attempt: wf.Attempt, Index: uint32(i), State: state, Message: msg, Output: []byte(out),
	})
	if err != nil {
		e.t.Fatalf("report %d %s: %v", i, state, err)
	}
	if resp.Cancel {
		e.t.Fatalf("report %d %s: cancel", i, state)
	}
}

func (e *env) reportIn(hostID string) *hostv1.ReportInResponse {
	e.t.Helper()
	resp, err := e.svc.ReportIn(asNode(e.ctx, e.proj, hostID), connect.NewRequest(&hostv1.ReportInRequest{Hostname: hostID, AgentVersion: "test"}))
	if err != nil {
		e.t.Fatalf("ReportIn: %v", err)
	}
	return resp.Msg
}

func codeOf(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

var (
	running   = provisioningv1.ActionState_ACTION_STATE_RUNNING
	succeeded = provisioningv1.ActionState_ACTION_STATE_SUCCEEDED
	failed    = provisioningv1.ActionState_ACTION_STATE_FAILED
)
