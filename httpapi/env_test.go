package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// tokens is a test Authenticator: fixed token strings mapped to principals.
// (auth_test.go runs the same rules through the real auth package.)
type tokens map[string]*eim.Principal

func (tk tokens) Authenticate(_ context.Context, token string) (*eim.Principal, error) {
	if p, ok := tk[token]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// env is a real handler over a real inventory on a SQLite file, with two
// projects: p1 and p2.
type env struct {
	srv *httptest.Server
	inv *inventory.Service
	h   http.Handler
}

// Tokens of the test env: admin; read-write and read-only on p1;
// read-write on p2.
const (
	tokAdmin = "admin-token"
	tokRW    = "rw-token"
	tokRO    = "ro-token"
	tokRW2   = "rw2-token"
)

func newEnv(t testing.TB, opts httpapi.Options) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	inv := inventory.New(st, inventory.Options{})
	return newEnvWith(t, inv, nil, opts)
}

// newEnvWith builds the env over inv; authn nil means the token table.
func newEnvWith(t testing.TB, inv *inventory.Service, authn httpapi.Authenticator, opts httpapi.Options) *env {
	t.Helper()
	ctx := context.Background()
	p1, err := inv.CreateProject(ctx, "p1", "")
	if err != nil {
		t.Fatalf("create project p1: %v", err)
	}
	p2, err := inv.CreateProject(ctx, "p2", "")
	if err != nil {
		t.Fatalf("create project p2: %v", err)
	}
	if authn == nil {
		authn = tokens{
			tokAdmin: {Subject: "admin", Roles: []string{eim.RoleAdmin}},
			tokRW:    {Subject: "rw", Roles: []string{eim.ProjectRole(p1, true)}},
			tokRO:    {Subject: "ro", Roles: []string{eim.ProjectRole(p1, false)}},
			tokRW2:   {Subject: "rw2", Roles: []string{eim.ProjectRole(p2, true)}},
		}
	}
	h := httpapi.New(inv, authn, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, inv: inv, h: h}
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	raw    []byte
	obj    map[string]any
}

func (r resp) str(key string) string {
	s, _ := r.obj[key].(string)
	return s
}

func (r resp) num(key string) int {
	f, _ := r.obj[key].(float64)
	return int(f)
}

func (r resp) items(key string) []any {
	a, _ := r.obj[key].([]any)
	return a
}

// do sends a request. path starting with "/v1/" or "/" + non-project paths
// is used as is; "~/x" means /v1/projects/p1/x. body: nil, string (raw) or
// a value to marshal.
func (e *env) do(t testing.TB, method, path, token string, body any) resp {
	t.Helper()
	if rest, ok := strings.CutPrefix(path, "~"); ok {
		path = "/v1/projects/p1" + rest
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 && method != http.MethodHead {
		if err := json.Unmarshal(raw, &r.obj); err != nil {
			t.Fatalf("%s %s: response is not a JSON object: %v: %s", method, path, err, raw)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type got %q, want application/json", method, path, ct)
		}
	}
	return r
}

// must sends a request and fails unless the status is want.
func (e *env) must(t testing.TB, want int, method, path, token string, body any) resp {
	t.Helper()
	r := e.do(t, method, path, token, body)
	if r.status != want {
		t.Fatalf("%s %s: got status %d, want %d; body %s", method, path, r.status, want, r.raw)
	}
	return r
}

// wantError checks an error response: status, code, and that the message
// mentions each of words.
func wantError(t *testing.T, r resp, status int, code string, words ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d, want %d; body %s", r.status, status, r.raw)
	}
	if len(r.obj) != 2 || r.str("code") != code || r.str("message") == "" {
		t.Fatalf("error body got %s, want exactly {code:%q, message:…}", r.raw, code)
	}
	for _, w := range words {
		if !strings.Contains(r.str("message"), w) {
			t.Errorf("error message %q does not mention %q", r.str("message"), w)
		}
	}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Fixtures created through the API in p1.
func (e *env) region(t *testing.T, name string) string {
	return e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": name}).str("resourceId")
}

func (e *env) site(t *testing.T, name, region string) string {
	return e.must(t, 200, "POST", "~/sites", tokRW, map[string]any{"name": name, "regionId": region}).str("resourceId")
}

func (e *env) host(t *testing.T, name string) string {
	return e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": name, "uuid": newUUID()}).str("resourceId")
}

func (e *env) os(t *testing.T, name string) string {
	return e.must(t, 200, "POST", "~/compute/os", tokRW, map[string]any{"name": name, "sha256": sha, "profileName": name, "osType": "OS_TYPE_MUTABLE"}).str("resourceId")
}
