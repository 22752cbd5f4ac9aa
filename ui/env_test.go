package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/ui"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "ui tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tokens is a test Authenticator: fixed token strings mapped to principals.
type tokens map[string]*eim.Principal

func (tk tokens) Authenticate(_ context.Context, token string) (*eim.Principal, error) {
	if p, ok := tk[token]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

const (
	tokAdmin = "admin-token"
	tokRW    = "rw-token"
	tokRO    = "ro-token"
	tokOther = "other-token" // read-write in another project only
	tokClRW  = "cl-rw-token" // the project's cluster write role alone
	tokClR   = "cl-r-token"  // the project's cluster read role alone
)

// env is the UI over a SQLite store, called in process.
type env struct {
	t     testing.TB
	st    *sqlstore.Store
	inv   *inventory.Service
	h     *ui.Handler
	close func()
}

// envOption adds to the UI's options (the other modules' APIs, say),
// given the env's store, inventory and token checker.
type envOption func(st *sqlstore.Store, inv *inventory.Service, authn tokens, o *ui.Options)

func newEnv(t testing.TB, project string, opts ...envOption) *env {
	t.Helper()
	return newEnvAt(t, project, filepath.Join(t.TempDir(), "eim.db"), opts...)
}

// newEnvAt opens (or creates) the SQLite database at path; its projects
// are made when missing.
func newEnvAt(t testing.TB, project, path string, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, path, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inv := inventory.New(st, inventory.Options{})
	ensure := func(name string) *eim.Project {
		p, err := inv.FindProject(ctx, name)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			p, err = inv.CreateProject(ctx, name, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, other := ensure(project), ensure("other")
	authn := tokens{
		tokAdmin: {Subject: "admin", Roles: []string{eim.RoleAdmin}},
		tokRW:    {Subject: "rw", Roles: []string{eim.ProjectRole(p, true)}},
		tokRO:    {Subject: "ro", Roles: []string{eim.ProjectRole(p, false)}},
		tokOther: {Subject: "other", Roles: []string{eim.ProjectRole(other, true)}},
		tokClRW:  {Subject: "cl-rw", Roles: []string{eim.ClusterRoleName(p, true)}},
		tokClR:   {Subject: "cl-r", Roles: []string{eim.ClusterRoleName(p, false)}},
	}
	o := ui.Options{Store: st, API: httpapi.InProcess(httpapi.New(inv, authn, httpapi.Options{}))}
	for _, opt := range opts {
		opt(st, inv, authn, &o)
	}
	h, err := ui.New(inv, authn, o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, st: st, inv: inv, h: h, close: func() { st.Close() }}
}

// get answers GET path with the session of token ("" = none).
// live runs the handler's summary of the fleet until the test ends and
// waits until it is live.
func (e *env) live() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.h.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !e.h.Live() {
		if time.Now().After(deadline) {
			e.t.Fatal("the fleet summary is not live after 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) get(token, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "http://eim.test"+path, nil)
	r.Header.Set("Accept", "text/html")
	if token != "" {
		r.AddCookie(&http.Cookie{Name: "eim_session", Value: token})
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// post sends a form as a page of origin would ("" = no Origin header).
func (e *env) post(token, origin, path string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "http://eim.test"+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if token != "" {
		r.AddCookie(&http.Cookie{Name: "eim_session", Value: token})
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

var reCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's form token from a page.
func (e *env) csrf(token, path string) string {
	e.t.Helper()
	m := reCSRF.FindStringSubmatch(e.get(token, path).Body.String())
	if m == nil {
		e.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}
