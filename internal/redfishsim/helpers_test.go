package redfishsim_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
	"go.uber.org/goleak"
)

// TestMain fails the package when a server, a QEMU machine or a QMP
// connection leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a BMC served on loopback, over HTTPS and HTTP.
type env struct {
	bmc *redfishsim.BMC
	srv *redfishsim.Server
	hc  *http.Client
}

const user, password = "admin", "s3cret"

func start(t *testing.T, cfg redfishsim.Config) *env {
	t.Helper()
	if cfg.Username == "" {
		cfg.Username, cfg.Password = user, password
	}
	b, err := redfishsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redfishsim.Serve(b, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return &env{bmc: b, srv: srv, hc: &http.Client{Transport: tr}}
}

// oneSystem starts a BMC of one system on m.
func oneSystem(t *testing.T, m redfishsim.Machine, faults redfishsim.Faults) *env {
	return start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}, Faults: faults})
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// errorID is the first @Message.ExtendedInfo MessageId of an error answer.
func (a answer) errorID() string {
	e, _ := a.body["error"].(map[string]any)
	info, _ := e["@Message.ExtendedInfo"].([]any)
	if len(info) == 0 {
		return ""
	}
	m, _ := info[0].(map[string]any)
	id, _ := m["MessageId"].(string)
	return id
}

// do sends a request with Basic credentials unless header has others
// (set "Authorization" to "" for none).
func (e *env) do(t *testing.T, method, path string, body any, header map[string]string) answer {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(v)
	default:
		data, _ := json.Marshal(v)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
		}
	}
	return a
}

func (e *env) get(t *testing.T, path string) map[string]any {
	t.Helper()
	a := e.do(t, "GET", path, nil, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", path, a.status, a.raw)
	}
	return a.body
}

// field walks a decoded JSON document: field(doc, "Boot", "BootSourceOverrideTarget").
func field(doc map[string]any, path ...string) any {
	var v any = doc
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
