package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// logServer serves canned pages of a provisioning log, one per request,
// and records the queries it got.
type logServer struct {
	mu      sync.Mutex
	pages   []client.ProvisioningLog
	queries []string
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != "/v1/projects/default/compute/instances/inst-0000abcd/provisioning_log" {
		http.Error(w, `{"code":"NotFound","message":"no"}`, 404)
		return
	}
	s.queries = append(s.queries, r.URL.RawQuery)
	p := s.pages[0]
	if len(s.pages) > 1 {
		s.pages = s.pages[1:]
	}
	_ = json.NewEncoder(w).Encode(p)
}

func at(sec int) eim.Time { return eim.NewTime(time.Date(2026, 11, 22, 10, 0, sec, 0, time.UTC)) }

func runLog(t *testing.T, srv *logServer, args ...string) (string, error) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := Main(context.Background(), append([]string{"--server", hs.URL, "--token-file", tok, "instance", "log", "inst-0000abcd"}, args...), &out, &errOut)
	return out.String(), err
}

func TestInstanceLogFollow(t *testing.T) {
	srv := &logServer{pages: []client.ProvisioningLog{
		{InstanceID: "inst-0000abcd", Next: 0, Entries: []eim.WorkflowLogEntry{}},
		{WorkflowID: "workflow-00000001", Attempt: 1, State: eim.WorkflowRunning, TotalActions: 7, Next: 4, Entries: []eim.WorkflowLogEntry{
			{Seq: 1, Time: at(0), Attempt: 1, Action: -1, Message: "workflow created"},
			{Seq: 3, Time: at(1), Attempt: 1, Action: 1, Name: "stream-image", State: eim.ActionRunning},
			{Seq: 4, Time: at(2), Attempt: 1, Action: 1, Name: "stream-image", Output: "10%"},
		}},
		{WorkflowID: "workflow-00000001", Attempt: 1, State: eim.WorkflowFailed, Message: "stream-image: sha256 mismatch", TotalActions: 7, Next: 6, Entries: []eim.WorkflowLogEntry{
			{Seq: 5, Time: at(3), Attempt: 1, Action: 1, Name: "stream-image", State: eim.ActionFailed, Message: "sha256 mismatch"},
			{Seq: 6, Time: at(3), Attempt: 1, Action: -1, Message: "workflow failed: stream-image: sha256 mismatch"},
		}},
	}}
	out, err := runLog(t, srv, "-f")
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("got error %v, want the failure", err)
	}
	want := "2026-11-22T10:00:00Z  [workflow, attempt 1] workflow created\n" +
		"… (older output dropped: the log keeps every state change but caps output)\n" +
		"2026-11-22T10:00:01Z  [2/7 stream-image] RUNNING\n" +
		"10%\n" +
		"2026-11-22T10:00:03Z  [2/7 stream-image] FAILED sha256 mismatch\n" +
		"2026-11-22T10:00:03Z  [workflow, attempt 1] workflow failed: stream-image: sha256 mismatch\n"
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	if got := strings.Join(srv.queries, " "); got != "wait=25 wait=25 after=4&wait=25" {
		t.Fatalf("got queries %q", got)
	}
}

func TestInstanceLogOnce(t *testing.T) {
	srv := &logServer{pages: []client.ProvisioningLog{
		{WorkflowID: "workflow-00000001", Attempt: 1, State: eim.WorkflowRunning, TotalActions: 7, Next: 1, Entries: []eim.WorkflowLogEntry{
			{Seq: 1, Time: at(0), Attempt: 1, Action: 0, Name: "erase-disk", State: eim.ActionRunning},
		}},
	}}
	out, err := runLog(t, srv)
	if err != nil || out != "2026-11-22T10:00:00Z  [1/7 erase-disk] RUNNING\n" {
		t.Fatalf("got %q, %v", out, err)
	}
	if len(srv.queries) != 1 || srv.queries[0] != "" {
		t.Fatalf("got queries %q, want one without wait", srv.queries)
	}
	out, err = runLog(t, srv, "-o", "json")
	var e eim.WorkflowLogEntry
	if err != nil || json.Unmarshal([]byte(out), &e) != nil || e.Seq != 1 || e.Name != "erase-disk" {
		t.Fatalf("json: got %q, %v", out, err)
	}
}
