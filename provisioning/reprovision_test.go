package provisioning_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/southbound"
)

const badSha = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

func TestReprovisionFailedWorkflow(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		osr := e.os("https://images.example/old.raw.gz", badSha)
		in := e.instance(h, osr, nil)

		// Not yet asked for: nothing to retry.
		_, err := e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if eim.ErrorCode(err) != eim.EPRECONDITION {
			t.Fatalf("before any workflow: got %v, want EPRECONDITION", err)
		}
		wf := e.getWorkflow(h.ResourceID).Workflow
		e.mustReport(h.ResourceID, wf, 0, running, "", "")
		// RUNNING: refused, naming the state.
		_, err = e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if eim.ErrorCode(err) != eim.EPRECONDITION || !strings.Contains(eim.ErrorMessage(err), "WORKFLOW_STATE_RUNNING") {
			t.Fatalf("running: got %v, want EPRECONDITION naming WORKFLOW_STATE_RUNNING", err)
		}
		e.mustReport(h.ResourceID, wf, 0, succeeded, "", "")
		e.mustReport(h.ResourceID, wf, 1, running, "", "")
		e.mustReport(h.ResourceID, wf, 1, failed, "sha256 mismatch", "")
		if got := e.getWorkflow(h.ResourceID); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED {
			t.Fatalf("got %v, want FAILED", got.Disposition)
		}

		// The image is fixed (the API cannot change an OS's image, as in
		// the original; the OS catalog does when its manifest is fixed in
		// place), then the operator retries.
		osr.ImageURL, osr.Sha256 = "https://images.example/new.raw.gz", goodSha
		if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return tx.Update(e.ctx, osr) }); err != nil {
			t.Fatalf("update OS: %v", err)
		}
		e.clock.Add(time.Minute)
		stored, err := e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if err != nil {
			t.Fatalf("Reprovision: %v", err)
		}
		if stored.Attempt != 2 || stored.State != eim.WorkflowPending || stored.Message != "" || !stored.FinishedAt.IsZero() {
			t.Fatalf("got attempt %d state %s message %q finished %v, want 2 PENDING", stored.Attempt, stored.State, stored.Message, stored.FinishedAt)
		}
		got := e.workflow(h.ResourceID)
		if got.ResourceID != wf.Id || got.Attempt != 2 {
			t.Fatalf("stored: got %s attempt %d, want %s attempt 2", got.ResourceID, got.Attempt, wf.Id)
		}
		for i, a := range got.Actions {
			if a.State != eim.ActionPending || !a.StartedAt.IsZero() || !a.FinishedAt.IsZero() || a.Message != "" || a.OutputBytes != 0 {
				t.Fatalf("action %d: got %+v, want PENDING with no times", i, a)
			}
		}
		last := got.Log[len(got.Log)-1]
		if last.Attempt != 2 || !strings.Contains(last.Message, "retry requested by alice") {
			t.Fatalf("last log entry: got %+v, want the retry by alice", last)
		}
		inst := e.getInstance(in.ResourceID)
		if inst.ProvisioningStatus != "Provisioning In Progress: 1/7 erase-disk" || inst.ProvisioningStatusIndicator != eim.StatusInProgress {
			t.Fatalf("got status %q %s", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
		}

		// The node's next poll runs attempt 2 from the start, with the new image.
		resp := e.getWorkflow(h.ResourceID)
		if resp.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN || resp.Workflow.Attempt != 2 || resp.Workflow.ResumeFrom != 0 {
			t.Fatalf("got %v attempt %d resume %d, want RUN 2 0", resp.Disposition, resp.Workflow.GetAttempt(), resp.Workflow.GetResumeFrom())
		}
		if s := resp.Workflow.Actions[1].GetStreamImage(); s.Url != "https://images.example/new.raw.gz" || s.Sha256 != goodSha {
			t.Fatalf("got stream-image %v, want the fixed image", s)
		}
		// Attempt 1's reports are stale now.
		r, err := e.report(h.ResourceID, &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: 1, Index: 0, State: running})
		if err != nil || !r.Cancel {
			t.Fatalf("stale report: got %v, %v, want cancel", r, err)
		}
		for i := range resp.Workflow.Actions {
			e.mustReport(h.ResourceID, resp.Workflow, i, running, "", "")
			e.mustReport(h.ResourceID, resp.Workflow, i, succeeded, "", "")
		}
		if got := e.getWorkflow(h.ResourceID); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_DONE {
			t.Fatalf("got %v, want DONE", got.Disposition)
		}
		// SUCCEEDED: refused.
		_, err = e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if eim.ErrorCode(err) != eim.EPRECONDITION || !strings.Contains(eim.ErrorMessage(err), "WORKFLOW_STATE_SUCCEEDED") {
			t.Fatalf("succeeded: got %v, want EPRECONDITION naming WORKFLOW_STATE_SUCCEEDED", err)
		}
	})
}

func TestReprovisionRefusals(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		// An OS profile that still cannot be installed: refused, the
		// workflow stays FAILED at its attempt.
		h := e.host()
		osr := e.os("", goodSha)
		in := e.instance(h, osr, nil)
		if got := e.getWorkflow(h.ResourceID); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED {
			t.Fatalf("got %v, want FAILED", got.Disposition)
		}
		_, err := e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if eim.ErrorCode(err) != eim.EPRECONDITION || !strings.Contains(eim.ErrorMessage(err), "cannot be provisioned") {
			t.Fatalf("bad OS: got %v, want EPRECONDITION", err)
		}
		if wf := e.workflow(h.ResourceID); wf.Attempt != 1 || wf.State != eim.WorkflowFailed {
			t.Fatalf("got attempt %d %s, want 1 FAILED", wf.Attempt, wf.State)
		}
		// Unknown instance, and one of another project.
		if _, err := e.svc.Reprovision(e.ctx, e.proj, "inst-0000dead", "alice"); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("unknown instance: got %v, want ENOTFOUND", err)
		}
		other := "other-" + e.proj
		if _, err := e.inv.CreateProject(e.ctx, other, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Reprovision(e.ctx, other, in.ResourceID, "alice"); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("other project: got %v, want ENOTFOUND", err)
		}
		// An instance being deleted is not provisioned again.
		if err := e.inv.InvalidateInstance(e.ctx, e.proj, in.ResourceID); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Reprovision(e.ctx, e.proj, in.ResourceID, "alice")
		if eim.ErrorCode(err) != eim.EPRECONDITION {
			t.Fatalf("untrusted instance: got %v, want EPRECONDITION", err)
		}
	})
}

// reportOff reports output at an offset.
func (e *env) reportOff(hostID string, wf *provisioningv1.Workflow, i int, state provisioningv1.ActionState, out string, off uint64) {
	e.t.Helper()
	resp, err := e.report(hostID, &provisioningv1.ReportActionRequest{
		WorkflowId: wf.Id, Attempt: wf.Attempt, Index: uint32(i), State: state, Output: []byte(out), OutputOffset: off,
	})
	if err != nil || resp.Cancel {
		e.t.Fatalf("report %d %s at %d: got %v, %v", i, state, off, resp, err)
	}
}

// outputOf joins the recorded output of action i.
func outputOf(wf *eim.Workflow, i int) string {
	var b strings.Builder
	for _, le := range wf.Log {
		if le.Action == i {
			b.WriteString(le.Output)
		}
	}
	return b.String()
}

func TestReportOutputOffsets(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		e.reportOff(h.ResourceID, wf, 0, running, "", 0)
		e.reportOff(h.ResourceID, wf, 0, running, "one\n", 0)
		e.reportOff(h.ResourceID, wf, 0, running, "two\n", 4)
		// The answer was lost: the agent sends the chunk again, with what
		// was printed since. Only the new part is recorded.
		e.reportOff(h.ResourceID, wf, 0, running, "two\nthree\n", 4)
		e.reportOff(h.ResourceID, wf, 0, running, "two\nthree\n", 4) // recorded already
		before := len(e.workflow(h.ResourceID).Log)
		e.reportOff(h.ResourceID, wf, 0, running, "three\n", 8) // nothing new: no write
		if n := len(e.workflow(h.ResourceID).Log); n != before {
			t.Fatalf("a fully recorded chunk added %d log entries", n-before)
		}
		e.reportOff(h.ResourceID, wf, 0, succeeded, "three\nfour\n", 8)
		got := e.workflow(h.ResourceID)
		if out, want := outputOf(got, 0), "one\ntwo\nthree\nfour\n"; out != want {
			t.Fatalf("got output %q, want %q", out, want)
		}
		if got.Actions[0].OutputBytes != 19 {
			t.Fatalf("got OutputBytes %d, want 19", got.Actions[0].OutputBytes)
		}
		if got.Actions[0].State != eim.ActionSucceeded {
			t.Fatalf("got %s, want SUCCEEDED", got.Actions[0].State)
		}
	})
}

// reportAs reports as the node under credential generation gen.
func (e *env) reportAs(hostID string, gen int64, m *provisioningv1.ReportActionRequest) {
	e.t.Helper()
	ctx := southbound.WithNode(context.Background(), southbound.Node{HostID: hostID, Project: e.proj, Gen: gen})
	resp, err := e.svc.ReportAction(ctx, connect.NewRequest(m))
	if err != nil || resp.Msg.Cancel {
		e.t.Fatalf("report %+v: got %v, %v", m, resp, err)
	}
}

func TestActionRestartedAfterReboot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		rep := func(gen int64, i int, st provisioningv1.ActionState, out string, off uint64) {
			e.reportAs(h.ResourceID, gen, &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: 1, Index: uint32(i), State: st, Output: []byte(out), OutputOffset: off})
		}
		rep(1, 0, running, "", 0)
		rep(1, 0, succeeded, "", 0)
		rep(1, 1, running, "", 0)
		rep(1, 1, running, "10%\n", 0)
		// A repeated RUNNING of the same run changes nothing.
		e.clock.Add(100 * time.Second)
		rep(1, 1, running, "", 0)
		if a := e.workflow(h.ResourceID).Actions[1]; a.StartedAt.Time != e.clock.Now().Add(-100*time.Second) {
			t.Fatalf("repeated RUNNING moved the start to %v", a.StartedAt)
		}
		// 9000 s later the node reboots, discovers again (generation 2)
		// and runs the action again: its timeout starts over.
		e.clock.Add(9000 * time.Second)
		rep(2, 1, running, "", 0)
		restartedAt := e.clock.Now()
		got := e.workflow(h.ResourceID)
		a := got.Actions[1]
		if a.StartedAt.Time != restartedAt || a.StartGen != 2 || a.OutputBytes != 0 || a.State != eim.ActionRunning {
			t.Fatalf("got %+v, want RUNNING since the restart, gen 2, no output", a)
		}
		last := got.Log[len(got.Log)-1]
		if !strings.Contains(last.Message, "restarted") || last.Action != 1 {
			t.Fatalf("last log entry: got %+v, want the restart", last)
		}
		// The new run's output starts at offset 0 again and is recorded.
		rep(2, 1, running, "5%\n", 0)
		rep(2, 1, running, "5%\n6%\n", 0) // offset 0 with output recorded: recorded whole, as before
		rep(2, 1, running, "6%\n7%\n", 3)
		if out := outputOf(e.workflow(h.ResourceID), 1); out != "10%\n5%\n5%\n6%\n7%\n" {
			t.Fatalf("got output %q", out)
		}
		// 9000 s after the restart (18100 s after the first start) it has not timed out.
		e.clock.Add(9000 * time.Second)
		if err := e.svc.CheckTimeouts(e.ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.workflow(h.ResourceID).State; st != eim.WorkflowRunning {
			t.Fatalf("9000 s after the restart: got %s, want RUNNING", st)
		}
		e.clock.Add(801 * time.Second)
		if err := e.svc.CheckTimeouts(e.ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.workflow(h.ResourceID).State; st != eim.WorkflowFailed {
			t.Fatalf("9801 s after the restart: got %s, want FAILED", st)
		}
	})
}
