package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim/compat/refclient"
	"github.com/eimhq/eim/internal/racecheck"
)

// The suite runs against one real server: the eim binary built from this
// tree, started as an operator starts it ("eim server" on 127.0.0.1, a
// fresh data directory, SQLite). Each test gets a project of its own and a
// read-write token for it.
var srv struct {
	url     string
	dataDir string
	bin     string
	admin   string // admin token
}

var servingRE = regexp.MustCompile(`eim: serving API on (http://\S+)`)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "eim-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// With the race detector when this test binary has it: the server's
	// race reports fail the suite below.
	srv.bin, err = racecheck.Build("go", "github.com/eimhq/eim/cmd/eim", tmp, "eim")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: build eim:", err)
		return 1
	}
	srv.dataDir = filepath.Join(tmp, "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, srv.bin, "server", "--data-dir", srv.dataDir,
		"--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0", "--log-level", "warn", "--rate-limit", "0")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "compat: start eim server:", err)
		return 1
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		close(urlc)
	}()
	select {
	case u, ok := <-urlc:
		if !ok {
			_ = cmd.Wait()
			fmt.Fprintf(os.Stderr, "compat: eim server exited before serving:\n%s", stderr.String())
			return 1
		}
		srv.url = u
	case <-time.After(60 * time.Second):
		fmt.Fprintf(os.Stderr, "compat: eim server did not serve within 60 s:\n%s", stderr.String())
		return 1
	}
	tok, err := os.ReadFile(filepath.Join(srv.dataDir, "admin.token"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat: admin token:", err)
		return 1
	}
	srv.admin = strings.TrimSpace(string(tok))

	code := m.Run()

	cancel()
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "compat: eim server: %v\n%s", err, stderr.String())
		code = 1
	}
	if racecheck.Reported(stderr.Bytes()) {
		fmt.Fprintf(os.Stderr, "compat: eim server reported a data race:\n%s", stderr.String())
		code = 1
	}
	return code
}

// project is one test's project and a client for it.
type project struct {
	name string
	id   string // the project's UUID (ActiveProjectID of the legacy paths)
	tok  string
	c    *refclient.ClientWithResponses
}

var projects atomic.Int64

// newProject creates a project (through EIM's project administration, which
// is not part of the original's API) and returns a client with a
// read-write token for it.
func newProject(t *testing.T) *project {
	t.Helper()
	name := fmt.Sprintf("compat-%d", projects.Add(1))
	body, _ := json.Marshal(map[string]string{"name": name})
	req, _ := http.NewRequest("POST", srv.url+"/v1/projects", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+srv.admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("create project %s: %d %s", name, res.StatusCode, raw)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(raw, &p); err != nil || p.ID == "" {
		t.Fatalf("create project %s: %v: %s", name, err, raw)
	}
	out, err := exec.Command(srv.bin, "token", "create", "--data-dir", srv.dataDir, "--project", name, "--role", "rw").Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	tok := lines[len(lines)-1]
	return &project{name: name, id: p.ID, tok: tok, c: newClient(t, tok)}
}

func newClient(t *testing.T, tok string) *refclient.ClientWithResponses {
	t.Helper()
	c, err := refclient.NewClientWithResponses(srv.url, refclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// response is what every generated response type has.
type response[T any] interface {
	StatusCode() int
	GetBody() []byte
	GetJSON200() *T
}

// result is a call's answer, decoded into the generated type T.
type result[T any] struct {
	r   response[T]
	err error
}

// ok wraps a call whose answer decodes into T: ok(c.XWithResponse(…)).get(t).
func ok[T any](r response[T], err error) result[T] { return result[T]{r, err} }

// get checks a call that must succeed: no transport or decoding error (a
// body the generated types cannot decode is an error here), status 200 and
// a decoded body.
func (x result[T]) get(t *testing.T) *T {
	t.Helper()
	if x.err != nil {
		t.Fatalf("call failed (transport, or a body the generated client cannot decode): %v", x.err)
	}
	if x.r.StatusCode() != 200 {
		t.Fatalf("got status %d, want 200; body %s", x.r.StatusCode(), x.r.GetBody())
	}
	v := x.r.GetJSON200()
	if v == nil {
		t.Fatalf("status 200 without a decoded body: %s", x.r.GetBody())
	}
	return v
}

// statusResponse is what every generated response type has, typed or not.
type statusResponse interface {
	StatusCode() int
	GetBody() []byte
}

// outcome is a call's answer, checked by status.
type outcome struct {
	r   statusResponse
	err error
}

// call wraps any call: call(c.XWithResponse(…)).ok(t) or .fails(t, …).
func call(r statusResponse, err error) outcome { return outcome{r, err} }

// ok checks a call answering 200 (deletes and actions answer {}).
func (o outcome) ok(t *testing.T) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("call failed: %v", o.err)
	}
	if o.r.StatusCode() != 200 {
		t.Fatalf("got status %d, want 200; body %s", o.r.StatusCode(), o.r.GetBody())
	}
}

// fails checks a call that must fail with status and the original's error
// code ({"code":"NotFound","message":…}); words must appear in the message.
func (o outcome) fails(t *testing.T, status int, code string, words ...string) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("call failed: %v", o.err)
	}
	if o.r.StatusCode() != status {
		t.Fatalf("got status %d, want %d; body %s", o.r.StatusCode(), status, o.r.GetBody())
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(o.r.GetBody(), &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, o.r.GetBody())
	}
	if e.Code != code {
		t.Errorf("got code %q, want %q (message %q)", e.Code, code, e.Message)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Errorf("message %q does not mention %q", e.Message, w)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// str dereferences as a generated client's caller does: a nil pointer
// panics, failing the test the way it crashes a client.
func str(p *string) string { return *p }

var ctx = context.Background()

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newUUID() string {
	var b [16]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
