package upload_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim/agent/upload"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// store is an HTTP object store on 127.0.0.1 that takes a PUT or DELETE
// only with the header its granter put in the grant, and records what it
// holds.
type store struct {
	srv *httptest.Server

	mu      sync.Mutex
	objects map[string][]byte
	log     []string       // "PUT key", "DELETE key"
	fail    map[string]int // key → status to answer once
}

func newStore(t *testing.T) *store {
	s := &store{objects: map[string][]byte{}, fail: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *store) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/bucket/")
	if r.Header.Get("X-Grant") != grantToken(r.Method, key) {
		http.Error(w, "bad grant", http.StatusForbidden)
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.fail[key]; code != 0 {
		delete(s.fail, key)
		http.Error(w, "scripted failure", code)
		return
	}
	s.log = append(s.log, r.Method+" "+key)
	switch r.Method {
	case http.MethodPut:
		if sum := sha256.Sum256(b); r.Header.Get("X-Content-Sha256") != hex.EncodeToString(sum[:]) {
			http.Error(w, "content does not match its digest", http.StatusBadRequest)
			return
		}
		if int64(len(b)) != r.ContentLength {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		s.objects[key] = b
	case http.MethodDelete:
		if _, ok := s.objects[key]; !ok {
			http.NotFound(w, r)
			return
		}
		delete(s.objects, key)
	}
}

// requests returns the requests since the last call, sorted.
func (s *store) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log
	s.log = nil
	slices.Sort(l)
	return l
}

func (s *store) object(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	return string(b), ok
}

func grantToken(method, key string) string { return "grant:" + method + ":" + key }

// granter grants every change under host-1/<workload>/<target>/, except
// the paths it refuses; it records the changes asked for and the reports.
type granter struct {
	url    string
	now    func() time.Time
	refuse map[string]string
	// expired is how many Grant calls answer grants that have expired.
	expired int

	mu      sync.Mutex
	asked   [][]upload.Change
	reports []string
}

func (g *granter) Grant(_ context.Context, workload, target string, changes []upload.Change) ([]upload.Grant, time.Time, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, changes)
	expires := g.now().Add(time.Hour)
	if g.expired > 0 {
		g.expired--
		expires = g.now().Add(-time.Second)
	}
	var out []upload.Grant
	for _, c := range changes {
		if why := g.refuse[c.Path]; why != "" {
			out = append(out, upload.Grant{Path: c.Path, Refused: why})
			continue
		}
		key := "host-1/" + workload + "/" + target + "/" + c.Path
		m := http.MethodPut
		h := [][2]string{{"X-Content-Sha256", c.SHA256}}
		if !c.Present {
			m, h = http.MethodDelete, nil
		}
		h = append(h, [2]string{"X-Grant", grantToken(m, key)})
		out = append(out, upload.Grant{Path: c.Path, Method: m, URL: g.url + "/bucket/" + key, Headers: h})
	}
	return out, expires, nil
}

func (g *granter) Report(_ context.Context, workload, target string, done []string, failed []upload.Failure) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := fmt.Sprintf("%s/%s done=%v", workload, target, done)
	for _, f := range failed {
		r += fmt.Sprintf(" failed=%s:%s", f.Path, f.Reason)
	}
	g.reports = append(g.reports, r)
	return nil
}

// changes returns the changes asked for since the last call, as
// "+path" (upload) and "-path" (delete).
func (g *granter) changes() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, batch := range g.asked {
		for _, c := range batch {
			if c.Present {
				out = append(out, "+"+c.Path)
			} else {
				out = append(out, "-"+c.Path)
			}
		}
	}
	g.asked = nil
	return out
}

func (g *granter) lastReport() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.reports) == 0 {
		return ""
	}
	return g.reports[len(g.reports)-1]
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sync1(t *testing.T, s *upload.Syncer, p upload.Path) upload.Result {
	t.Helper()
	res, err := s.Sync(t.Context(), p)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func TestSync(t *testing.T) {
	st := newStore(t)
	g := &granter{url: st.srv.URL, now: time.Now}
	dir := t.TempDir()
	src, stateDir := filepath.Join(dir, "export"), filepath.Join(dir, "state")
	p := upload.Path{Workload: "cam", Source: src, Target: "frames"}
	s := &upload.Syncer{Granter: g, StateDir: stateDir}

	// No directory yet: nothing to do, no error.
	if res := sync1(t, s, p); len(res.Sent)+len(res.Failed) != 0 {
		t.Fatalf("pass without a directory: got %+v, want nothing", res)
	}

	write(t, filepath.Join(src, "a.txt"), "alpha")
	write(t, filepath.Join(src, "sub", "b.bin"), "beta")
	write(t, filepath.Join(src, "empty"), "")
	secret := filepath.Join(dir, "secret")
	write(t, secret, "host secret")
	if err := os.Symlink(secret, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	res := sync1(t, s, p)
	equal(t, "first pass sent", sortedCopy(res.Sent), []string{"a.txt", "empty", "sub/b.bin"})
	equal(t, "first pass requests", st.requests(), []string{"PUT host-1/cam/frames/a.txt", "PUT host-1/cam/frames/empty", "PUT host-1/cam/frames/sub/b.bin"})
	if got, _ := st.object("host-1/cam/frames/sub/b.bin"); got != "beta" {
		t.Errorf("stored sub/b.bin: got %q, want %q", got, "beta")
	}
	if _, ok := st.object("host-1/cam/frames/link"); ok {
		t.Errorf("a symbolic link was followed and sent")
	}
	if got := g.lastReport(); got != "cam/frames done=[a.txt empty sub/b.bin]" {
		t.Errorf("report: got %q", got)
	}
	g.changes()

	// Nothing changed: the server is not even asked.
	sync1(t, s, p)
	equal(t, "unchanged pass asked", g.changes(), nil)

	// Touched without change: not sent.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(src, "a.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	sync1(t, s, p)
	equal(t, "touched pass asked", g.changes(), nil)

	// Changed, deleted.
	write(t, filepath.Join(src, "sub", "b.bin"), "beta, second")
	if err := os.Remove(filepath.Join(src, "a.txt")); err != nil {
		t.Fatal(err)
	}
	res = sync1(t, s, p)
	equal(t, "changed pass asked", g.changes(), []string{"+sub/b.bin", "-a.txt"})
	equal(t, "changed pass requests", st.requests(), []string{"DELETE host-1/cam/frames/a.txt", "PUT host-1/cam/frames/sub/b.bin"})
	if got, _ := st.object("host-1/cam/frames/sub/b.bin"); got != "beta, second" {
		t.Errorf("stored sub/b.bin: got %q, want %q", got, "beta, second")
	}
	if _, ok := st.object("host-1/cam/frames/a.txt"); ok {
		t.Errorf("a.txt still stored after its deletion")
	}

	// A restarted agent (a new Syncer on the same state) sends nothing
	// again.
	s2 := &upload.Syncer{Granter: g, StateDir: stateDir}
	sync1(t, s2, p)
	equal(t, "pass after a restart asked", g.changes(), nil)
	equal(t, "pass after a restart requests", st.requests(), nil)
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestFailuresRetried(t *testing.T) {
	st := newStore(t)
	g := &granter{url: st.srv.URL, now: time.Now, refuse: map[string]string{"big.bin": "larger than 5 GiB"}}
	src := t.TempDir()
	p := upload.Path{Workload: "cam", Source: src, Target: "t"}
	s := &upload.Syncer{Granter: g, StateDir: t.TempDir()}
	write(t, filepath.Join(src, "a.txt"), "alpha")
	write(t, filepath.Join(src, "big.bin"), "pretend big")
	st.fail["host-1/cam/t/a.txt"] = http.StatusServiceUnavailable

	res := sync1(t, s, p)
	if len(res.Sent) != 0 || len(res.Failed) != 2 {
		t.Fatalf("first pass: got %+v, want two failures", res)
	}
	if r := g.lastReport(); !strings.Contains(r, "failed=a.txt:PUT: 503") || !strings.Contains(r, "failed=big.bin:refused: larger than 5 GiB") {
		t.Errorf("report: got %q, want a.txt's 503 and big.bin's refusal", r)
	}
	g.changes()

	// The failed upload is tried again; the refused file is not asked
	// for again while unchanged.
	res = sync1(t, s, p)
	equal(t, "second pass sent", res.Sent, []string{"a.txt"})
	equal(t, "second pass asked", g.changes(), []string{"+a.txt"})

	// Changed, the refused file is asked for again; deleted while
	// refused, it is never asked to be deleted.
	write(t, filepath.Join(src, "big.bin"), "pretend bigger")
	sync1(t, s, p)
	equal(t, "changed refused file asked", g.changes(), []string{"+big.bin"})
	if err := os.Remove(filepath.Join(src, "big.bin")); err != nil {
		t.Fatal(err)
	}
	sync1(t, s, p)
	equal(t, "deleted refused file asked", g.changes(), nil)
}

func TestExpiredGrantsAskedAgain(t *testing.T) {
	st := newStore(t)
	g := &granter{url: st.srv.URL, now: time.Now, expired: 1}
	src := t.TempDir()
	write(t, filepath.Join(src, "a.txt"), "alpha")
	s := &upload.Syncer{Granter: g}
	res := sync1(t, s, upload.Path{Workload: "w", Source: src, Target: "t"})
	equal(t, "sent", res.Sent, []string{"a.txt"})
	if got := len(g.changes()); got != 2 {
		t.Errorf("changes asked: got %d, want 2 (the expired grant asked for again)", got)
	}

	// Grants that are always expired end the pass with an error.
	g.expired = 100
	write(t, filepath.Join(src, "a.txt"), "alpha 2")
	if _, err := s.Sync(t.Context(), upload.Path{Workload: "w", Source: src, Target: "t"}); err == nil || !strings.Contains(err.Error(), "expire") {
		t.Errorf("Sync with expired grants: got %v, want an error about expiry", err)
	}
}

func TestBandwidth(t *testing.T) {
	st := newStore(t)
	g := &granter{url: st.srv.URL, now: time.Now}
	src := t.TempDir()
	content := strings.Repeat("x", 96<<10)
	write(t, filepath.Join(src, "a.bin"), content)
	const rate = 32 << 10 // 32 KiB/s: 96 KiB take at least 2 s after the 32 KiB burst
	start := time.Now()
	sync1(t, &upload.Syncer{Granter: g}, upload.Path{Workload: "w", Source: src, Target: "t", BytesPerSecond: rate})
	if took := time.Since(start); took < 2*time.Second-100*time.Millisecond {
		t.Errorf("96 KiB at 32 KiB/s took %v, want at least 2 s", took)
	}
	if got, _ := st.object("host-1/w/t/a.bin"); got != content {
		t.Errorf("stored a.bin: got %d bytes, want %d", len(got), len(content))
	}
}

func TestSyncInvalid(t *testing.T) {
	s := &upload.Syncer{Granter: &granter{now: time.Now}}
	for _, p := range []upload.Path{
		{Source: "/x", Target: "t"},
		{Workload: "w", Source: "/x"},
		{Workload: "w", Source: "relative", Target: "t"},
	} {
		if _, err := s.Sync(t.Context(), p); err == nil {
			t.Errorf("Sync(%+v): got nil, want an error", p)
		}
	}
}
