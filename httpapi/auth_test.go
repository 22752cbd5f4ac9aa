package httpapi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// TestRealTokens runs the access rules with tokens minted and verified by
// the auth package, as the server wires it.
func TestRealTokens(t *testing.T) {
	ctx := context.Background()
	iss, err := auth.LoadIssuer(t.TempDir())
	if err != nil {
		t.Fatalf("load issuer: %v", err)
	}
	ver, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatalf("new verifier: %v", err)
	}
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	inv := inventory.New(st, inventory.Options{})
	e := newEnvWith(t, inv, ver, httpapi.Options{})
	p1, err := inv.FindProject(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	mint := func(ttl time.Duration, roles ...string) string {
		tok, err := iss.Mint("tester", roles, ttl)
		if err != nil {
			t.Fatalf("mint: %v", err)
		}
		return tok
	}
	admin := mint(time.Hour, eim.RoleAdmin)
	rw := mint(time.Hour, eim.ProjectRole(p1, true))
	ro := mint(time.Hour, eim.ProjectRole(p1, false))
	byName := mint(time.Hour, "p1_im-rw")         // roles may name the project instead of its ID
	stranger, err := auth.LoadIssuer(t.TempDir()) // another server's key
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := stranger.Mint("tester", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, token string
		status                    int
	}{
		{"admin reads", "GET", "~/regions", admin, 200},
		{"writer writes", "POST", "~/regions", rw, 200},
		{"role by project name", "POST", "~/regions", byName, 200},
		{"reader reads", "GET", "~/regions", ro, 200},
		{"reader cannot write", "POST", "~/regions", ro, 403},
		{"writer of p1 cannot read p2", "GET", "/v1/projects/p2/regions", rw, 403},
		{"token of another issuer", "GET", "~/regions", foreign, 401},
		{"garbage token", "GET", "~/regions", "not.a.jwt", 401},
		{"no token", "GET", "~/regions", "", 401},
		{"admin creates projects", "POST", "/v1/projects", admin, 200},
		{"writer cannot create projects", "POST", "/v1/projects", rw, 403},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"name": "n" + string(rune('a'+i))}
			r := e.do(t, tt.method, tt.path, tt.token, body)
			if r.status != tt.status {
				t.Fatalf("got status %d, want %d: %s", r.status, tt.status, r.raw)
			}
		})
	}
}
