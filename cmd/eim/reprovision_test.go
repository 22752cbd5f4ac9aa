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

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// reprovisionServer answers POST …/reprovision with attempt 2 (or refuses
// it), and the log of the new attempt.
type reprovisionServer struct {
	mu       sync.Mutex
	refuse   bool
	requests []string
}

func (s *reprovisionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	const inst = "/v1/projects/default/compute/instances/inst-0000abcd"
	s.requests = append(s.requests, r.Method+" "+strings.TrimPrefix(r.URL.Path, inst)+"?"+r.URL.RawQuery)
	switch {
	case r.Method == "POST" && r.URL.Path == inst+"/reprovision":
		if s.refuse {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"code":"FailedPrecondition","message":"the workflow of instance inst-0000abcd is WORKFLOW_STATE_RUNNING; only a WORKFLOW_STATE_FAILED workflow can be retried"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(client.ProvisioningLog{WorkflowID: "workflow-00000001", Attempt: 2, State: eim.WorkflowPending, TotalActions: 7, Next: 7,
			Entries: []eim.WorkflowLogEntry{{Seq: 7, Time: at(10), Attempt: 2, Action: -1, Message: "retry requested by alice: attempt 2, 7 actions, OS os-00000001"}}})
	case r.Method == "GET" && r.URL.Path == inst+"/provisioning_log":
		_ = json.NewEncoder(w).Encode(client.ProvisioningLog{WorkflowID: "workflow-00000001", Attempt: 2, State: eim.WorkflowSucceeded, TotalActions: 7, Next: 8,
			Entries: []eim.WorkflowLogEntry{{Seq: 8, Time: at(20), Attempt: 2, Action: -1, Message: "workflow succeeded"}}})
	default:
		http.Error(w, `{"code":"NotFound","message":"no"}`, 404)
	}
}

func runReprovision(t *testing.T, srv *reprovisionServer, args ...string) (string, string, error) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := Main(context.Background(), append([]string{"--server", hs.URL, "--token-file", tok, "instance", "reprovision", "inst-0000abcd"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestInstanceReprovision(t *testing.T) {
	srv := &reprovisionServer{}
	out, errOut, err := runReprovision(t, srv)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-22T10:00:10Z  [workflow, attempt 2] retry requested by alice: attempt 2, 7 actions, OS os-00000001\n"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "eim instance log inst-0000abcd -f") {
		t.Fatalf("stderr %q does not say how to follow", errOut)
	}
	if got := strings.Join(srv.requests, " "); got != "POST /reprovision?" {
		t.Fatalf("got requests %q", got)
	}
}

func TestInstanceReprovisionFollow(t *testing.T) {
	srv := &reprovisionServer{}
	out, _, err := runReprovision(t, srv, "-f")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "2026-11-22T10:00:20Z  [workflow, attempt 2] workflow succeeded\n") || strings.Count(out, "\n") != 2 {
		t.Fatalf("got %q", out)
	}
	if got := strings.Join(srv.requests, " "); got != "POST /reprovision? GET /provisioning_log?after=7&wait=25" {
		t.Fatalf("got requests %q", got)
	}
}

func TestInstanceReprovisionRefused(t *testing.T) {
	_, _, err := runReprovision(t, &reprovisionServer{refuse: true})
	if err == nil || !strings.Contains(err.Error(), "WORKFLOW_STATE_RUNNING") {
		t.Fatalf("got %v, want the refusal naming the state", err)
	}
	if _, _, err := runReprovision(t, &reprovisionServer{}, "a", "b"); err == nil {
		t.Fatal("two IDs: got no error")
	}
}
