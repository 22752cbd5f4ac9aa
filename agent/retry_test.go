package agent_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// A failed workflow is polled until a user retries it; the new attempt then
// runs from its first action.
func TestProvisionerRunsRetriedAttempt(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		switch n {
		case 1:
			return runWF(workflow(0)), nil
		case 2, 3:
			return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED,
				PollAfterSeconds: 60, Message: "stream-image: sha256 mismatch"}, nil
		}
		wf := workflow(0)
		wf.Attempt = 2
		return runWF(wf), nil
	}
	url = s.start(t, ca)
	var mu sync.Mutex
	streams := 0
	rec := &recorder{fn: func(_ context.Context, a *provisioningv1.Action, _ io.Writer) error {
		mu.Lock()
		defer mu.Unlock()
		if a.GetName() == "stream-image" {
			streams++
			if streams == 1 {
				return errors.New("sha256 mismatch")
			}
		}
		return nil
	}}
	p, w, _ := newProvisioner(t, ca, url, rec)
	res, err := p.Run(runCtx(t))
	if err != nil || !res.Rebooted {
		t.Fatalf("Run = %+v, %v; want rebooted", res, err)
	}
	want := []string{"erase-disk", "stream-image", "erase-disk", "stream-image", "write-agent-config", "reboot"}
	if got := rec.names(); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if got := w.all(); !slices.Contains(got, 60*time.Second) {
		t.Errorf("waits %v, want the failed workflow's 60 s poll", got)
	}
	var attempt2 int
	for _, r := range s.gotReports() {
		if r.GetAttempt() == 2 {
			attempt2++
		}
	}
	if attempt2 != 4 { // SUCCEEDED of each of the 4 actions (each ends within the output interval)
		t.Errorf("%d reports of attempt 2, want 4", attempt2)
	}
}

// A report whose answer was lost is sent again from the same output offset;
// every acknowledged report's offset is the output acknowledged before it.
func TestProvisionerReportsOutputOffsets(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			wf := workflow(0)
			wf.Actions = wf.Actions[:1]
			return runWF(wf), nil
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
	}
	type sent struct {
		off   uint64
		out   string
		acked bool
	}
	var mu sync.Mutex
	var all []sent
	lost, acked := make(chan struct{}), make(chan struct{}, 10)
	s.report = func(r *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error) {
		if len(r.GetOutput()) == 0 {
			return nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		first := len(all) == 0
		all = append(all, sent{off: r.GetOutputOffset(), out: string(r.GetOutput()), acked: !first})
		if first {
			close(lost)
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("answer lost"))
		}
		acked <- struct{}{}
		return nil, nil
	}
	url = s.start(t, ca)
	rec := &recorder{fn: func(ctx context.Context, _ *provisioningv1.Action, out io.Writer) error {
		<-lost
		io.WriteString(out, "b\n")
		select {
		case <-acked:
		case <-ctx.Done():
			return ctx.Err()
		}
		io.WriteString(out, "c\n")
		return nil
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(all) < 3 {
		t.Fatalf("got %d output reports %+v, want at least 3", len(all), all)
	}
	if all[0].off != 0 || all[1].off != 0 || !strings.HasPrefix(all[1].out, all[0].out) {
		t.Fatalf("got %+v then %+v, want the lost chunk sent again from offset 0", all[0], all[1])
	}
	var got strings.Builder
	maxOff := uint64(0)
	for _, r := range all[1:] {
		if r.off != uint64(got.Len()) {
			t.Fatalf("report %+v: got offset %d, want %d", r, r.off, got.Len())
		}
		maxOff = max(maxOff, r.off)
		got.WriteString(r.out)
	}
	if want := "ran erase-disk\nb\nc\n"; got.String() != want {
		t.Fatalf("got output %q, want %q", got.String(), want)
	}
	if maxOff == 0 {
		t.Fatalf("no report past offset 0: %+v", all)
	}
}
