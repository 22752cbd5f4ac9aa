package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
)

// tokens is an authenticator of fixed tokens.
type tokens map[string]*eim.Principal

func (a tokens) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	if p, ok := a[tok]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is the part's API and embedded store on a real store (SQLite),
// mounted as the server mounts them, on one listener.
type env struct {
	t            testing.TB
	store        *sqlstore.Store
	key          *seal.Key
	svc          *objstore.Service
	srv          *httptest.Server
	clock        *clock
	hostA, hostB string // of projects a and b
	dataDir      string
}

func newEnv(t testing.TB, o objstore.Options) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key, _ := seal.New(raw)
	e := &env{t: t, store: st, key: key, clock: &clock{t: time.Now()}}
	for i, name := range []string{"a", "b"} {
		if err := st.CreateProject(ctx, &eim.Project{Name: name, ID: "00000000-0000-4000-8000-00000000000" + string(rune('1'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	host := func(project string) string {
		h := &eim.Host{Name: "h"}
		if err := st.Update(ctx, project, func(tx eim.Tx) error { return tx.Create(ctx, h) }); err != nil {
			t.Fatal(err)
		}
		return h.ResourceID
	}
	e.hostA, e.hostB = host("a"), host("b")
	mux := http.NewServeMux()
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	e.dataDir = t.TempDir()
	o.Store, o.Key, o.DataDir, o.AgentURL, o.Now = st, key, e.dataDir, e.srv.URL, e.clock.now
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Authenticator = tokens{
		"admin":  {Subject: "admin", Roles: []string{eim.RoleAdmin}},
		"writer": {Subject: "writer", Roles: []string{"a_im-rw"}},
		"reader": {Subject: "reader", Roles: []string{"a_im-r"}},
		"bwrite": {Subject: "bwrite", Roles: []string{"b_im-rw"}},
	}
	if e.svc, err = objstore.New(o); err != nil {
		t.Fatal(err)
	}
	for p, h := range e.svc.Routes() {
		mux.Handle(p, h)
	}
	for p, h := range e.svc.AgentRoutes() {
		mux.Handle(p, h)
	}
	return e
}

// do sends a request as tok and returns the status and body.
func (e *env) do(tok, method, path string, body any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) want(tok, method, path string, body any, status int, contains ...string) string {
	e.t.Helper()
	got, b := e.do(tok, method, path, body)
	if got != status {
		e.t.Fatalf("%s %s: got %d %s, want %d", method, path, got, b, status)
	}
	for _, c := range contains {
		if !strings.Contains(b, c) {
			e.t.Fatalf("%s %s: got %s, want it to contain %q", method, path, b, c)
		}
	}
	return b
}

// change is the FileChange of content at path (nil: deleted).
func change(path string, content []byte) eim.FileChange {
	if content == nil {
		return eim.FileChange{Path: path}
	}
	sum := sha256.Sum256(content)
	return eim.FileChange{Path: path, Present: true, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

// send sends a grant as a device's uploader does: its method, URL and
// headers, with body for a PUT. It returns the status and the answer.
func send(t *testing.T, g eim.UploadGrant, body []byte) (int, string) {
	t.Helper()
	if g.Refused != "" {
		t.Fatalf("grant of %s refused: %s", g.Path, g.Refused)
	}
	req, err := http.NewRequestWithContext(t.Context(), g.Method, g.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if g.Method != http.MethodPut {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range g.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func grant(t *testing.T, svc *objstore.Service, project, prefix string, changes ...eim.FileChange) []eim.UploadGrant {
	t.Helper()
	gs, exp, err := svc.GrantUploads(t.Context(), project, prefix, changes)
	if err != nil {
		t.Fatalf("GrantUploads: %v", err)
	}
	if len(gs) != len(changes) || exp.IsZero() {
		t.Fatalf("GrantUploads: got %d grants expiring %v, want %d and an expiry", len(gs), exp, len(changes))
	}
	return gs
}
