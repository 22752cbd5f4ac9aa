package southbound_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// countingStore counts the reads of hosts that reach the store: one by
// one, and the pages read ahead.
type countingStore struct {
	*sqlstore.Store
	reads atomic.Int64
}

func (c *countingStore) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	c.reads.Add(1)
	return c.Store.View(ctx, project, fn)
}

// serve starts a southbound server of opts (the env's issuer) in front of
// the env's host service, and returns it with a client of it.
func (e *env) serve(t *testing.T, opts southbound.Options) (*southbound.Server, hostv1connect.HostServiceClient) {
	opts.Issuer = e.iss
	sb := southbound.New(opts)
	sb.Mount(hostv1connect.NewHostServiceHandler(e.svc, connect.WithInterceptors(sb.Interceptor())))
	srv := httptest.NewUnstartedServer(sb)
	srv.TLS = e.srv.TLS
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return sb, hostv1connect.NewHostServiceClient(e.client, srv.URL)
}

// follow runs sb's Run (the credential cache following the feed) until
// the test ends.
func (e *env) follow(t *testing.T, sb *southbound.Server) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- sb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// With the feed followed (Run), node authentication is answered from
// memory; a revocation written in this process is refused at once, one
// written by another process (another Store on the same database) as soon
// as the feed brings it, and a host moved to another project is not found
// under its old one.
func TestCredentialCache(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &countingStore{Store: e.store.(*sqlstore.Store)}
		sb, host := e.serve(t, southbound.Options{Store: st})
		call := func(tok string) error {
			req := connect.NewRequest(&hostv1.ReportInRequest{})
			req.Header().Set("Authorization", "Bearer "+tok)
			_, err := host.ReportIn(e.ctx, req)
			return err
		}
		tok := e.token()

		// Before Run: every call reads the store.
		for range 3 {
			if err := call(tok); err != nil {
				t.Fatal(err)
			}
		}
		if n := st.reads.Load(); n != 3 {
			t.Fatalf("without the feed: %d reads for 3 calls, want 3", n)
		}

		e.follow(t, sb)
		// Once the cache is on, one read serves every later call.
		waitUntil(t, func() bool {
			before := st.reads.Load()
			for range 5 {
				if err := call(tok); err != nil {
					t.Fatal(err)
				}
			}
			return st.reads.Load()-before <= 1
		})
		base := st.reads.Load()
		for range 50 {
			if err := call(tok); err != nil {
				t.Fatal(err)
			}
		}
		if n := st.reads.Load() - base; n != 0 {
			t.Fatalf("50 cached calls read the store %d times", n)
		}

		// Invalidated through this process's store: refused at once.
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted })
		if err := call(tok); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("right after invalidation: got %v, want Unauthenticated", err)
		}
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateOnboarded })
		if err := call(tok); err != nil {
			t.Fatalf("onboarded again: %v", err)
		}

		// Written by another process: refused once the feed brings it.
		other, err := sqlstore.Open(e.ctx, e.dsn, sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		err = other.Update(e.ctx, e.project, func(tx eim.Tx) error {
			r, err := tx.Get(e.ctx, eim.KindHost, e.hostID)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			h.NodeCredGen++ // new credentials issued: the old token's generation is stale
			return tx.Update(e.ctx, h)
		})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() bool { return connect.CodeOf(call(tok)) == connect.CodeUnauthenticated })
	})
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Once the feed is followed, every host is read ahead in pages, so a
// restarted server's first calls from its fleet read nothing. (A page
// read while a host changed: hostview's TestFillStalePage.)
func TestCredentialsReadAhead(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &countingStore{Store: e.store.(*sqlstore.Store)}
		logs := &lines{}
		sb, host := e.serve(t, southbound.Options{Store: st, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		tok := e.token()

		e.follow(t, sb)
		waitUntil(t, func() bool { return logs.has("host view: read ahead") })
		if n := st.reads.Load(); n != 1 {
			t.Errorf("%d reads for one host, want 1 (a page)", n)
		}
		st.reads.Store(0)
		for range 3 {
			req := connect.NewRequest(&hostv1.ReportInRequest{})
			req.Header().Set("Authorization", "Bearer "+tok)
			if _, err := host.ReportIn(e.ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		if n := st.reads.Load(); n != 0 {
			t.Errorf("%d reads for 3 calls after the read ahead, want 0", n)
		}
	})
}

// lines is a log destination that tests can search.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// While the database is away, a known node is still authenticated with
// the credentials held when the feed was lost, for a token's lifetime; a
// host revoked through this process is not; when the database is back,
// calls are answered from memory again at once.
func TestStoreAwayKeepsKnownNodes(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &storetest.Away{Store: e.store}
		now := func() time.Time { return *e.now.Load() }
		// A view shared with other modules, run by its owner (here).
		hosts := hostview.New(hostview.Options{Store: st, Now: now})
		sb, host := e.serve(t, southbound.Options{Store: st, Hosts: hosts, TokenTTL: time.Minute, Now: now})
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- hosts.Run(ctx) }()
		defer func() { cancel(); <-done }()
		e.follow(t, sb) // returns at the end: the view is not its own
		call := func(tok string) error {
			req := connect.NewRequest(&hostv1.ReportInRequest{})
			req.Header().Set("Authorization", "Bearer "+tok)
			_, err := host.ReportIn(e.ctx, req)
			return err
		}
		tok := e.token()
		// Answered once the view follows the feed, so that the host's
		// credentials are held (a call before that reads the store and
		// keeps nothing).
		waitUntil(t, func() bool { return hosts.Live() && call(tok) == nil })

		st.SetAway(true)
		waitUntil(t, func() bool { return !hosts.Live() })
		for range 3 {
			if err := call(tok); err != nil {
				t.Fatalf("a known node while the database is away: %v", err)
			}
		}
		// A minute and more after the loss: no longer.
		later := e.now.Load().Add(61 * time.Second)
		e.now.Store(&later)
		if err := call(tok); connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("past the token lifetime: %v, want Unavailable", err)
		}
		back := later.Add(-61 * time.Second)
		e.now.Store(&back)
		// Revoked through this process: refused though the store is away.
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateUntrusted })
		if err := call(tok); err == nil {
			t.Fatal("a host revoked through this process was let in while the database is away")
		}
		e.changeHost(func(h *eim.Host) { h.DesiredState = eim.HostStateOnboarded })

		st.SetAway(false)
		waitUntil(t, func() bool { return call(tok) == nil })
	})
}
