package oob_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/syncbuf"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// tokens is an authenticator of fixed tokens.
type tokens map[string]*eim.Principal

func (a tokens) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	if p, ok := a[tok]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// env is the module's API on a real store, mounted as the server mounts
// its routes.
type env struct {
	t             *testing.T
	store         *sqlstore.Store
	driver, dsn   string
	key           *seal.Key
	srv           *httptest.Server
	logs          *logBuffer
	hostA, hostA2 string // project a's hosts
	hostB         string // project b's
}

// logBuffer is the module's log in a test: written by its loops while
// the test reads it.
type logBuffer = syncbuf.Buffer

const password = "Pa55-w0rd-for-the-bmc"

// engines runs f on SQLite and, with EIM_TEST_POSTGRES_URL, PostgreSQL.
func engines(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEnv(t, "sqlite", filepath.Join(t.TempDir(), "eim.db"))) })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(storetest.PostgresEnv) == "" {
			t.Skipf("%s is not set", storetest.PostgresEnv)
		}
		f(t, newEnv(t, "pgx", storetest.PostgresURL(t)))
	})
}

func newEnv(t *testing.T, driver, dsn string) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw := make([]byte, 32)
	rand.Read(raw)
	key, err := seal.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, driver: driver, dsn: dsn, key: key, logs: &logBuffer{}}
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
	e.hostA, e.hostA2, e.hostB = host("a"), host("a"), host("b")
	svc, err := oob.New(oob.Options{Store: st, Key: key, Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Authenticator: tokens{
			"admin":  {Subject: "admin", Roles: []string{eim.RoleAdmin}},
			"writer": {Subject: "writer", Roles: []string{"a_im-rw"}},
			"reader": {Subject: "reader", Roles: []string{"a_im-r"}},
			"bwrite": {Subject: "bwrite", Roles: []string{"b_im-rw"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range svc.Routes() {
		mux.Handle(p, h)
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func bmcPath(project, host string) string {
	return "/v1/projects/" + project + "/compute/hosts/" + host + "/bmc"
}

// do sends a request as tok and returns the status and body.
func (e *env) do(tok, method, path string, body any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
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

func redfish(pw *string) map[string]any {
	m := map[string]any{"protocol": "REDFISH", "address": "https://10.1.2.3:8443", "systemId": "1", "username": "admin", "insecure": true}
	if pw != nil {
		m["password"] = *pw
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// TestBMC: a host's BMC is created and replaced by PUT, read by GET
// without its password (passwordSet), kept when a replace leaves the
// password out, and deleted.
func TestBMC(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := bmcPath("a", e.hostA)
		e.want("writer", "GET", p, nil, http.StatusNotFound, "has no BMC")
		b := e.want("writer", "PUT", p, redfish(ptr(password)), http.StatusOK, `"passwordSet":true`, `"protocol":"REDFISH"`, `"hostId":"`+e.hostA)
		if strings.Contains(b, password) || strings.Contains(b, `"password"`) {
			t.Fatalf("PUT answered the password: %s", b)
		}
		var v eim.BMCView
		b = e.want("reader", "GET", p, nil, http.StatusOK, `"passwordSet":true`, `"address":"https://10.1.2.3:8443"`, `"insecure":true`)
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b, password) || strings.Contains(b, `"password"`) || v.SystemID != "1" || v.Username != "admin" || v.Timestamps.CreatedAt.IsZero() {
			t.Fatalf("GET: got %s", b)
		}

		// Replaced without a password: the stored one is kept.
		in := redfish(nil)
		in["address"], in["insecure"], in["caCert"] = "bmc.example", false, testCA(t)
		e.want("admin", "PUT", p, in, http.StatusOK, `"passwordSet":true`, `"address":"bmc.example"`, `"insecure":false`, "BEGIN CERTIFICATE")
		if pw := e.storedPassword(e.hostA); pw != password {
			t.Fatalf("after a replace without a password: the stored one opens to %q, want the first", pw)
		}
		e.want("writer", "PUT", p, map[string]any{"protocol": "ipmi", "address": "10.0.0.9:623", "username": "root", "password": "new-one"},
			http.StatusOK, `"protocol":"IPMI"`)
		if pw := e.storedPassword(e.hostA); pw != "new-one" {
			t.Fatalf("after a replace with a password: got %q, want new-one", pw)
		}

		e.want("writer", "DELETE", p, nil, http.StatusOK)
		e.want("reader", "GET", p, nil, http.StatusNotFound)
		e.want("writer", "DELETE", p, nil, http.StatusNotFound)
		// A new BMC needs a password again.
		e.want("writer", "PUT", p, redfish(nil), http.StatusBadRequest, "password: required")
	})
}

// storedPassword opens the stored password of host's BMC in project a.
func (e *env) storedPassword(host string) string {
	e.t.Helper()
	b, err := e.store.GetBMC(e.t.Context(), "a", host)
	if err != nil {
		e.t.Fatal(err)
	}
	pw, err := e.key.OpenText(b.SealedPassword, eim.BMCPasswordPurpose("a", host))
	if err != nil {
		e.t.Fatal(err)
	}
	return pw
}

// TestBMCBadRequests: bad input is a 400 naming the field; an unknown
// host is a 404.
func TestBMCBadRequests(t *testing.T) {
	e := newEnv(t, "sqlite", filepath.Join(t.TempDir(), "eim.db"))
	p := bmcPath("a", e.hostA)
	with := func(kv ...any) map[string]any {
		m := redfish(ptr(password))
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"protocol", with("protocol", "SNMP"), `protocol: \"SNMP\" is not one of REDFISH, IPMI, AMT`},
		{"no protocol", with("protocol", nil), "protocol:"},
		{"address", with("address", "https://bmc/redfish/v1"), "address:"},
		{"address port", with("address", "bmc:99999"), "address:"},
		{"no address", with("address", nil), "address: required"},
		{"no username", with("username", nil), "username: required"},
		{"no password", with("password", nil), "password: required"},
		{"empty password", with("password", ""), "password: required"},
		{"ca", with("caCert", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "insecure", nil), "caCert: certificate 1"},
		{"ca not pem", with("caCert", "nope", "insecure", nil), "caCert: not a PEM bundle"},
		{"ca and insecure", with("caCert", testCA(t)), "insecure: not with caCert"},
		{"unknown field", with("passwd", "x"), "passwd: not a field"},
		{"type", with("insecure", "yes"), "insecure: want a bool"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			e.want("writer", "PUT", p, c.body, http.StatusBadRequest, c.want)
		})
	}
	e.t = t
	e.want("writer", "PUT", bmcPath("a", "host-0000000f"), redfish(ptr(password)), http.StatusNotFound, "host host-0000000f not found")
	e.want("writer", "GET", bmcPath("a", "host-0000000f"), nil, http.StatusNotFound)
	e.want("writer", "GET", bmcPath("a", "nohost"), nil, http.StatusBadRequest, "hostId:")
	e.want("writer", "PUT", bmcPath("zzz", e.hostA), redfish(ptr(password)), http.StatusForbidden)
	if list, _ := e.store.ListBMCs(t.Context(), "a"); len(list) != 0 {
		t.Fatalf("after bad requests: %d BMCs stored, want none", len(list))
	}
}

// TestBMCAccess: reads need the project's read role, writes its write
// role; another project's host is not found through another project (nor
// written), and the other project's path is refused.
func TestBMCAccess(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := bmcPath("a", e.hostA)
		e.want("reader", "PUT", p, redfish(ptr(password)), http.StatusForbidden)
		e.want("nobody", "GET", p, nil, http.StatusUnauthorized)
		e.want("writer", "PUT", p, redfish(ptr(password)), http.StatusOK)
		e.want("reader", "GET", p, nil, http.StatusOK)
		e.want("reader", "DELETE", p, nil, http.StatusForbidden)

		// Project b's writer: a's path is refused; a's host through b's
		// path is not found, for reading, writing and deleting.
		e.want("bwrite", "GET", p, nil, http.StatusForbidden)
		e.want("bwrite", "PUT", p, redfish(ptr(password)), http.StatusForbidden)
		e.want("bwrite", "GET", bmcPath("b", e.hostA), nil, http.StatusNotFound)
		e.want("bwrite", "PUT", bmcPath("b", e.hostA), redfish(ptr("other")), http.StatusNotFound)
		e.want("bwrite", "DELETE", bmcPath("b", e.hostA), nil, http.StatusNotFound)
		e.want("writer", "GET", bmcPath("a", e.hostB), nil, http.StatusNotFound)
		e.want("writer", "PUT", bmcPath("a", e.hostB), redfish(ptr("other")), http.StatusNotFound)
		if pw := e.storedPassword(e.hostA); pw != password {
			t.Fatalf("a's BMC after b's attempts: password %q, want the first", pw)
		}
	})
}

// TestBMCSecretAtRest: the password column holds the sealed password, not
// the password; the audit records of the writes (and the module's logs)
// never hold it nor its sealed form.
func TestBMCSecretAtRest(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := bmcPath("a", e.hostA)
		e.want("writer", "PUT", p, redfish(ptr(password)), http.StatusOK)
		e.want("writer", "PUT", p, redfish(ptr(password+"2")), http.StatusOK)
		e.want("writer", "PUT", p, redfish(nil), http.StatusOK)
		e.want("writer", "DELETE", p, nil, http.StatusOK)
		e.want("writer", "PUT", p, redfish(ptr(password)), http.StatusOK)

		db, err := sql.Open(e.driver, e.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var stored string
		q := "SELECT password FROM bmcs WHERE project = 'a' AND host_id = '" + e.hostA + "'"
		if err := db.QueryRowContext(t.Context(), q).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stored, password) || !seal.IsSealedText(stored) {
			t.Fatalf("stored password column: got %q, want it sealed", stored)
		}
		// Bound to its host: it does not open as another host's.
		if _, err := e.key.OpenText(stored, eim.BMCPasswordPurpose("a", e.hostA2)); err == nil {
			t.Fatal("the sealed password opened as another host's")
		}

		recs, _, err := e.store.Audit(t.Context(), "a", eim.AuditQuery{Filter: `kind="bmc"`})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 5 {
			t.Fatalf("audit: got %d records of the BMC, want 5", len(recs))
		}
		for _, r := range recs {
			raw, _ := json.Marshal(r)
			if strings.Contains(string(raw), password) || strings.Contains(string(raw), "eim-sealed") {
				t.Fatalf("audit record holds the password: %s", raw)
			}
			if r.Principal != "user:writer" || r.ResourceID != e.hostA {
				t.Fatalf("audit record: got %s, want by user:writer of %s", raw, e.hostA)
			}
		}
		if c, ok := recs[0].Changes["password"]; !ok || string(c.New) != eim.Redacted {
			t.Fatalf("audit of a create: password change %+v, want redacted", recs[0].Changes)
		}
		if strings.Contains(e.logs.String(), password) {
			t.Fatalf("the logs hold the password: %s", e.logs)
		}
	})
}

// testCA is a self-signed certificate in PEM.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
