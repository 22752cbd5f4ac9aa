package provisioning_test

import (
	"context"
	"testing"
	"time"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"go.uber.org/goleak"
)

func TestRunningActionTimesOut(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		e.mustReport(h.ResourceID, wf, 0, running, "", "")
		e.mustReport(h.ResourceID, wf, 0, succeeded, "", "")
		e.mustReport(h.ResourceID, wf, 1, running, "", "")
		// Output keeps coming, but the action's timeout runs from its start.
		for range 10 {
			e.clock.Add(900 * time.Second)
			e.mustReport(h.ResourceID, wf, 1, running, "", "progress\n")
			if err := e.svc.CheckTimeouts(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := e.workflow(h.ResourceID).State; got != eim.WorkflowRunning {
			t.Fatalf("after 9000 s: got %s, want RUNNING", got)
		}
		e.clock.Add(801 * time.Second)
		if err := e.svc.CheckTimeouts(e.ctx); err != nil {
			t.Fatal(err)
		}
		inst := e.getInstance(in.ResourceID)
		if inst.ProvisioningStatus != "Provisioning Failed: 2/7 stream-image: timed out after 9800s" || inst.ProvisioningStatusIndicator != eim.StatusError {
			t.Fatalf("got status %q %s", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
		}
		stored := e.workflow(h.ResourceID)
		if stored.State != eim.WorkflowFailed || stored.Actions[1].State != eim.ActionFailed {
			t.Fatalf("got workflow %s action %s", stored.State, stored.Actions[1].State)
		}
		resp, err := e.report(h.ResourceID, &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: 1, Index: 1, State: running})
		if err != nil || !resp.Cancel {
			t.Fatalf("report after timeout: got %v, %v, want cancel", resp, err)
		}
	})
}

func TestSilentNodeTimesOut(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		e.mustReport(h.ResourceID, wf, 0, running, "", "")
		e.mustReport(h.ResourceID, wf, 0, succeeded, "", "")
		e.mustReport(h.ResourceID, wf, 1, running, "", "")
		e.mustReport(h.ResourceID, wf, 1, succeeded, "", "")
		// Action 2 never starts: its 560 s run from the last report.
		e.clock.Add(559 * time.Second)
		if err := e.svc.CheckTimeouts(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.workflow(h.ResourceID).State; got != eim.WorkflowRunning {
			t.Fatalf("after 559 s: got %s", got)
		}
		e.clock.Add(2 * time.Second)
		if err := e.svc.CheckTimeouts(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.getInstance(in.ResourceID).ProvisioningStatus; got != "Provisioning Failed: 3/7 write-meta-data: timed out after 560s" {
			t.Fatalf("got status %q", got)
		}
	})
}

func TestRunScansUntilCancelled(t *testing.T) {
	e := newEnv(t, t.TempDir()+"/eim.db", nil)
	// The store's and batcher's goroutines end in cleanups, after this.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := e.host()
	in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
	e.getWorkflow(h.ResourceID) // created, never reported
	e.clock.Add(561 * time.Second)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for e.getInstance(in.ResourceID).ProvisioningStatusIndicator != eim.StatusError {
		if time.Now().After(deadline) {
			t.Fatalf("workflow not failed by Run; status %q", e.getInstance(in.ResourceID).ProvisioningStatus)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
