package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// env is a real server stack (SQLite in memory, inventory, REST API, local
// token issuer) behind a real HTTP server.
type env struct {
	url   string
	admin *client.Client
	iss   *auth.Issuer
	inv   *inventory.Service
}

func newEnv(t *testing.T) *env {
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
	return &env{url: srv.URL, admin: client.New(srv.URL, tok, srv.Client()), iss: iss, inv: inv}
}

func (e *env) clientWith(t *testing.T, roles ...string) *client.Client {
	t.Helper()
	tok, err := e.iss.Mint("user", roles, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return client.New(e.url, tok, nil)
}

func TestProjectsAndResourceCRUD(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.admin

	p, err := c.CreateProject(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	ps, err := c.ListProjects(ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("ListProjects: got %v, %v; want [acme]", ps, err)
	}

	var r eim.Region
	if err := c.Create(ctx, "acme", eim.KindRegion, map[string]any{"name": "europe"}, &r); err != nil {
		t.Fatalf("Create region: %v", err)
	}
	var s eim.Site
	if err := c.Create(ctx, "acme", eim.KindSite, map[string]any{"name": "berlin", "regionId": r.ResourceID}, &s); err != nil {
		t.Fatalf("Create site: %v", err)
	}
	if s.Region == nil || s.Region.Name != "europe" {
		t.Errorf("site's expanded region: got %+v, want europe", s.Region)
	}

	page, err := c.List(ctx, "acme", eim.KindSite, client.ListOptions{Filter: `name="berl*"`})
	if err != nil || page.Total != 1 || len(page.Items) != 1 || page.HasNext {
		t.Fatalf("List sites: got %+v, %v; want one", page, err)
	}
	sites, _, err := client.ListOf[eim.Site](ctx, c, "acme", client.ListOptions{})
	if err != nil || len(sites) != 1 || sites[0].ResourceID != s.ResourceID {
		t.Fatalf("ListOf sites: got %v, %v", sites, err)
	}

	var got eim.Site
	if err := c.Get(ctx, "acme", eim.KindSite, s.ResourceID, &got); err != nil || got.Name != "berlin" {
		t.Fatalf("Get site: got %+v, %v", got, err)
	}
	if err := c.Patch(ctx, "acme", eim.KindSite, s.ResourceID, map[string]any{"name": "munich"}, &got); err != nil || got.Name != "munich" || got.RegionID != r.ResourceID {
		t.Fatalf("Patch site: got %+v, %v; want munich in the same region", got, err)
	}
	if err := c.Update(ctx, "acme", eim.KindSite, s.ResourceID, map[string]any{"name": "hamburg"}, &got); err != nil || got.Name != "hamburg" || got.RegionID != "" {
		t.Fatalf("Update site: got %+v, %v; want hamburg with no region (PUT replaces)", got, err)
	}
	if err := c.Delete(ctx, "acme", eim.KindSite, s.ResourceID); err != nil {
		t.Fatalf("Delete site: %v", err)
	}
	if err := c.Get(ctx, "acme", eim.KindSite, s.ResourceID, nil); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("Get deleted site: got %v, want %s", err, eim.ENOTFOUND)
	}

	h, err := c.RegisterHost(ctx, "acme", client.HostRegistration{Name: "line-1", SerialNumber: "SN12345"})
	if err != nil || h.DesiredState != eim.HostStateRegistered {
		t.Fatalf("RegisterHost: got %+v, %v", h, err)
	}
	if err := c.OnboardHost(ctx, "acme", h.ResourceID); err != nil {
		t.Fatalf("OnboardHost: %v", err)
	}
	if err := c.InvalidateHost(ctx, "acme", h.ResourceID, "stolen"); err != nil {
		t.Fatalf("InvalidateHost: %v", err)
	}
	var hg eim.Host
	if err := c.Get(ctx, "acme", eim.KindHost, h.ResourceID, &hg); err != nil || hg.DesiredState != eim.HostStateUntrusted || hg.Note != "stolen" {
		t.Fatalf("invalidated host: got state %q note %q, %v", hg.DesiredState, hg.Note, err)
	}
	sum, err := c.HostSummary(ctx, "acme", "")
	if err != nil || sum.Total != 1 || sum.Unallocated != 1 {
		t.Fatalf("HostSummary: got %+v, %v", sum, err)
	}

	if _, err := c.DeleteProject(ctx, "acme", false); eim.ErrorCode(err) == "" {
		t.Errorf("DeleteProject of a non-empty project without force: got success, want an error")
	}
	if _, err := c.DeleteProject(ctx, "acme", true); err != nil {
		t.Errorf("DeleteProject force: %v", err)
	}
}

func TestErrorsMapToCodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p, err := e.admin.CreateProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	reader := e.clientWith(t, eim.ProjectRole(p, false))
	anon := client.New(e.url, "", nil)

	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{"not found", func() error { return e.admin.Get(ctx, "acme", eim.KindHost, "host-0000abcd", nil) }, eim.ENOTFOUND},
		{"malformed id", func() error { return e.admin.Get(ctx, "acme", eim.KindHost, "site-0000abcd", nil) }, eim.EINVALID},
		{"bad field", func() error {
			return e.admin.Create(ctx, "acme", eim.KindRegion, json.RawMessage(`{"nmae":"x"}`), nil)
		}, eim.EINVALID},
		{"duplicate", func() error { _, err := e.admin.CreateProject(ctx, "acme"); return err }, eim.ECONFLICT},
		{"no token", func() error { _, err := anon.ListProjects(ctx); return err }, eim.EUNAUTHORIZED},
		{"bad token", func() error {
			_, err := client.New(e.url, "abc.def.ghi", nil).ListProjects(ctx)
			return err
		}, eim.EUNAUTHORIZED},
		{"read-only write", func() error {
			return reader.Create(ctx, "acme", eim.KindRegion, map[string]any{"name": "x"}, nil)
		}, eim.EFORBIDDEN},
		{"unreachable", func() error {
			_, err := client.New("http://127.0.0.1:1", "t", nil).ListProjects(ctx)
			return err
		}, eim.EUNAVAILABLE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if got := eim.ErrorCode(err); got != tt.want {
				t.Errorf("got code %q (%v), want %q", got, err, tt.want)
			}
			if eim.ErrorMessage(err) == "" {
				t.Errorf("got an empty message")
			}
		})
	}
}

// TestErrorsFromProxies covers answers that are not the API's error body,
// as a reverse proxy in front of the server may send them.
func TestErrorsFromProxies(t *testing.T) {
	tests := []struct {
		status  int
		body    string
		want    string
		wantMsg string
	}{
		{http.StatusRequestEntityTooLarge, "<html>too big</html>", eim.ETOOLARGE, "server answered 413 Request Entity Too Large"},
		{http.StatusBadGateway, "", eim.EUNAVAILABLE, "server answered 502 Bad Gateway"},
		{http.StatusTooManyRequests, `{"code":"ResourceExhausted","message":"slow down"}`, eim.EUNAVAILABLE, "slow down"},
		{http.StatusRequestEntityTooLarge, `{"code":"ResourceExhausted","message":"body over 100 KiB"}`, eim.ETOOLARGE, "body over 100 KiB"},
		{http.StatusTeapot, "", eim.EINTERNAL, "server answered 418 I'm a teapot"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			// A 429 is sent again until the context ends (see below).
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := client.New(srv.URL, "t", nil).Do(ctx, http.MethodGet, "/x", nil, nil)
			if got := eim.ErrorCode(err); got != tt.want {
				t.Errorf("code: got %q, want %q", got, tt.want)
			}
			if got := eim.ErrorMessage(err); got != tt.wantMsg {
				t.Errorf("message: got %q, want %q", got, tt.wantMsg)
			}
		})
	}
}

// A request refused by the server's rate limit (429) is sent again, body
// and all, after the Retry-After; one refused every time is given up on.
func TestRateLimitedRequestsAreSentAgain(t *testing.T) {
	var calls atomic.Int32
	var refuse atomic.Int32
	var bodies sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		bodies.Store(n, string(b))
		if refuse.Load() < 0 || n <= refuse.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"code":"ResourceExhausted","message":"slow down"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t", nil)

	refuse.Store(2)
	var out struct{ OK bool }
	if err := c.Do(context.Background(), http.MethodPost, "/x", map[string]string{"name": "a"}, &out); err != nil || !out.OK {
		t.Fatalf("after two refusals: %v, %+v", err, out)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("requests: got %d, want 3", n)
	}
	for i := int32(1); i <= 3; i++ {
		if b, _ := bodies.Load(i); b != `{"name":"a"}` {
			t.Errorf("body of request %d: %q", i, b)
		}
	}

	calls.Store(0)
	refuse.Store(-1) // always
	err := c.Do(context.Background(), http.MethodGet, "/x", nil, nil)
	if eim.ErrorCode(err) != eim.EUNAVAILABLE || eim.ErrorMessage(err) != "slow down" {
		t.Fatalf("refused every time: %v", err)
	}
	if n := calls.Load(); n != 11 {
		t.Errorf("requests before giving up: got %d, want 11", n)
	}
}
