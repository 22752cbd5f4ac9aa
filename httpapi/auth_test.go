package httpapi_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
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

// TestAccessMessages checks that a refusal says what is wrong: a reader
// writing lacks the write role (not access to a project it reads), a token
// that is not one is said to be no token.
func TestAccessMessages(t *testing.T) {
	ctx := context.Background()
	iss, err := auth.LoadIssuer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ver, err := auth.NewVerifier(ctx, iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inv := inventory.New(st, inventory.Options{})
	e := newEnvWith(t, inv, ver, httpapi.Options{})
	p1, err := inv.FindProject(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := iss.Mint("tester", []string{eim.ProjectRole(p1, false)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"name": "r"}
	role := eim.ProjectRole(p1, true)
	for _, path := range []string{"~/regions", "/edge-infra.orchestrator.apis/v2/regions?projectName=p1"} {
		wantError(t, e.do(t, "POST", path, ro, body), 403, "PermissionDenied", `POST needs a write role on project "p1"`, role, "may only read")
	}
	wantError(t, e.do(t, "DELETE", "/v1/projects/p2/regions/region-12345678", ro, nil), 403, "PermissionDenied", `no access to project "p2"`)
	hs256 := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + ".e30.c2ln"
	for tok, words := range map[string][]string{
		"not.a.jwt":      {"not a valid token"},
		"garbage":        {"not a valid token"},
		"Zm9v.YmFy.YmF6": {"not a valid token"},
		hs256:            {`token signed with "HS256"`, "does not accept"},
		ro[:len(ro)-20]:  {"signature"},
	} {
		r := e.do(t, "GET", "~/regions", tok, nil)
		if r.status == 401 && strings.Contains(r.str("message"), "malformed") {
			t.Errorf("token %q: got %q, want no 'malformed'", tok, r.str("message"))
		}
		wantError(t, r, 401, "Unauthenticated", words...)
	}
}
