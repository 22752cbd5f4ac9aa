package provisioning_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

const wantActions = "erase-disk stream-image write-meta-data write-user-data write-agent-config set-boot-order reboot"

func actionNames(wf *provisioningv1.Workflow) string {
	var names []string
	for _, a := range wf.Actions {
		names = append(names, a.Name)
	}
	return strings.Join(names, " ")
}

func TestGetWorkflowWaitsWithoutInstance(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		got := e.getWorkflow(h.ResourceID)
		if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT || got.PollAfterSeconds != 10 {
			t.Fatalf("got %v poll %d, want WAIT poll 10", got.Disposition, got.PollAfterSeconds)
		}
	})
}

func TestGetWorkflowCreatesOnceAndResumes(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/ubuntu.raw.gz", goodSha), nil)
		got := e.getWorkflow(h.ResourceID)
		if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN {
			t.Fatalf("got %v (%s), want RUN", got.Disposition, got.Message)
		}
		wf := got.Workflow
		if wf.Attempt != 1 || wf.ResumeFrom != 0 {
			t.Fatalf("got attempt %d resume %d, want 1, 0", wf.Attempt, wf.ResumeFrom)
		}
		if n := actionNames(wf); n != wantActions {
			t.Fatalf("got actions %q, want %q", n, wantActions)
		}
		stream := wf.Actions[1].GetStreamImage()
		if stream == nil || stream.Url != "https://images.example/ubuntu.raw.gz" || stream.Sha256 != goodSha {
			t.Fatalf("got stream-image %v", wf.Actions[1])
		}
		if wf.Actions[0].TimeoutSeconds != 560 || wf.Actions[1].TimeoutSeconds != 9800 || wf.Actions[6].TimeoutSeconds != 560 {
			t.Fatalf("got timeouts %d %d %d, want 560 9800 560", wf.Actions[0].TimeoutSeconds, wf.Actions[1].TimeoutSeconds, wf.Actions[6].TimeoutSeconds)
		}
		inst := e.getInstance(in.ResourceID)
		if inst.ProvisioningStatus != "Provisioning In Progress: 1/7 erase-disk" || inst.ProvisioningStatusIndicator != eim.StatusInProgress {
			t.Fatalf("got status %q %s", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
		}
		if inst.ProvisioningStatusTimestamp != uint64(e.clock.Now().Unix()) {
			t.Fatalf("got timestamp %d, want %d", inst.ProvisioningStatusTimestamp, e.clock.Now().Unix())
		}

		// Asking again (a reboot, a lost answer) gives the same workflow.
		again := e.getWorkflow(h.ResourceID).Workflow
		if again.Id != wf.Id || again.Attempt != 1 {
			t.Fatalf("got workflow %s attempt %d, want %s attempt 1", again.Id, again.Attempt, wf.Id)
		}
		e.mustReport(h.ResourceID, wf, 0, running, "", "")
		e.mustReport(h.ResourceID, wf, 0, succeeded, "", "")
		e.mustReport(h.ResourceID, wf, 1, running, "", "")
		resumed := e.getWorkflow(h.ResourceID).Workflow
		if resumed.Id != wf.Id || resumed.ResumeFrom != 1 {
			t.Fatalf("got workflow %s resume %d, want %s resume 1", resumed.Id, resumed.ResumeFrom, wf.Id)
		}
	})
}

func TestGetWorkflowConcurrentCallsCreateOne(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		var wg sync.WaitGroup
		ids := make([]string, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Go(func() {
				resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{}))
				if err != nil {
					errs[i] = err
					return
				}
				ids[i] = resp.Msg.Workflow.GetId()
			})
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			if ids[i] == "" || ids[i] != ids[0] {
				t.Fatalf("call %d got workflow %q, want %q", i, ids[i], ids[0])
			}
		}
		e.workflow(h.ResourceID) // exactly one stored
	})
}

func TestGetWorkflowWaitsForParkedInstance(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		if err := e.inv.InvalidateInstance(e.ctx, e.proj, in.ResourceID); err != nil {
			t.Fatal(err)
		}
		if got := e.getWorkflow(h.ResourceID); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT {
			t.Fatalf("got %v, want WAIT", got.Disposition)
		}
	})
}

func TestBadOSFailsWorkflow(t *testing.T) {
	for _, c := range []struct{ name, url, sha, want string }{
		{"no url", "", goodSha, "has no imageUrl"},
		{"bad url", "ftp://x/y", goodSha, "is not an http(s) URL"},
		{"bad sha", "https://x/y.raw", "abc", "is not 64 hex digits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run(t, func(t *testing.T, e *env) {
				h := e.host()
				// The API refuses a malformed sha256; write the OS directly
				// as an older or imported profile could be.
				os := &eim.OS{Meta: eim.Meta{Project: e.proj}, Name: "bad", ImageURL: c.url, Sha256: c.sha}
				if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return tx.Create(e.ctx, os) }); err != nil {
					t.Fatal(err)
				}
				in := e.instance(h, os, nil)
				got := e.getWorkflow(h.ResourceID)
				if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED || !strings.Contains(got.Message, c.want) {
					t.Fatalf("got %v %q, want FAILED containing %q", got.Disposition, got.Message, c.want)
				}
				inst := e.getInstance(in.ResourceID)
				if !strings.HasPrefix(inst.ProvisioningStatus, "Provisioning Failed: ") || !strings.Contains(inst.ProvisioningStatus, c.want) || inst.ProvisioningStatusIndicator != eim.StatusError {
					t.Fatalf("got status %q %s", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
				}
			})
		})
	}
}

func TestWorkflowToRunning(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		n := len(wf.Actions)
		for i := range wf.Actions {
			e.clock.Add(time.Second)
			e.mustReport(h.ResourceID, wf, i, running, "", "")
			inst := e.getInstance(in.ResourceID)
			want := fmt.Sprintf("Provisioning In Progress: %d/%d %s", i+1, n, wf.Actions[i].Name)
			if inst.ProvisioningStatus != want {
				t.Fatalf("action %d: got status %q, want %q", i, inst.ProvisioningStatus, want)
			}
			e.mustReport(h.ResourceID, wf, i, running, "", fmt.Sprintf("output of %d\n", i))
			e.mustReport(h.ResourceID, wf, i, succeeded, "", "")
		}
		inst := e.getInstance(in.ResourceID)
		if inst.ProvisioningStatus != "Provisioned" || inst.ProvisioningStatusIndicator != eim.StatusIdle {
			t.Fatalf("got status %q %s, want Provisioned IDLE", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
		}
		if inst.CurrentState == eim.InstanceStateRunning {
			t.Fatalf("instance RUNNING before the node reported in")
		}
		host := e.getHost(h.ResourceID)
		if host.HostStatus != "Rebooting" || host.HostStatusIndicator != eim.StatusInProgress {
			t.Fatalf("got host status %q %s, want Rebooting IN_PROGRESS", host.HostStatus, host.HostStatusIndicator)
		}
		stored := e.workflow(h.ResourceID)
		if stored.State != eim.WorkflowSucceeded || stored.FinishedAt.IsZero() {
			t.Fatalf("got workflow %s finished %v", stored.State, stored.FinishedAt)
		}
		logLen := len(stored.Log)
		// A repeated final report (lost answer) changes nothing.
		e.mustReport(h.ResourceID, wf, n-1, succeeded, "", "")
		if got := len(e.workflow(h.ResourceID).Log); got != logLen {
			t.Fatalf("repeated report: log has %d entries, want %d", got, logLen)
		}
		if got := e.getWorkflow(h.ResourceID); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_DONE {
			t.Fatalf("got %v, want DONE", got.Disposition)
		}

		if got := e.reportIn(h.ResourceID); got.HeartbeatIntervalSeconds != 10 {
			t.Fatalf("got heartbeat %d, want 10", got.HeartbeatIntervalSeconds)
		}
		inst = e.getInstance(in.ResourceID)
		if inst.CurrentState != eim.InstanceStateRunning {
			t.Fatalf("got instance %s, want RUNNING", inst.CurrentState)
		}
		host = e.getHost(h.ResourceID)
		if host.HostStatus != "Running" || host.HostStatusIndicator != eim.StatusIdle || host.Hostname != h.ResourceID {
			t.Fatalf("got host status %q %s hostname %q", host.HostStatus, host.HostStatusIndicator, host.Hostname)
		}
		// A second report-in writes nothing.
		rev, _ := e.store.Revision(e.ctx)
		e.reportIn(h.ResourceID)
		if rev2, _ := e.store.Revision(e.ctx); rev2 != rev {
			t.Fatalf("repeated ReportIn wrote: revision %d → %d", rev, rev2)
		}
	})
}

func TestReportInBeforeProvisioning(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		e.getWorkflow(h.ResourceID)
		e.reportIn(h.ResourceID)
		if got := e.getInstance(in.ResourceID).CurrentState; got == eim.InstanceStateRunning {
			t.Fatalf("instance RUNNING with its workflow unfinished")
		}
	})
}

func TestReportActionRules(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		hid := h.ResourceID
		req := func(id string, attempt, index uint32, st provisioningv1.ActionState) *provisioningv1.ReportActionRequest {
			return &provisioningv1.ReportActionRequest{WorkflowId: id, Attempt: attempt, Index: index, State: st}
		}
		for _, c := range []struct {
			name       string
			m          *provisioningv1.ReportActionRequest
			wantCode   connect.Code
			wantCancel bool
		}{
			{"stale attempt", req(wf.Id, 2, 0, running), 0, true},
			{"other workflow", req("workflow-00000000", 1, 0, running), 0, true},
			{"bad workflow id", req("nope", 1, 0, running), connect.CodeInvalidArgument, false},
			{"index out of range", req(wf.Id, 1, 7, running), connect.CodeInvalidArgument, false},
			{"skips ahead", req(wf.Id, 1, 2, running), connect.CodeInvalidArgument, false},
			{"no state", req(wf.Id, 1, 0, 0), connect.CodeInvalidArgument, false},
			{"unknown state", req(wf.Id, 1, 0, 9), connect.CodeInvalidArgument, false},
			{"output too large", &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: 1, State: running, Output: make([]byte, 64<<10+1)}, connect.CodeInvalidArgument, false},
		} {
			resp, err := e.report(hid, c.m)
			if codeOf(err) != c.wantCode {
				t.Fatalf("%s: got error %v, want code %v", c.name, err, c.wantCode)
			}
			if err == nil && resp.Cancel != c.wantCancel {
				t.Fatalf("%s: got cancel %v, want %v", c.name, resp.Cancel, c.wantCancel)
			}
		}
		// Another node cannot report on this workflow.
		other := e.host()
		if resp, err := e.report(other.ResourceID, req(wf.Id, 1, 0, running)); err != nil || !resp.Cancel {
			t.Fatalf("other node: got %v, %v, want cancel", resp, err)
		}
		if _, err := e.svc.ReportAction(e.ctx, connect.NewRequest(req(wf.Id, 1, 0, running))); codeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("no node: got %v, want Unauthenticated", err)
		}

		e.mustReport(hid, wf, 0, succeeded, "", "")
		if _, err := e.report(hid, req(wf.Id, 1, 0, failed)); codeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("failing a succeeded action: got %v, want InvalidArgument", err)
		}
		e.mustReport(hid, wf, 0, running, "", "") // late retry: ignored
		e.mustReport(hid, wf, 1, running, "", "downloading\n")
		e.mustReport(hid, wf, 1, failed, "sha256 mismatch", "got deadbeef\n")
		inst := e.getInstance(in.ResourceID)
		if inst.ProvisioningStatus != "Provisioning Failed: 2/7 stream-image: sha256 mismatch" || inst.ProvisioningStatusIndicator != eim.StatusError {
			t.Fatalf("got status %q %s", inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
		}
		got := e.getWorkflow(hid)
		if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED || got.Message != "stream-image: sha256 mismatch" {
			t.Fatalf("got %v %q, want FAILED", got.Disposition, got.Message)
		}
		if resp, err := e.report(hid, req(wf.Id, 1, 2, running)); err != nil || !resp.Cancel {
			t.Fatalf("report after failure: got %v, %v, want cancel", resp, err)
		}
		stored := e.workflow(hid)
		var outputs, fails int
		for _, le := range stored.Log {
			if le.Output != "" {
				outputs++
			}
			if le.State == eim.ActionFailed && le.Message == "sha256 mismatch" && le.Action == 1 {
				fails++
			}
		}
		if outputs != 2 || fails != 1 {
			t.Fatalf("log: %d outputs and %d failures, want 2 and 1: %+v", outputs, fails, stored.Log)
		}
		for i, le := range stored.Log {
			if le.Seq != i+1 {
				t.Fatalf("log entry %d has seq %d", i, le.Seq)
			}
		}
	})
}

func TestDeletedInstanceCancels(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		if err := e.inv.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID); err != nil {
			t.Fatal(err)
		}
		resp, err := e.report(h.ResourceID, &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: 1, State: running})
		if err != nil || !resp.Cancel {
			t.Fatalf("got %v, %v, want cancel", resp, err)
		}
	})
}

// The service remembers each host's instance; a host whose instance was
// replaced gets the new instance's workflow, not the old one's.
func TestReplacedInstanceGetsItsOwnWorkflow(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		os := e.os("https://images.example/a.raw", goodSha)
		old := e.instance(h, os, nil)
		first := e.getWorkflow(h.ResourceID).GetWorkflow().GetId()
		// The instance goes (as its two-phase delete ends) and another comes.
		err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			return tx.Delete(e.ctx, eim.KindInstance, old.ResourceID)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.getWorkflow(h.ResourceID); got.GetDisposition() != provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT {
			t.Fatalf("without an instance: got %v, want WAIT", got.GetDisposition())
		}
		repl := e.instance(h, os, nil)
		got := e.getWorkflow(h.ResourceID)
		if got.GetDisposition() != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN || got.GetWorkflow().GetId() == first {
			t.Fatalf("after the replacement: got %v workflow %s, want RUN with a new workflow (old %s)", got.GetDisposition(), got.GetWorkflow().GetId(), first)
		}
		if wf := e.workflow(h.ResourceID); wf.InstanceID != repl.ResourceID {
			t.Fatalf("workflow of instance %s, want %s", wf.InstanceID, repl.ResourceID)
		}
	})
}
