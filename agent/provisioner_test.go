package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// recorder is an Executor that records the actions it ran; fn, if set,
// runs each one.
type recorder struct {
	mu  sync.Mutex
	ran []*provisioningv1.Action
	fn  func(ctx context.Context, a *provisioningv1.Action, out io.Writer) error
}

func (r *recorder) Run(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
	r.mu.Lock()
	r.ran = append(r.ran, a)
	r.mu.Unlock()
	fmt.Fprintf(out, "ran %s\n", a.GetName())
	if r.fn != nil {
		return r.fn(ctx, a, out)
	}
	return nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []string
	for _, a := range r.ran {
		n = append(n, a.GetName())
	}
	return n
}

func workflow(resumeFrom uint32) *provisioningv1.Workflow {
	return &provisioningv1.Workflow{Id: "workflow-1", Attempt: 1, ResumeFrom: resumeFrom, Actions: []*provisioningv1.Action{
		{Index: 0, Name: "erase-disk", TimeoutSeconds: 560, Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{}}},
		{Index: 1, Name: "stream-image", TimeoutSeconds: 9800, Spec: &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{Url: "http://x/img", Sha256: strings.Repeat("a", 64)}}},
		{Index: 2, Name: "write-agent-config", Spec: &provisioningv1.Action_WriteAgentConfig{WriteAgentConfig: &provisioningv1.WriteAgentConfig{Partition: 1, Path: "/etc/eim/agent.json"}}},
		{Index: 3, Name: "reboot", Spec: &provisioningv1.Action_Reboot{Reboot: &provisioningv1.Reboot{}}},
	}}
}

func run(resp *provisioningv1.GetWorkflowResponse) func(int) (*provisioningv1.GetWorkflowResponse, error) {
	return func(int) (*provisioningv1.GetWorkflowResponse, error) { return resp, nil }
}

func runWF(wf *provisioningv1.Workflow) *provisioningv1.GetWorkflowResponse {
	return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_RUN, Workflow: wf}
}

// newProvisioner returns a Provisioner for the server at url with recorded
// waits and phases.
func newProvisioner(t *testing.T, ca *testCA, url string, exec agent.Executor) (*agent.Provisioner, *waits, func() []string) {
	t.Helper()
	client, pin, err := agent.DialPin(url, "sha256:"+ca.fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	var mu sync.Mutex
	var phases []string
	p := &agent.Provisioner{
		Client: client, URL: url, Pin: pin, Exec: exec,
		Identity: agent.Identity{UUID: "4c4c4544-0035-4310-8046-b4c04f4a4c32", Serial: "ABC12345",
			Interfaces: []agent.Interface{{Name: "eth0", MAC: "52:54:00:12:34:56", Addrs: []string{"10.0.2.15/24"}}}},
		Backoff:        agent.Backoff{Min: 2 * time.Second, Max: 32 * time.Second},
		OutputInterval: 10 * time.Millisecond,
		Wait:           w.wait,
		OnPhase: func(ph string) {
			mu.Lock()
			phases = append(phases, ph)
			mu.Unlock()
		},
	}
	return p, w, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), phases...)
	}
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProvisionerHappyPath(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	var gotReq *onboardingv1.DiscoverRequest
	s.discover = func(n int, req *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		gotReq = req
		if n == 1 {
			return &onboardingv1.DiscoverResponse{Status: onboardingv1.DiscoverResponse_STATUS_REGISTERED, HostId: "host-0000abcd", RetryAfterSeconds: 17}, nil
		}
		return onboarded(url), nil
	}
	s.token = func(_ int, id, secret string) (int, string) {
		if id != "edgenode-host-0000abcd" || secret != "s3cret" {
			return 401, `{"error":"invalid_client"}`
		}
		return 200, ""
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT, PollAfterSeconds: 7}, nil
		}
		return runWF(workflow(0)), nil
	}
	url = s.start(t, ca)
	rec := &recorder{}
	p, w, phases := newProvisioner(t, ca, url, rec)
	p.EnrollToken = "enroll-me"
	p.Identity.SecureBoot = provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE

	res, err := p.Run(runCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Result{HostID: "host-0000abcd", Project: "p1", ClientID: "edgenode-host-0000abcd",
		ClientSecret: "s3cret", TokenURL: url + "/oauth2/token", Rebooted: true}
	if res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	if gotReq.GetUuid() != p.Identity.UUID || gotReq.GetSerial() != "ABC12345" || gotReq.GetEnrollmentToken() != "enroll-me" ||
		len(gotReq.GetInterfaces()) != 1 || gotReq.GetInterfaces()[0].GetMac() != "52:54:00:12:34:56" || gotReq.GetAgentVersion() == "" ||
		gotReq.GetSecureBoot() != provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE {
		t.Errorf("discover request = %v", gotReq)
	}
	if got := w.all(); !slices.Equal(got, []time.Duration{17 * time.Second, 7 * time.Second}) {
		t.Errorf("waits = %v, want [17s 7s] (retry_after, poll_after)", got)
	}
	wantPhases := []string{"discover", "onboarded", "workflow", "action:erase-disk", "action:stream-image", "action:write-agent-config", "action:reboot", "done"}
	if got := phases(); !slices.Equal(got, wantPhases) {
		t.Errorf("phases = %v, want %v", got, wantPhases)
	}
	if got := rec.names(); !slices.Equal(got, []string{"erase-disk", "stream-image", "write-agent-config", "reboot"}) {
		t.Errorf("ran %v", got)
	}
	// write-agent-config reached the executor as a write-file with the
	// node's credentials and the CA learnt from the fingerprint.
	wf := rec.ran[2].GetWriteFile()
	if wf == nil || wf.GetPath() != "/etc/eim/agent.json" || wf.GetPartition() != 1 || wf.GetMode() != 0o600 {
		t.Fatalf("write-agent-config ran as %v", rec.ran[2])
	}
	cfg := configOf(t, wf.GetContent())
	if cfg["url"] != url || cfg["clientId"] != "edgenode-host-0000abcd" || cfg["clientSecret"] != "s3cret" ||
		cfg["hostId"] != "host-0000abcd" || cfg["project"] != "p1" || cfg["caCertPem"] != ca.pem {
		t.Errorf("agent config = %v", cfg)
	}
	// Every action ends within the output interval: one SUCCEEDED report
	// each, no RUNNING (the reboot's before it ran).
	var got []string
	for _, r := range s.gotReports() {
		if r.GetWorkflowId() != "workflow-1" || r.GetAttempt() != 1 {
			t.Errorf("report %v: wrong workflow/attempt", r)
		}
		if r.GetState() == provisioningv1.ActionState_ACTION_STATE_RUNNING && len(r.GetOutput()) > 0 {
			continue // an output chunk
		}
		got = append(got, fmt.Sprintf("%d:%s", r.GetIndex(), strings.TrimPrefix(r.GetState().String(), "ACTION_STATE_")))
	}
	wantReports := []string{"0:SUCCEEDED", "1:SUCCEEDED", "2:SUCCEEDED", "3:SUCCEEDED"}
	if !slices.Equal(got, wantReports) {
		t.Errorf("reports = %v, want %v", got, wantReports)
	}
	if n := s.calls("token"); n != 1 {
		t.Errorf("token requests = %d, want 1 (cached)", n)
	}
}

func TestProvisionerResumesAndDone(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			return runWF(workflow(3)), nil
		}
		return nil, errors.New("asked again after the reboot")
	}
	url = s.start(t, ca)
	rec := &recorder{}
	p, _, _ := newProvisioner(t, ca, url, rec)
	res, err := p.Run(runCtx(t))
	if err != nil || !res.Rebooted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := rec.names(); !slices.Equal(got, []string{"reboot"}) {
		t.Errorf("ran %v, want only the reboot (resume_from 3)", got)
	}

	// DONE: nothing runs, Rebooted false.
	s2 := &southbound{}
	s2.discover = s.discover
	s2.getWorkflow = run(&provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE})
	url = s2.start(t, ca)
	rec2 := &recorder{}
	p2, _, phases := newProvisioner(t, ca, url, rec2)
	res, err = p2.Run(runCtx(t))
	if err != nil || res.Rebooted || res.HostID != "host-0000abcd" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(rec2.names()) != 0 {
		t.Errorf("ran %v on DONE", rec2.names())
	}
	if got := phases(); !slices.Equal(got, []string{"discover", "onboarded", "workflow", "done"}) {
		t.Errorf("phases = %v", got)
	}
}

func TestProvisionerDiscoverBackoff(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(n int, _ *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		switch n {
		case 1, 2:
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("busy"))
		case 3, 4, 5, 6, 7, 8:
			return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown device"))
		}
		return onboarded(url), nil
	}
	s.getWorkflow = run(&provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE})
	url = s.start(t, ca)
	p, w, _ := newProvisioner(t, ca, url, &recorder{})
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := w.all()
	if len(got) != 8 {
		t.Fatalf("waits = %v, want 8", got)
	}
	// Transient: from Min/4 (0.5 s), doubling; then long: from 2 s doubling
	// to 32 s, the failure count carried on; each + up to 50% jitter.
	base := []time.Duration{500 * time.Millisecond, time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 32 * time.Second, 32 * time.Second, 32 * time.Second}
	for i, d := range got {
		if d < base[i] || d > base[i]*3/2 {
			t.Errorf("wait %d = %v, want %v..%v", i, d, base[i], base[i]*3/2)
		}
	}
}

func TestProvisionerRetokensAndRediscovers(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.token = func(n int, _, _ string) (int, string) {
		if n == 3 { // the credentials were revoked: discover again
			return 401, `{"error":"invalid_client","error_description":"credentials revoked"}`
		}
		return 200, ""
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			s.revokeTokens() // this and later calls with tok-1 fail
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("expired"))
		}
		if n == 2 {
			s.revokeTokens()
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("credentials revoked"))
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
	}
	url = s.start(t, ca)
	p, _, phases := newProvisioner(t, ca, url, &recorder{})
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	// token 1 → Unauthenticated → token 2 → Unauthenticated → token 3
	// refused (invalid_client) → discover → token 4 → DONE.
	if d, tk := s.calls("discover"), s.calls("token"); d != 2 || tk != 4 {
		t.Errorf("discover calls = %d, token requests = %d; want 2, 4", d, tk)
	}
	want := []string{"discover", "onboarded", "workflow", "discover", "onboarded", "workflow", "done"}
	if got := phases(); !slices.Equal(got, want) {
		t.Errorf("phases = %v, want %v", got, want)
	}
}

func TestProvisionerActionFailsAndTimesOut(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	wf := workflow(0)
	wf.Actions[0].TimeoutSeconds = 1
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		switch n {
		case 1:
			return runWF(wf), nil
		case 2:
			w := workflow(1)
			w.Attempt = 2
			return runWF(w), nil
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED, Message: "1/4 stream-image: boom"}, nil
	}
	url = s.start(t, ca)
	rec := &recorder{fn: func(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
		switch a.GetName() {
		case "erase-disk":
			<-ctx.Done() // hangs until its timeout
			return ctx.Err()
		case "stream-image":
			return errors.New("boom")
		}
		return nil
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	p.StopOnFailed = true
	_, err := p.Run(runCtx(t))
	var wfe *agent.WorkflowFailedError
	if !errors.As(err, &wfe) || wfe.Message != "1/4 stream-image: boom" {
		t.Fatalf("Run error = %v, want WorkflowFailedError", err)
	}
	var failed []*provisioningv1.ReportActionRequest
	for _, r := range s.gotReports() {
		if r.GetState() == provisioningv1.ActionState_ACTION_STATE_FAILED {
			failed = append(failed, r)
		}
	}
	if len(failed) != 2 {
		t.Fatalf("failed reports = %v, want 2", failed)
	}
	if f := failed[0]; f.GetIndex() != 0 || f.GetAttempt() != 1 || f.GetMessage() != "timed out after 1s" || f.GetExitCode() != 1 {
		t.Errorf("timeout report = %v", f)
	}
	if f := failed[1]; f.GetIndex() != 1 || f.GetAttempt() != 2 || f.GetMessage() != "boom" || !strings.Contains(string(f.GetOutput()), "ran stream-image") {
		t.Errorf("failure report = %v", f)
	}
	if got := rec.names(); !slices.Equal(got, []string{"erase-disk", "stream-image"}) {
		t.Errorf("ran %v", got)
	}
}

func TestProvisionerStreamsOutputAndHonoursCancel(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n == 1 {
			return runWF(workflow(0)), nil
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
	}
	chunk := make(chan string, 10)
	s.report = func(r *provisioningv1.ReportActionRequest) (*provisioningv1.ReportActionResponse, error) {
		if r.GetState() == provisioningv1.ActionState_ACTION_STATE_RUNNING && len(r.GetOutput()) > 0 {
			chunk <- string(r.GetOutput())
			// The attempt was superseded while the action ran.
			return &provisioningv1.ReportActionResponse{Cancel: true}, nil
		}
		return nil, nil
	}
	url = s.start(t, ca)
	rec := &recorder{fn: func(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
		fmt.Fprintln(out, "progress 10%")
		<-ctx.Done() // runs until the agent cancels it
		return ctx.Err()
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	res, err := p.Run(runCtx(t))
	if err != nil || res.Rebooted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := <-chunk; !strings.HasPrefix(got, "ran erase-disk\n") {
		t.Errorf("output chunk = %q, want the action's output", got)
	}
	if got := rec.names(); !slices.Equal(got, []string{"erase-disk"}) {
		t.Errorf("ran %v, want erase-disk only (cancelled)", got)
	}
	for _, r := range s.gotReports() {
		if r.GetState() != provisioningv1.ActionState_ACTION_STATE_RUNNING {
			t.Errorf("report %v after cancel", r)
		}
	}
}

func TestProvisionerStopsWithContext(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}
	url := s.start(t, ca)
	p, _, _ := newProvisioner(t, ca, url, &recorder{})
	p.Wait = nil // real waits; the context ends first
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run error = %v, want deadline exceeded", err)
	}
}

func TestProvisionerChunksLargeOutput(t *testing.T) {
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
	url = s.start(t, ca)
	big := strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB
	rec := &recorder{fn: func(_ context.Context, _ *provisioningv1.Action, out io.Writer) error {
		io.WriteString(out, big)
		return nil
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	p.OutputInterval = time.Hour // only the final flush reports output
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	reports := s.gotReports()
	for _, r := range reports {
		if len(r.GetOutput()) > 64<<10 {
			t.Errorf("report carries %d bytes, want ≤ 64 KiB", len(r.GetOutput()))
		}
		all.Write(r.GetOutput())
	}
	if got, want := all.String(), "ran erase-disk\n"+big; got != want {
		t.Errorf("reported %d bytes of output, want %d", len(got), len(want))
	}
	if last := reports[len(reports)-1]; last.GetState() != provisioningv1.ActionState_ACTION_STATE_SUCCEEDED || len(reports) != 4 {
		t.Errorf("%d reports, last %v; want 3 RUNNING chunks, SUCCEEDED", len(reports), last.GetState())
	}
}

// An action still running at the first output tick is reported RUNNING
// then, even without output, so the server starts its timeout and shows
// it; it is not reported RUNNING again until it prints.
func TestProvisionerReportsLongActionRunning(t *testing.T) {
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
	url = s.start(t, ca)
	rec := &recorder{fn: func(ctx context.Context, _ *provisioningv1.Action, _ io.Writer) error {
		// Run until the server has seen RUNNING, and a few ticks more.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, r := range s.gotReports() {
				if r.GetState() == provisioningv1.ActionState_ACTION_STATE_RUNNING {
					time.Sleep(50 * time.Millisecond)
					return nil
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		return errors.New("no RUNNING report within 10 s")
	}}
	p, _, _ := newProvisioner(t, ca, url, rec)
	p.OutputInterval = 10 * time.Millisecond
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.gotReports() {
		got = append(got, strings.TrimPrefix(r.GetState().String(), "ACTION_STATE_"))
	}
	if want := []string{"RUNNING", "SUCCEEDED"}; !slices.Equal(got, want) {
		t.Errorf("reports %v, want %v", got, want)
	}
}

// A denied device waits what the server says, doubling at each denial in a
// row up to an hour, ±20 %: never a tight loop.
func TestDeniedWait(t *testing.T) {
	for _, tt := range []struct {
		after time.Duration
		n     int
		want  time.Duration
	}{
		{10 * time.Minute, 1, 10 * time.Minute},
		{10 * time.Minute, 2, 20 * time.Minute},
		{10 * time.Minute, 3, 40 * time.Minute},
		{10 * time.Minute, 4, time.Hour},
		{10 * time.Minute, 40, time.Hour},
		{0, 1, time.Minute}, // a server that says nothing still gets a minute
	} {
		for range 50 {
			got := agent.DeniedWait(tt.after, tt.n)
			if got < tt.want*4/5 || got > tt.want*6/5 {
				t.Fatalf("after %v, denial %d: got %v, want %v ±20%%", tt.after, tt.n, got, tt.want)
			}
		}
	}
}

// The measured boot (some 13 KB) goes with the first GetWorkflow and
// again only when the server's answer does not say measured_boot_later:
// a server that asks for it, or one that predates the field.
func TestProvisionerWithholdsMeasuredBoot(t *testing.T) {
	ca := newTestCA(t)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	wait := func(later bool) *provisioningv1.GetWorkflowResponse {
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT, PollAfterSeconds: 1, MeasuredBootLater: later}
	}
	answers := []*provisioningv1.GetWorkflowResponse{
		wait(true), wait(true), wait(false), // the server asks for it
		wait(true), wait(false), wait(false), // then predates the field (an older server after an upgrade's rollback)
		{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE},
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n > len(answers) {
			return nil, errors.New("asked after DONE")
		}
		return answers[n-1], nil
	}
	url = s.start(t, ca)
	p, _, _ := newProvisioner(t, ca, url, &recorder{})
	mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: bytes.Repeat([]byte{1}, 13<<10)}
	p.Identity.MeasuredBoot = mb
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	for _, req := range s.workflowRequests() {
		switch {
		case req.GetMeasuredBoot() != nil && !req.GetMeasuredBootWithheld() && len(req.GetMeasuredBoot().GetEventLog()) == len(mb.EventLog):
			got = append(got, "sent")
		case req.GetMeasuredBoot() == nil && req.GetMeasuredBootWithheld():
			got = append(got, "withheld")
		default:
			got = append(got, fmt.Sprintf("%d-byte log, withheld %v", len(req.GetMeasuredBoot().GetEventLog()), req.GetMeasuredBootWithheld()))
		}
	}
	want := []string{"sent", "withheld", "withheld", "sent", "withheld", "sent", "sent"}
	if !slices.Equal(got, want) {
		t.Errorf("measured boot of each GetWorkflow: got %v, want %v", got, want)
	}

	// An identity without a measured boot: nothing to withhold.
	s2 := &southbound{discover: s.discover, getWorkflow: s.getWorkflow}
	url = s2.start(t, ca)
	p2, _, _ := newProvisioner(t, ca, url, &recorder{})
	if _, err := p2.Run(runCtx(t)); err != nil {
		t.Fatalf("Run without a measured boot: %v", err)
	}
	for i, req := range s2.workflowRequests() {
		if req.GetMeasuredBoot() != nil || req.GetMeasuredBootWithheld() {
			t.Errorf("request %d without a measured boot: got %v, withheld %v; want neither", i+1, req.GetMeasuredBoot(), req.GetMeasuredBootWithheld())
		}
	}
}

// With a TPM, the agent says it quotes and sends its TPM's keys; once an
// answer gave it a nonce wrapped for them, the measured boot it sends
// carries its TPM's quote of the PCRs over it.
func TestProvisionerQuotesMeasuredBoot(t *testing.T) {
	ca := newTestCA(t)
	sw := swtpmtest.Start(t, t.TempDir())
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	nonce := bytes.Repeat([]byte{0x5a}, 32)
	// The first answer wraps the nonce for the keys the request sent.
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		switch n {
		case 1:
			k := s.workflowRequests()[0].GetTpmKeys()
			blob, enc, err := tpmquote.Challenge(tpmquote.Keys{EKPublic: k.GetEkPublic(), AKPublic: k.GetAkPublic()}, nonce)
			if err != nil {
				return nil, err
			}
			return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT, PollAfterSeconds: 1,
				AttestationChallenge: &provisioningv1.AttestationChallenge{CredentialBlob: blob, EncryptedSecret: enc}}, nil
		case 2:
			return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
		}
		return nil, errors.New("asked after DONE")
	}
	url = s.start(t, ca)
	p, _, _ := newProvisioner(t, ca, url, &recorder{})
	// The PCRs as the micro-OS reads them from sysfs: the TPM's values.
	mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: []byte("log")}
	values := sw.PCRs(t, []int{0, 4, 7})
	for _, i := range []int{0, 4, 7} {
		mb.Pcrs = append(mb.Pcrs, &provisioningv1.Pcr{Index: uint32(i), Sha256: values[i]})
	}
	p.Identity.MeasuredBoot = mb
	p.OpenTPM = func() (io.ReadWriteCloser, error) { return nopCloser{sw.Conn}, nil }
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	reqs := s.workflowRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d GetWorkflow requests, want 2", len(reqs))
	}
	if !reqs[0].GetQuotes() || reqs[0].GetTpmKeys() == nil || reqs[0].GetMeasuredBoot() == nil || reqs[0].GetMeasuredBoot().GetQuote() != nil {
		t.Fatalf("first request: quotes %v, keys %v, measured boot %v; want quotes, keys, the measured boot without a quote (no nonce yet)", reqs[0].GetQuotes(), reqs[0].GetTpmKeys(), reqs[0].GetMeasuredBoot())
	}
	// This TPM has no EK certificate in NV: none sent, and why.
	if k := reqs[0].GetTpmKeys(); len(k.GetEkCertificate()) != 0 || !strings.Contains(k.GetEkCertificateError(), "no EK certificate") {
		t.Fatalf("first request: EK certificate %d bytes, error %q; want none and why", len(k.GetEkCertificate()), k.GetEkCertificateError())
	}
	q := reqs[1].GetMeasuredBoot().GetQuote()
	if q == nil || q.GetError() != "" || !bytes.Equal(q.GetNonce(), nonce) {
		t.Fatalf("second request: quote %v; want one over the nonce", q)
	}
	if _, err := tpmquote.Verify(tpmquote.Quote{AKPublic: q.GetAkPublic(), Attest: q.GetAttest(), Signature: q.GetSignature()}, nonce, values); err != nil {
		t.Fatalf("the agent's quote: %v", err)
	}

	// A TPM that cannot be opened: no keys, and the quote says why.
	s2 := &southbound{discover: s.discover}
	s2.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n > 1 {
			return nil, errors.New("asked after DONE")
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
	}
	url = s2.start(t, ca)
	p2, _, _ := newProvisioner(t, ca, url, &recorder{})
	p2.Identity.MeasuredBoot = mb
	p2.OpenTPM = func() (io.ReadWriteCloser, error) { return nil, errors.New("no /dev/tpmrm0") }
	if _, err := p2.Run(runCtx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := s2.workflowRequests()[0]; !r.GetQuotes() || r.GetTpmKeys() != nil || r.GetMeasuredBoot().GetQuote().GetError() != "no /dev/tpmrm0" {
		t.Fatalf("quote without a TPM: got keys %v, quote %v; want no keys, the TPM's error", r.GetTpmKeys(), r.GetMeasuredBoot().GetQuote())
	}
}

// A TPM whose maker wrote its EK's certificate into NV (swtpm_setup with a
// local CA): the agent sends it with the keys, and it verifies for the EK
// sent against that CA.
func TestProvisionerSendsEKCert(t *testing.T) {
	ca := newTestCA(t)
	maker := swtpmtest.NewCA(t)
	dir := t.TempDir()
	swtpmtest.Manufacture(t, dir, maker)
	sw := swtpmtest.Start(t, dir)
	s := &southbound{}
	var url string
	s.discover = func(int, *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
		return onboarded(url), nil
	}
	s.getWorkflow = func(n int) (*provisioningv1.GetWorkflowResponse, error) {
		if n > 1 {
			return nil, errors.New("asked after DONE")
		}
		return &provisioningv1.GetWorkflowResponse{Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE}, nil
	}
	url = s.start(t, ca)
	p, _, _ := newProvisioner(t, ca, url, &recorder{})
	mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: []byte("log")}
	mb.Pcrs = append(mb.Pcrs, &provisioningv1.Pcr{Index: 7, Sha256: sw.PCRs(t, []int{7})[7]})
	p.Identity.MeasuredBoot = mb
	p.OpenTPM = func() (io.ReadWriteCloser, error) { return nopCloser{sw.Conn}, nil }
	if _, err := p.Run(runCtx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	k := s.workflowRequests()[0].GetTpmKeys()
	if len(k.GetEkCertificate()) == 0 || k.GetEkCertificateError() != "" {
		t.Fatalf("EK certificate: %d bytes, error %q; want the TPM's", len(k.GetEkCertificate()), k.GetEkCertificateError())
	}
	caFile := filepath.Join(t.TempDir(), "maker.pem")
	if err := os.WriteFile(caFile, maker.BundlePEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	roots, err := tpmquote.LoadEKRoots([]string{caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpmquote.VerifyEKCert(k.GetEkCertificate(), k.GetEkPublic(), roots, time.Now()); err != nil {
		t.Fatalf("the EK certificate sent: %v", err)
	}
}

type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }
