package sim_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
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
	srv := httptest.NewServer(httpapi.New(inv, v, httpapi.Options{}))
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
