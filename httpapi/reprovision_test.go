package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// lateReprovisioner is set once the env's store exists.
type lateReprovisioner struct{ svc *provisioning.Service }

func (l *lateReprovisioner) Reprovision(ctx context.Context, project, id, subject string) (*eim.Workflow, error) {
	return l.svc.Reprovision(ctx, project, id, subject)
}

func TestReprovision(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testReprovision(t, "") })
	t.Run("postgres", func(t *testing.T) { testReprovision(t, storetest.PostgresURL(t)) })
}

func testReprovision(t *testing.T, dsn string) {
	late := &lateReprovisioner{}
	e, inst, write := provEnvOpts(t, dsn, httpapi.Options{Reprovisioner: late})
	late.svc = provisioning.New(provisioning.Options{Store: e.inv.Store(), AgentURL: "https://eim.example:8443"})
	path := "~/compute/instances/" + inst + "/reprovision"

	// No workflow yet, then a RUNNING one: refused, naming the state.
	wantError(t, e.do(t, "POST", path, tokRW, nil), 400, "FailedPrecondition", "no provisioning workflow")
	write(func(wf *eim.Workflow) {})
	wantError(t, e.do(t, "POST", path, tokRW, nil), 400, "FailedPrecondition", "WORKFLOW_STATE_RUNNING")
	// Read-only and other projects' users may not.
	wantError(t, e.do(t, "POST", path, tokRO, nil), 403, "PermissionDenied")
	wantError(t, e.do(t, "POST", path, tokRW2, nil), 403, "PermissionDenied")
	wantError(t, e.do(t, "POST", "~/compute/instances/inst-00000000/reprovision", tokRW, nil), 404, "NotFound")

	write(func(wf *eim.Workflow) {
		wf.State, wf.Message = eim.WorkflowFailed, "stream-image: sha256 mismatch"
		wf.Actions[1].State = eim.ActionFailed
		wf.Log = []eim.WorkflowLogEntry{entry(1, eim.ActionFailed, "")}
	})
	r := e.must(t, 200, "POST", path, tokRW, nil)
	es := r.items("entries")
	if r.num("attempt") != 2 || r.str("state") != string(eim.WorkflowPending) || r.num("totalActions") != 7 || len(es) != 1 || r.num("next") != 2 {
		t.Fatalf("got %s, want attempt 2 PENDING with the retry entry", r.raw)
	}
	if msg := es[0].(map[string]any)["message"].(string); !strings.Contains(msg, "retry requested by rw") {
		t.Fatalf("got entry %v, want the retry by rw", es[0])
	}
	in := e.must(t, 200, "GET", "~/compute/instances/"+inst, tokRO, nil)
	if in.str("provisioningStatus") != "Provisioning In Progress: 1/7 erase-disk" || in.str("provisioningStatusIndicator") != string(eim.StatusInProgress) {
		t.Fatalf("got instance %s", in.raw)
	}
	// The log follows on from the retry.
	l := e.must(t, 200, "GET", "~/compute/instances/"+inst+"/provisioning_log?after=1", tokRO, nil)
	if l.num("attempt") != 2 || len(l.items("entries")) != 1 {
		t.Fatalf("log: got %s", l.raw)
	}
	// PENDING now: a second retry is refused; an admin is allowed to ask.
	wantError(t, e.do(t, "POST", path, tokAdmin, nil), 400, "FailedPrecondition", "WORKFLOW_STATE_PENDING")
}

func TestReprovisionWithoutProvisioning(t *testing.T) {
	e, inst, _ := provEnv(t, "")
	wantError(t, e.do(t, "POST", "~/compute/instances/"+inst+"/reprovision", tokRW, nil), 503, "Unavailable")
}

// A long poll is not cut short by the request timeout of other requests.
func TestProvisioningLogWaitOutlastsRequestTimeout(t *testing.T) {
	e, inst, write := provEnvOpts(t, "", httpapi.Options{RequestTimeout: time.Second})
	write(func(wf *eim.Workflow) { wf.Log = []eim.WorkflowLogEntry{entry(1, eim.ActionRunning, "")} })
	start := time.Now()
	r := e.do(t, "GET", "~/compute/instances/"+inst+"/provisioning_log?after=1&wait=2", tokRO, nil)
	took := time.Since(start)
	if r.status != 200 || len(r.items("entries")) != 0 || r.num("next") != 1 {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if took < 2*time.Second {
		t.Fatalf("answered after %v, want the full 2 s wait (the request timeout is 1 s)", took)
	}
}
