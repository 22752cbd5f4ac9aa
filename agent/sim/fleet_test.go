package sim_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/eimhq/eim/agent/sim"
)

func TestRunBadCA(t *testing.T) {
	_, err := sim.Run(context.Background(), sim.Options{URL: "https://127.0.0.1:1", CA: "not a CA", Identities: sim.Generate(1, 1)})
	if err == nil {
		t.Fatal("got no error for a CA that is neither PEM nor a fingerprint")
	}
}

// A server that never answers usefully leaves every node stuck when the
// run's context ends; the report says in which phase.
func TestRunDeadline(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rep, err := sim.Run(ctx, sim.Options{URL: srv.URL, CA: ca, Identities: sim.Generate(5, 1), Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Nodes != 5 || rep.Final[sim.OutcomeStuck] != 5 || rep.Unexpected != 5 || rep.Final[sim.OutcomeRunning] != 0 {
		t.Fatalf("report: got %+v, want 5 stuck nodes", rep)
	}
	if len(rep.Errors) == 0 {
		t.Errorf("report lists no errors")
	}
	for msg := range rep.Errors {
		t.Logf("%s", msg)
	}
}
