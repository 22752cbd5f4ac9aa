package hostmgr_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var pgURL string

func TestMain(m *testing.M) {
	code := func() int {
		if base := os.Getenv(storetest.PostgresEnv); base != "" {
			u, drop, err := storetest.PostgresDB(base, "eim_hostmgr")
			if err != nil {
				fmt.Fprintln(os.Stderr, "hostmgr tests:", err)
				return 1
			}
			defer drop()
			pgURL = u
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "hostmgr tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
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

// env is one test's store, host module and project on one engine.
type env struct {
	t     testing.TB
	ctx   context.Context
	dsn   string
	store eim.Store
	inv   *inventory.Service
	svc   *hostmgr.Service
	opts  hostmgr.Options
	clock *clock
	proj  string
	// reportIns counts the calls of the provisioning report-in.
	reportIns atomic.Int64
}

// run runs f on SQLite and, when configured, PostgreSQL.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	dsns := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "eim.db") },
	}
	if pgURL != "" {
		dsns["postgres"] = func(*testing.T) string { return pgURL }
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) { f(t, newEnv(t, dsn(t))) })
	}
}

var projSeq atomic.Int64

func newEnv(t testing.TB, dsn string) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	proj := fmt.Sprintf("p%d-%d", time.Now().UnixNano(), projSeq.Add(1))
	inv := inventory.New(st, inventory.Options{})
	if _, err := inv.CreateProject(ctx, proj, ""); err != nil {
		t.Fatalf("create project: %v", err)
	}
	b := inventory.NewBatcher(st, inventory.BatcherOptions{})
	t.Cleanup(b.Close)
	e := &env{t: t, ctx: ctx, dsn: dsn, store: st, inv: inv, proj: proj,
		clock: &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}}
	e.opts = hostmgr.Options{
		Store: st, Batcher: b, Now: e.clock.Now,
		ReportIn: func(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
			e.reportIns.Add(1)
			return connect.NewResponse(&hostv1.ReportInResponse{HeartbeatIntervalSeconds: 99}), nil
		},
		// Ticks far apart: tests drive CheckTimeouts and Flush themselves.
		CheckInterval: time.Hour, FlushInterval: time.Hour,
	}
	e.svc = hostmgr.New(e.opts)
	return e
}

// start runs the service until the test ends.
func (e *env) start(svc *hostmgr.Service) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

var uuidSeq atomic.Int64

func (e *env) host(edit func(*eim.Host)) *eim.Host {
	e.t.Helper()
	h := &eim.Host{Name: "edge", UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012x", time.Now().UnixNano()%1e9*1000+uuidSeq.Add(1))}
	if edit != nil {
		edit(h)
	}
	out, err := e.inv.Create(e.ctx, e.proj, h)
	if err != nil {
		e.t.Fatalf("create host: %v", err)
	}
	return out.(*eim.Host)
}

func (e *env) getHost(id string) *eim.Host {
	e.t.Helper()
	r, err := e.inv.Get(e.ctx, e.proj, eim.KindHost, id)
	if err != nil {
		e.t.Fatalf("get host: %v", err)
	}
	return r.(*eim.Host)
}

// edit changes a stored host as a manager would.
func (e *env) edit(id string, fn func(*eim.Host)) {
	e.t.Helper()
	err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		fn(r.(*eim.Host))
		return tx.Update(e.ctx, r)
	})
	if err != nil {
		e.t.Fatalf("edit host: %v", err)
	}
}

func (e *env) node(h *eim.Host) context.Context {
	return southbound.WithNode(e.ctx, southbound.Node{HostID: h.ResourceID, Project: e.proj})
}

func (e *env) beat(svc *hostmgr.Service, h *eim.Host, m *hostv1.HeartbeatRequest) *hostv1.HeartbeatResponse {
	e.t.Helper()
	if m == nil {
		m = &hostv1.HeartbeatRequest{}
	}
	resp, err := svc.Heartbeat(e.node(h), connect.NewRequest(m))
	if err != nil {
		e.t.Fatalf("heartbeat: %v", err)
	}
	return resp.Msg
}

func (e *env) revision() int64 {
	e.t.Helper()
	r, err := e.store.Revision(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// wantStatus fails unless the host shows the status and indicator.
func (e *env) wantStatus(id, status string, ind eim.StatusIndication) *eim.Host {
	e.t.Helper()
	h := e.getHost(id)
	if h.HostStatus != status || h.HostStatusIndicator != ind {
		e.t.Fatalf("host %s: status %q %s, want %q %s", id, h.HostStatus, h.HostStatusIndicator, status, ind)
	}
	return h
}

// newService returns another service over e's store, as after a restart.
func newService(e *env) *hostmgr.Service { return hostmgr.New(e.opts) }
