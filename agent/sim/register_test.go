package sim_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// apiEnv is the real REST stack (SQLite in memory) behind an HTTP server.
func apiEnv(t *testing.T) *client.Client {
	t.Helper()
	return apiEnvWith(t, func(h http.Handler) http.Handler { return h })
}

// apiEnvWith is apiEnv with the API's handler wrapped by wrap.
func apiEnvWith(t *testing.T, wrap func(http.Handler) http.Handler) *client.Client {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, ":memory:", sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	inv := inventory.New(store, inventory.Options{})
	iss, err := auth.LoadIssuer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wrap(httpapi.New(inv, v, httpapi.Options{})))
	t.Cleanup(srv.Close)
	tok, err := iss.Mint("admin", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(srv.URL, tok, srv.Client())
	if _, err := cl.CreateProject(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestRegister(t *testing.T) {
	ctx := context.Background()
	cl := apiEnv(t)
	var os eim.OS
	if err := cl.Create(ctx, "fleet", eim.KindOS, map[string]string{"name": "ubuntu", "imageUrl": "http://127.0.0.1/os.img", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "profileName": "ubuntu"}, &os); err != nil {
		t.Fatal(err)
	}
	ids := sim.Generate(40, 7)
	var done atomic.Int64
	hostIDs, err := sim.Registration{Client: cl, Project: "fleet", OSID: os.ResourceID, Concurrency: 8, OnHost: func() { done.Add(1) }}.Register(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(hostIDs) != 40 || done.Load() != 40 {
		t.Fatalf("got %d host IDs and %d callbacks, want 40", len(hostIDs), done.Load())
	}
	for i, id := range hostIDs[:3] {
		var h eim.Host
		if err := cl.Get(ctx, "fleet", eim.KindHost, id, &h); err != nil {
			t.Fatal(err)
		}
		if h.UUID != ids[i].UUID || h.SerialNumber != ids[i].Serial || h.Name != ids[i].Hostname || h.DesiredState != eim.HostStateOnboarded {
			t.Errorf("host %d: got uuid %s serial %s name %s state %s, want %+v ONBOARDED", i, h.UUID, h.SerialNumber, h.Name, h.DesiredState, ids[i])
		}
	}
	page, err := cl.List(ctx, "fleet", eim.KindInstance, client.ListOptions{Filter: `osID="` + os.ResourceID + `"`})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 40 {
		t.Errorf("instances with the OS: got %d, want 40", page.Total)
	}

	// Registering the same identities again fails with the API's error.
	if _, err := (sim.Registration{Client: cl, Project: "fleet"}).Register(ctx, ids[:1]); err == nil {
		t.Error("registering a duplicate: got no error")
	}
}

// lossy carries out every request but drops the connection instead of
// answering every third write, as a server that stops between its commit
// and its answer: the caller cannot tell whether the write happened.
func lossy(h http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || n.Add(1)%3 != 0 {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler)
	})
}

// TestRegisterRetries registers a fleet through a server whose answers to
// a third of the writes are lost: every call is retried, and each host is
// registered once with exactly one instance.
func TestRegisterRetries(t *testing.T) {
	ctx := context.Background()
	cl := apiEnvWith(t, lossy)
	var os eim.OS
	err := errors.New("not tried")
	for err != nil { // the lossy server may drop this one too: it is the test's own call
		err = cl.Create(ctx, "fleet", eim.KindOS, map[string]string{"name": "ubuntu", "imageUrl": "http://127.0.0.1/os.img", "sha256": "0000000000000000000000000000000000000000000000000000000000000000", "profileName": "ubuntu"}, &os)
		if err != nil && eim.ErrorCode(err) != eim.EUNAVAILABLE {
			t.Fatal(err)
		}
	}
	ids := sim.Generate(30, 9)
	var retries atomic.Int64
	reg := sim.Registration{Client: cl, Project: "fleet", OSID: os.ResourceID, Concurrency: 4,
		Backoff: agent.Backoff{Min: 4 * time.Millisecond, Max: 20 * time.Millisecond}, OnRetry: func(error) { retries.Add(1) }}
	hostIDs, err := reg.Register(ctx, ids)
	if err != nil {
		t.Fatalf("register: %v (after %d retries)", err, retries.Load())
	}
	if retries.Load() < 10 {
		t.Errorf("got %d retries, want about 20 (a third of 60 writes)", retries.Load())
	}
	for kind, want := range map[eim.Kind]int{eim.KindHost: 30, eim.KindInstance: 30} {
		page, err := cl.List(ctx, "fleet", kind, client.ListOptions{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != want {
			t.Errorf("%s: got %d, want %d", kind, page.Total, want)
		}
	}
	for i, id := range hostIDs {
		page, err := cl.List(ctx, "fleet", eim.KindInstance, client.ListOptions{Filter: `host.resourceId="` + id + `"`, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 1 {
			t.Errorf("host %s (%s): got %d instances, want 1", id, ids[i].Hostname, page.Total)
		}
	}
}
