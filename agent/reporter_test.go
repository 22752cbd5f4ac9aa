package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// quickWorkflow has n quick actions and a reboot.
func quickWorkflow(n int) *provisioningv1.Workflow {
	wf := &provisioningv1.Workflow{Id: "workflow-1", Attempt: 1}
	for i := range n {
		wf.Actions = append(wf.Actions, &provisioningv1.Action{Index: uint32(i), Name: fmt.Sprintf("step-%d", i),
			Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{}}})
	}
	wf.Actions = append(wf.Actions, &provisioningv1.Action{Index: uint32(n), Name: "reboot", Spec: &provisioningv1.Action_Reboot{Reboot: &provisioningv1.Reboot{}}})
	return wf
}

// reportsOf renders reports as "index:STATE", output chunks left out.
func reportsOf(rs []*provisioningv1.ReportActionRequest) []string {
	var got []string
	for _, r := range rs {
		if r.GetState() == provisioningv1.ActionState_ACTION_STATE_RUNNING && len(r.GetOutput()) > 0 {
			continue
		}
		got = append(got, fmt.Sprintf("%d:%s", r.GetIndex(), strings.TrimPrefix(r.GetState().String(), "ACTION_STATE_")))
	}
	return got
}

func batchedServer(t *testing.T, ca *testCA, wf *provisioningv1.Workflow) (*southbound, string) {
	s := &southbound{batched: true}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = run(runWF(wf))
	url = s.start(t, ca)
	return s, url
}

// Quick actions' reports wait for the reboot's and go with it in one call.
func TestReporterSendsQuickActionsTogether(t *testing.T) {
	ca := newTestCA(t)
	s, url := batchedServer(t, ca, quickWorkflow(4))
	p, _, _ := newProvisioner(t, ca, url, &recorder{})
	p.OutputInterval = time.Minute
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := reportsOf(s.gotReports()), []string{"0:SUCCEEDED", "1:SUCCEEDED", "2:SUCCEEDED", "3:SUCCEEDED", "4:SUCCEEDED"}; !slices.Equal(got, want) {
		t.Errorf("reports = %v, want %v", got, want)
	}
	if got := s.gotBatches(); !slices.Equal(got, []int{5}) {
		t.Errorf("ReportActions calls carried %v reports, want one call with 5", got)
	}
	if n := s.calls("report"); n != 0 {
		t.Errorf("%d single ReportAction calls, want 0", n)
	}
	// Each report carries the last output of its action.
	for _, r := range s.gotReports()[:4] {
		if want := fmt.Sprintf("ran step-%d\n", r.GetIndex()); string(r.GetOutput()) != want {
			t.Errorf("report %d output %q, want %q", r.GetIndex(), r.GetOutput(), want)
		}
	}
}

// Held reports go out once the oldest is an output interval old.
func TestReporterSendsHeldReportsAfterInterval(t *testing.T) {
	ca := newTestCA(t)
	s, url := batchedServer(t, ca, quickWorkflow(5))
	var mu sync.Mutex
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// Each action takes a second of the injected clock.
	rec := &recorder{fn: func(context.Context, *provisioningv1.Action, io.Writer) error {
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		return nil
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	p.OutputInterval, p.Now = 2500*time.Millisecond, clock
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Held from step-0's end (t=1 s); step-3 ends at 4 s, 3 s later: the
	// four go; step-4 then waits for the reboot.
	if got := s.gotBatches(); !slices.Equal(got, []int{4, 2}) {
		t.Errorf("ReportActions calls carried %v reports, want [4 2]", got)
	}
	if got, want := reportsOf(s.gotReports()), []string{"0:SUCCEEDED", "1:SUCCEEDED", "2:SUCCEEDED", "3:SUCCEEDED", "4:SUCCEEDED", "5:SUCCEEDED"}; !slices.Equal(got, want) {
		t.Errorf("reports = %v, want %v", got, want)
	}
}

// A failure is reported at once, after what was held.
func TestReporterSendsFailureWithHeld(t *testing.T) {
	ca := newTestCA(t)
	wf := quickWorkflow(4)
	s, url := batchedServer(t, ca, wf)
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			return runWF(wf), nil
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED, Message: "step-2: disk on fire"}, nil
	}
	rec := &recorder{fn: func(_ context.Context, a *provisioningv1.Action, _ io.Writer) error {
		if a.GetName() == "step-2" {
			return errors.New("disk on fire")
		}
		return nil
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	p.OutputInterval, p.StopOnFailed = time.Minute, true
	if _, err := p.Run(runCtx(t)); err == nil {
		t.Fatal("Run succeeded; want the workflow's failure")
	}
	if got, want := reportsOf(s.gotReports()), []string{"0:SUCCEEDED", "1:SUCCEEDED", "2:FAILED"}; !slices.Equal(got, want) {
		t.Errorf("reports = %v, want %v", got, want)
	}
	if got := s.gotBatches(); !slices.Equal(got, []int{3}) {
		t.Errorf("ReportActions calls carried %v reports, want one call with 3", got)
	}
	if got := rec.names(); !slices.Equal(got, []string{"step-0", "step-1", "step-2"}) {
		t.Errorf("ran %v, want step-0..2", got)
	}
}
