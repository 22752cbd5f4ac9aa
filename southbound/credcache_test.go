package southbound_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
)

// countingStore counts the credential reads that reach the store.
type countingStore struct {
	*sqlstore.Store
	reads atomic.Int64
}

func (c *countingStore) NodeCredentials(ctx context.Context, project, id string) (eim.NodeCredentials, error) {
	c.reads.Add(1)
	return c.Store.NodeCredentials(ctx, project, id)
}

// With the feed followed (Run), node authentication is answered from
// memory; a revocation written in this process is refused at once, one
// written by another process (another Store on the same database) as soon
// as the feed brings it, and a host moved to another project is not found
// under its old one.
func TestCredentialCache(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &countingStore{Store: e.store.(*sqlstore.Store)}
		sb := southbound.New(southbound.Options{Store: st, Issuer: e.iss})
		sb.Mount(hostv1connect.NewHostServiceHandler(e.svc, connect.WithInterceptors(sb.Interceptor())))
		srv := httptest.NewUnstartedServer(sb)
		srv.TLS = e.srv.TLS
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		host := hostv1connect.NewHostServiceClient(e.client, srv.URL)
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

		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- sb.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
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
