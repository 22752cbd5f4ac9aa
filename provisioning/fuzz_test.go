package provisioning_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// FuzzReportActions sends arbitrary sequences of action reports (in order,
// of the right or a stale attempt, any state, index, output and offset),
// batched or one by one, and checks that the server only ever refuses with
// InvalidArgument and that what it stores stays consistent: the actions
// before the resume point succeeded, at most one failed and then the
// workflow did, the instance's status says what the workflow's state is.
func FuzzReportActions(f *testing.F) {
	f.Add([]byte{0, 2, 0, 3, 1, 2, 0, 0, 2, 2, 0, 0}, true)
	f.Add([]byte{0, 1, 0, 5, 0, 1, 6, 2, 0, 2, 0, 0, 1, 3, 0, 4}, false)
	f.Add([]byte{3, 2, 1, 0, 0, 2, 0, 0}, true)
	f.Fuzz(func(t *testing.T, data []byte, batched bool) {
		e := newEnv(t, ":memory:", nil)
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		var reports []*provisioningv1.ReportActionRequest
		for len(data) >= 4 && len(reports) < 40 {
			b := data[:4]
			data = data[4:]
			attempt := wf.Attempt
			if b[2]&1 == 1 {
				attempt++ // a stale or future attempt
			}
			reports = append(reports, &provisioningv1.ReportActionRequest{
				WorkflowId: wf.Id, Attempt: attempt,
				Index:        uint32(b[0] % 9), // two past the end
				State:        provisioningv1.ActionState(b[1] % 5),
				Output:       []byte(strings.Repeat("x", int(b[3]%8))),
				OutputOffset: uint64(b[2] >> 1 % 16),
			})
		}
		check := func(err error) {
			t.Helper()
			if err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("got %v, want success or InvalidArgument", err)
			}
		}
		if batched {
			for len(reports) > 0 {
				n := min(len(reports), 32)
				_, err := e.reportAll(h.ResourceID, reports[:n]...)
				check(err)
				reports = reports[n:]
			}
		} else {
			for _, m := range reports {
				_, err := e.report(h.ResourceID, m)
				check(err)
			}
		}

		stored := e.workflow(h.ResourceID)
		inst := e.getInstance(in.ResourceID)
		next, failed := len(stored.Actions), -1
		for i, a := range stored.Actions {
			if a.State != eim.ActionSucceeded && next == len(stored.Actions) {
				next = i
			}
			if a.State == eim.ActionFailed {
				if failed >= 0 {
					t.Fatalf("actions %d and %d both FAILED", failed, i)
				}
				failed = i
			}
			if i > next && a.State != eim.ActionPending {
				t.Fatalf("action %d is %s after action %d that has not succeeded", i, a.State, next)
			}
		}
		switch stored.State {
		case eim.WorkflowSucceeded:
			if next != len(stored.Actions) || inst.ProvisioningStatus != "Provisioned" {
				t.Fatalf("SUCCEEDED with action %d not done, instance %q", next, inst.ProvisioningStatus)
			}
		case eim.WorkflowFailed:
			if failed != next || !strings.HasPrefix(inst.ProvisioningStatus, "Provisioning Failed: ") || inst.ProvisioningStatusIndicator != eim.StatusError {
				t.Fatalf("FAILED with failed action %d, next %d, instance %q %s", failed, next, inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
			}
		default:
			if failed >= 0 {
				t.Fatalf("action %d FAILED but the workflow is %s", failed, stored.State)
			}
			if next < len(stored.Actions) && stored.State == eim.WorkflowRunning && !strings.HasPrefix(inst.ProvisioningStatus, "Provisioning In Progress: ") {
				t.Fatalf("RUNNING workflow, instance %q", inst.ProvisioningStatus)
			}
		}
		for i := 1; i < len(stored.Log); i++ {
			if stored.Log[i].Seq <= stored.Log[i-1].Seq {
				t.Fatalf("log entries %d and %d out of order: seq %d, %d", i-1, i, stored.Log[i-1].Seq, stored.Log[i].Seq)
			}
		}
	})
}
