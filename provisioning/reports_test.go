package provisioning_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

func (e *env) reportAll(hostID string, ms ...*provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionsResponse, error) {
	resp, err := e.svc.ReportActions(asNode(e.ctx, e.proj, hostID), connect.NewRequest(&provisioningv1.ReportActionsRequest{Reports: ms}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func rep(wf *provisioningv1.Workflow, i int, st provisioningv1.ActionState, msg, out string) *provisioningv1.ReportActionRequest {
	return &provisioningv1.ReportActionRequest{WorkflowId: wf.Id, Attempt: wf.Attempt, Index: uint32(i), State: st, Message: msg, Output: []byte(out)}
}

// logLines renders a workflow's log without times, for comparing two
// workflows reported the same way.
func logLines(wf *eim.Workflow) string {
	var b strings.Builder
	for _, l := range wf.Log {
		b.WriteString(strings.Join([]string{l.Name, string(l.State), l.Message, l.Output}, "|") + "\n")
	}
	return b.String()
}

// Reports sent together are recorded exactly as the same reports sent one
// by one, with each changed row written once.
func TestReportActionsAsOneByOne(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		os := e.os("https://images.example/a.raw", goodSha)
		one, batched := e.host(), e.host()
		inOne, inBatched := e.instance(one, os, nil), e.instance(batched, os, nil)
		wfOne := e.getWorkflow(one.ResourceID).Workflow
		wfBatched := e.getWorkflow(batched.ResourceID).Workflow
		steps := func(wf *provisioningv1.Workflow) []*provisioningv1.ReportActionRequest {
			return []*provisioningv1.ReportActionRequest{
				rep(wf, 0, succeeded, "", "wiped\n"),
				rep(wf, 1, running, "", "downloading\n"),
				rep(wf, 1, succeeded, "", "done\n"),
				rep(wf, 2, succeeded, "", ""),
			}
		}
		for _, m := range steps(wfOne) {
			if _, err := e.report(one.ResourceID, m); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := e.store.Revision(e.ctx)
		resp, err := e.reportAll(batched.ResourceID, steps(wfBatched)...)
		if err != nil || resp.Cancel {
			t.Fatalf("ReportActions: %v, %v", resp, err)
		}
		// One instance and one workflow update: two revisions, where one
		// by one took seven.
		if after, _ := e.store.Revision(e.ctx); after-before != 2 {
			t.Errorf("ReportActions wrote %d revisions, want 2 (the instance and the workflow once each)", after-before)
		}
		gotIn, wantIn := e.getInstance(inBatched.ResourceID), e.getInstance(inOne.ResourceID)
		if gotIn.ProvisioningStatus != wantIn.ProvisioningStatus || gotIn.ProvisioningStatus != "Provisioning In Progress: 4/7 write-user-data" {
			t.Errorf("status: got %q, one by one %q", gotIn.ProvisioningStatus, wantIn.ProvisioningStatus)
		}
		if got, want := logLines(e.workflow(batched.ResourceID)), logLines(e.workflow(one.ResourceID)); got != want {
			t.Errorf("log:\n%s\nwant (one by one):\n%s", got, want)
		}
		if got := e.getWorkflow(batched.ResourceID).Workflow.ResumeFrom; got != 3 {
			t.Errorf("resume_from = %d, want 3", got)
		}

		// The rest, the reboot last, in one call: provisioned.
		var rest []*provisioningv1.ReportActionRequest
		for i := 3; i < len(wfBatched.Actions); i++ {
			rest = append(rest, rep(wfBatched, i, succeeded, "", ""))
		}
		if _, err := e.reportAll(batched.ResourceID, rest...); err != nil {
			t.Fatal(err)
		}
		if got := e.getInstance(inBatched.ResourceID); got.ProvisioningStatus != "Provisioned" {
			t.Errorf("after the last report: status %q, want Provisioned", got.ProvisioningStatus)
		}
		if got := e.getHost(batched.ResourceID); got.HostStatus != "Rebooting" {
			t.Errorf("host status %q, want Rebooting", got.HostStatus)
		}
	})
}

// A refused report refuses the whole call: nothing of it is recorded, and
// the error names the report.
func TestReportActionsAllOrNothing(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		wf := e.getWorkflow(h.ResourceID).Workflow
		before := e.workflow(h.ResourceID)
		for _, c := range []struct {
			name string
			ms   []*provisioningv1.ReportActionRequest
			want string
		}{
			{"skips ahead", []*provisioningv1.ReportActionRequest{rep(wf, 0, succeeded, "", "x"), rep(wf, 2, succeeded, "", "")},
				"reports[1]: action 3/7 write-meta-data reported before 2/7 stream-image succeeded"},
			{"bad field", []*provisioningv1.ReportActionRequest{rep(wf, 0, succeeded, "", ""), rep(wf, 1, 0, "", "")},
				"reports[1]: state: required"},
			{"none", nil, "reports: at least one is required"},
			{"a nil report", []*provisioningv1.ReportActionRequest{rep(wf, 0, succeeded, "", ""), nil}, "reports[1]: missing"},
			{"too many", make([]*provisioningv1.ReportActionRequest, 33), "reports: 33, at most 32 per call"},
		} {
			_, err := e.reportAll(h.ResourceID, c.ms...)
			if codeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: got %v, want InvalidArgument %q", c.name, err, c.want)
			}
		}
		after := e.workflow(h.ResourceID)
		if len(after.Log) != len(before.Log) || after.Actions[0].State != eim.ActionPending {
			t.Errorf("a refused call recorded something: log %d → %d entries, action 1 %s", len(before.Log), len(after.Log), after.Actions[0].State)
		}
		if got := e.getInstance(in.ResourceID).ProvisioningStatus; strings.Contains(got, "2/7") {
			t.Errorf("a refused call moved the status to %q", got)
		}

		// A superseded attempt cancels, and what follows it is not applied.
		stale := &provisioningv1.Workflow{Id: wf.Id, Attempt: wf.Attempt + 1}
		resp, err := e.reportAll(h.ResourceID, rep(stale, 0, succeeded, "", ""), rep(wf, 0, succeeded, "", ""))
		if err != nil || !resp.Cancel {
			t.Fatalf("stale attempt first: got %v, %v, want cancel", resp, err)
		}
		if got := e.workflow(h.ResourceID).Actions[0].State; got != eim.ActionPending {
			t.Errorf("a report after the cancelling one was applied: action 1 %s", got)
		}
	})
}
