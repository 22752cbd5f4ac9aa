package oob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// fakeBMC is an in-process BMC for the job state machine's edge cases
// (the real one, ipmi_sim driving QEMU, is in cmd/eim's end-to-end test).
type fakeBMC struct {
	mu    sync.Mutex
	state oob.PowerState
	// next becomes the state after lag more reads (a slow transition).
	next oob.PowerState
	lag  int
	// dropOn: power-ons acknowledged and ignored; ignoreGraceful: the OS
	// does not answer ACPI; unreachable: no answer; hang: Power blocks
	// until its context ends (after counting the send).
	dropOn         int
	ignoreGraceful bool
	unreachable    bool
	hang           bool
	// cycleOff: a power cycle's on fails, leaving the machine off.
	cycleOff bool
	sends    map[oob.Action]int
	onAt     []time.Time // when each power-on came
	boot     oob.Boot
	boots    []oob.Boot // every override set, in order
}

func newFake(s oob.PowerState) *fakeBMC { return &fakeBMC{state: s, sends: map[oob.Action]int{}} }

func (f *fakeBMC) Open(context.Context, oob.Target) (oob.Conn, error) { return f, nil }

func (f *fakeBMC) sent(a oob.Action) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends[a]
}

func (f *fakeBMC) PowerState(context.Context) (oob.PowerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unreachable {
		return "", &oob.Error{Kind: oob.Unreachable, Op: "read power state", Detail: "no answer"}
	}
	if f.next != "" {
		if f.lag > 0 {
			f.lag--
		} else {
			f.state, f.next = f.next, ""
		}
	}
	return f.state, nil
}

func (f *fakeBMC) Power(ctx context.Context, a oob.Action) error {
	f.mu.Lock()
	f.sends[a]++
	if f.unreachable {
		f.mu.Unlock()
		return &oob.Error{Kind: oob.Unreachable, Op: "power", Detail: "no answer"}
	}
	if f.hang {
		f.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	defer f.mu.Unlock()
	switch a {
	case oob.ActionOn:
		f.onAt = append(f.onAt, time.Now())
		if f.dropOn > 0 {
			f.dropOn--
			return nil
		}
		f.state = oob.PowerOn
	case oob.ActionGracefulOff:
		if f.state == oob.PowerOff || f.next == oob.PowerOff {
			return &oob.Error{Kind: oob.AlreadyInState, Op: "graceful shutdown", Detail: "409: already off"}
		}
		if !f.ignoreGraceful {
			f.state = oob.PowerOff
		}
	case oob.ActionForceOff:
		f.state = oob.PowerOff
	case oob.ActionPowerCycle:
		f.state = oob.PowerOn
		if f.cycleOff {
			f.state = oob.PowerOff
		}
	case oob.ActionReset:
		f.state = oob.PowerOn
	default:
		return &oob.Error{Kind: oob.Unsupported, Op: "power", Detail: string(a)}
	}
	return nil
}

func (f *fakeBMC) SetBoot(_ context.Context, b oob.Boot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boot = b
	f.boots = append(f.boots, b)
	return nil
}

func (f *fakeBMC) Boot(context.Context) (oob.Boot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boot, nil
}

func (f *fakeBMC) Capabilities(context.Context) (oob.Capabilities, error) {
	return oob.Capabilities{Actions: []oob.Action{oob.ActionOn, oob.ActionForceOff}, BootTargets: []oob.BootTarget{oob.BootPXE}}, nil
}
func (f *fakeBMC) InsertMedia(context.Context, string) error { return oob.ErrUnsupported }
func (f *fakeBMC) EjectMedia(context.Context) error          { return oob.ErrUnsupported }
func (f *fakeBMC) Close() error                              { return nil }

// jobs is a module with fast timings over e's store, the fake as its IPMI
// driver, e's host a1 given a BMC.
type jobs struct {
	*env
	fake *fakeBMC
	svc  *oob.Service
	api  *httptest.Server
}

func fastOptions(e *env, f *fakeBMC, holder string) oob.Options {
	return oob.Options{Store: e.store, Feed: e.store, Key: e.key, Authenticator: tokens{"admin": {Subject: "admin", Roles: []string{eim.RoleAdmin}}},
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Drivers: map[eim.BMCProtocol]oob.Driver{eim.BMCIPMI: f}, Holder: holder, Workers: 2,
		Lease: 2 * time.Second, ClaimEvery: 20 * time.Millisecond, ConfirmEvery: 10 * time.Millisecond,
		ConfirmTimeout: 300 * time.Millisecond, GracefulTimeout: 100 * time.Millisecond, JobTimeout: 20 * time.Second,
		SiteLimit: -1, PollEvery: time.Hour, RelistEvery: time.Hour, RetryWait: 50 * time.Millisecond}
}

func newJobs(t *testing.T, e *env, f *fakeBMC, tweak func(*oob.Options)) *jobs {
	t.Helper()
	o := fastOptions(e, f, "test-"+t.Name())
	if tweak != nil {
		tweak(&o)
	}
	svc, err := oob.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range svc.Routes() {
		mux.Handle(p, h)
	}
	j := &jobs{env: e, fake: f, svc: svc, api: httptest.NewServer(mux)}
	t.Cleanup(j.api.Close)
	e.srv = j.api
	if code, body := e.do("admin", "PUT", bmcPath("a", e.hostA), map[string]any{"protocol": "IPMI", "address": "127.0.0.1:9623", "username": "admin", "password": "ipmi-pass-1"}); code != 200 {
		t.Fatalf("PUT bmc: %d %s", code, body)
	}
	return j
}

// run runs fn (a loop of the module) until the test ends. A loop that
// does not return within a minute of its cancel fails the test with every
// goroutine's stack, rather than hanging the package until go test's
// timeout names no culprit.
func run(t *testing.T, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				buf := make([]byte, 1<<20)
				t.Errorf("a loop of the module did not stop within a minute of its cancel; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// post asks for a power state through the API and returns the job's ID.
func (j *jobs) post(t *testing.T, body map[string]any) string {
	t.Helper()
	code, out := j.do("admin", "POST", bmcPath("a", j.hostA)+"/jobs", body)
	if code != 200 {
		t.Fatalf("POST jobs: %d %s", code, out)
	}
	var v eim.PowerJobView
	decode(t, out, &v)
	return v.JobID
}

// wait polls the job until it has ended (or 20 s).
func (j *jobs) wait(t *testing.T, id string, want eim.PowerJobState) *eim.PowerJob {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := j.store.GetPowerJob(t.Context(), "a", j.hostA, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == want {
			return got
		}
		if got.State.Ended() || time.Now().After(deadline) {
			t.Fatalf("job %s: got %s (%s), want %s; steps %+v", id, got.State, got.LastError, want, got.Steps)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace, not a wait for an event
	}
}

func (j *jobs) host(t *testing.T) *eim.Host {
	t.Helper()
	var h *eim.Host
	if err := j.store.View(t.Context(), "a", func(tx eim.Tx) error {
		r, err := tx.Get(t.Context(), eim.KindHost, j.hostA)
		h, _ = r.(*eim.Host)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestJobPowerOnResentWhenDropped(t *testing.T) {
	f := newFake(oob.PowerOff)
	f.dropOn = 1
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	run(t, j.svc.Work)
	id := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON", "boot": "pxe", "bootOnce": true})
	got := j.wait(t, id, eim.PowerJobSucceeded)
	if len(got.Steps) != 2 || got.Steps[0].Kind != eim.PowerStepSetBoot || !got.Steps[0].Done || got.Steps[1].Sends != 2 || !got.Steps[1].Done {
		t.Fatalf("steps: got %+v, want the boot set, then ON sent twice (the first dropped) and confirmed", got.Steps)
	}
	if f.boot.Target != oob.BootPXE || !f.boot.Once {
		t.Fatalf("boot override: got %+v, want PXE once", f.boot)
	}
	h := j.host(t)
	if h.CurrentPowerState != eim.PowerStateOn || h.PowerStatus != "Powered on" || h.PowerStatusIndicator != eim.StatusIdle || h.PowerOnTime == 0 ||
		h.DesiredPowerState != eim.PowerStateOn || h.BmcKind != eim.BaremetalControllerKindIPMI || h.BmcIP != "127.0.0.1" {
		t.Fatalf("host: got current %s, status %q %s, powerOnTime %d, desired %s, bmc %s %s; want ON, Powered on IDLE, stamped, ON, IPMI 127.0.0.1",
			h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator, h.PowerOnTime, h.DesiredPowerState, h.BmcKind, h.BmcIP)
	}
}

func TestJobAlreadyInStateIsConfirmed(t *testing.T) {
	// The first read sees ON; by the shutdown the machine is off, and the
	// BMC answers "already in that state": a success once read back.
	f := newFake(oob.PowerOn)
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	f.mu.Lock()
	f.next, f.lag, f.state = oob.PowerOff, 1, oob.PowerOn
	f.mu.Unlock()
	run(t, j.svc.Work)
	got := j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}), eim.PowerJobSucceeded)
	if !got.Steps[0].Done || !strings.Contains(got.Steps[0].Note, "already in that state") {
		t.Fatalf("graceful step: got %+v, want done with the BMC's already-in-state answer noted", got.Steps[0])
	}
	if !got.Steps[1].Done || f.sent(oob.ActionForceOff) != 0 {
		t.Fatalf("force-off step: got %+v and %d sends, want done with nothing sent", got.Steps[1], f.sent(oob.ActionForceOff))
	}
	if h := j.host(t); h.CurrentPowerState != eim.PowerStateOff || h.PowerStatus != "Powered off" {
		t.Fatalf("host: got %s %q, want OFF, Powered off", h.CurrentPowerState, h.PowerStatus)
	}
}

func TestJobGracefulThenForced(t *testing.T) {
	f := newFake(oob.PowerOn)
	f.ignoreGraceful = true
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	run(t, j.svc.Work)
	got := j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}), eim.PowerJobSucceeded)
	if !got.Steps[0].Skipped || !got.Steps[1].Done || f.sent(oob.ActionGracefulOff) != 1 || f.sent(oob.ActionForceOff) != 1 {
		t.Fatalf("got steps %+v, sends %v; want the graceful shutdown given up once, the machine forced off", got.Steps, f.sends)
	}
}

func TestJobEndsFailedNeverRequeued(t *testing.T) {
	t.Run("dropped every time", func(t *testing.T) {
		f := newFake(oob.PowerOff)
		f.dropOn = 1000
		j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
		run(t, j.svc.Work)
		got := j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobFailed)
		if f.sent(oob.ActionOn) != 3 || !strings.Contains(got.LastError, "not confirmed after 3 sends") {
			t.Fatalf("got %d sends, error %q; want 3 sends and the reason", f.sent(oob.ActionOn), got.LastError)
		}
		h := j.host(t)
		if h.CurrentPowerState != eim.PowerStateOff || h.PowerStatusIndicator != eim.StatusError || !strings.HasPrefix(h.PowerStatus, "Powering on failed: ") {
			t.Fatalf("host: got %s %q %s, want OFF (as read), the failure as an ERROR status", h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		f := newFake(oob.PowerOff)
		f.unreachable = true
		j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, func(o *oob.Options) { o.JobTimeout = 500 * time.Millisecond })
		run(t, j.svc.Work)
		got := j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobFailed)
		if !strings.Contains(got.LastError, "deadline passed") || !strings.Contains(got.LastError, "unreachable") {
			t.Fatalf("got %q, want the deadline and the last error (unreachable)", got.LastError)
		}
		var b eim.BMCView
		_, out := j.do("admin", "GET", bmcPath("a", j.hostA), nil)
		decode(t, out, &b)
		if b.Reachable.Status != "UNREACHABLE" || !strings.Contains(b.Reachable.LastError, "unreachable") {
			t.Fatalf("reachable: got %+v, want UNREACHABLE with the error", b.Reachable)
		}
	})
}

func TestPowerCommandPolicy(t *testing.T) {
	for _, policy := range []eim.PowerCommandPolicy{eim.PowerCommandPolicyOrdered, eim.PowerCommandPolicyImmediate} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFake(oob.PowerOff)
			f.dropOn = 1000 // the first job's power-on never shows
			j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, func(o *oob.Options) { o.ConfirmTimeout = 5 * time.Second })
			if err := j.store.Update(t.Context(), "a", func(tx eim.Tx) error {
				return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: j.hostA}, PowerCommandPolicy: policy}, "powerCommandPolicy")
			}); err != nil {
				t.Fatal(err)
			}
			run(t, j.svc.Work)
			first := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"})
			j.wait(t, first, eim.PowerJobRunning)
			second := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_OFF"})
			if policy == eim.PowerCommandPolicyImmediate {
				got := j.wait(t, first, eim.PowerJobCancelled)
				if !strings.Contains(got.LastError, "IMMEDIATE") {
					t.Fatalf("cancelled job: got %q, want the reason", got.LastError)
				}
				j.wait(t, second, eim.PowerJobSucceeded)
				return
			}
			// ORDERED: the second waits behind the first, which is in flight.
			if got, _ := j.store.GetPowerJob(t.Context(), "a", j.hostA, second); got.State != eim.PowerJobPending {
				t.Fatalf("second job: got %s, want PENDING behind the first", got.State)
			}
			j.wait(t, first, eim.PowerJobFailed)
			j.wait(t, second, eim.PowerJobSucceeded)
		})
	}
}

func TestResetRepeatAfterReset(t *testing.T) {
	f := newFake(oob.PowerOn)
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	run(t, j.svc.Work)
	run(t, j.svc.Follow)
	set := func(d eim.PowerState) {
		if err := j.store.Update(t.Context(), "a", func(tx eim.Tx) error {
			return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: j.hostA}, DesiredPowerState: d}, "desiredPowerState")
		}); err != nil {
			t.Fatal(err)
		}
	}
	latest := func(n int) *eim.PowerJob {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			list, total, err := j.store.ListPowerJobs(t.Context(), "a", j.hostA, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if total == n && list[0].State == eim.PowerJobSucceeded {
				return list[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no %d succeeded jobs", n)
		return nil
	}
	set(eim.PowerStateReset)
	if got := latest(1); got.Desired != eim.PowerStateReset {
		t.Fatalf("got %s, want RESET", got.Desired)
	}
	set(eim.PowerStateResetRepeat)
	if got := latest(2); got.Desired != eim.PowerStateResetRepeat {
		t.Fatalf("got %s, want RESET_REPEAT", got.Desired)
	}
	if n := f.sent(oob.ActionReset); n != 2 {
		t.Fatalf("resets sent: got %d, want 2", n)
	}
	if h := j.host(t); h.CurrentPowerState != eim.PowerStateResetRepeat || h.PowerStatus != "Reset successful" || h.PowerOnTime == 0 {
		t.Fatalf("host: got %s %q %d, want RESET_REPEAT, Reset successful, stamped", h.CurrentPowerState, h.PowerStatus, h.PowerOnTime)
	}
}

// TestTakeOverAfterLease stops a process's job runner while it is sending
// a reset; another process takes the job over once the lease has run out
// and confirms the reset from the BMC's state instead of sending it again.
func TestTakeOverAfterLease(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		f.hang = true
		j := newJobs(t, e, f, nil)
		stopA := run(t, j.svc.Work)
		id := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_RESET"})
		deadline := time.Now().Add(20 * time.Second)
		for f.sent(oob.ActionReset) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		stopA()
		f.mu.Lock()
		f.hang = false
		f.mu.Unlock()
		b, err := oob.New(fastOptions(e, f, "process-b"))
		if err != nil {
			t.Fatal(err)
		}
		run(t, b.Work)
		got := j.wait(t, id, eim.PowerJobSucceeded)
		if f.sent(oob.ActionReset) != 1 || got.Attempts < 2 || !strings.Contains(got.Steps[0].Note, "not sent again") {
			t.Fatalf("got %d resets, attempts %d, step %+v; want 1 reset, a second attempt or more, confirmed after the take-over", f.sent(oob.ActionReset), got.Attempts, got.Steps[0])
		}
	})
}

func TestJobsAPI(t *testing.T) {
	f := newFake(oob.PowerOff)
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	var ids []string
	for range 3 {
		ids = append(ids, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}))
	}
	var list eim.PowerJobList
	code, out := j.do("admin", "GET", bmcPath("a", j.hostA)+"/jobs?pageSize=2", nil)
	decode(t, out, &list)
	if code != 200 || list.TotalElements != 3 || !list.HasNext || len(list.Jobs) != 2 || list.Jobs[0].JobID != ids[2] {
		t.Fatalf("list: %d %s, want the 2 newest of 3", code, out)
	}
	for _, c := range []struct {
		method, path string
		body         any
		code         int
		want         string
	}{
		{"GET", "/jobs/" + ids[0], nil, 200, `"state":"PENDING"`},
		{"GET", "/jobs/bmcjob-zz", nil, 400, "jobId"},
		{"GET", "/jobs/bmcjob-00000000", nil, 404, "no power job"},
		{"GET", "/jobs?pageSize=0", nil, 400, "pageSize"},
		{"POST", "/jobs", map[string]any{"desiredPowerState": "ON"}, 400, "desiredPowerState"},
		{"POST", "/jobs", map[string]any{"desiredPowerState": "POWER_STATE_OFF", "boot": "PXE"}, 400, "boot"},
		{"POST", "/jobs", map[string]any{"desiredPowerState": "POWER_STATE_ON", "boot": "FLOPPY"}, 400, "boot"},
		{"POST", "/jobs", map[string]any{"desiredPowerState": "POWER_STATE_ON", "bootOnce": true}, 400, "bootOnce"},
		{"POST", "/jobs/" + ids[0] + "/cancel", nil, 200, `"state":"CANCELLED"`},
		{"DELETE", "/jobs/" + ids[0], nil, 409, "ended"},
		{"DELETE", "/jobs/" + ids[1], nil, 200, `"state":"CANCELLED"`},
	} {
		code, out := j.do("admin", c.method, bmcPath("a", j.hostA)+c.path, c.body)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s %s: got %d %s, want %d with %q", c.method, c.path, code, out, c.code, c.want)
		}
	}
	// Another project's host: not found; a host without a BMC: not found.
	if code, _ := j.do("admin", "GET", bmcPath("a", j.hostB)+"/jobs", nil); code != 404 {
		t.Errorf("another project's host: got %d, want 404", code)
	}
	if code, out := j.do("admin", "POST", bmcPath("a", j.hostA2)+"/jobs", map[string]any{"desiredPowerState": "POWER_STATE_ON"}); code != 404 {
		t.Errorf("a host without a BMC: got %d %s, want 404", code, out)
	}
	// Deleting the BMC gives the host's power back to the host module.
	if code, out := j.do("admin", "DELETE", bmcPath("a", j.hostA), nil); code != 200 {
		t.Fatalf("DELETE bmc: %d %s", code, out)
	}
	if h := j.host(t); h.BmcKind != eim.BaremetalControllerKindUnspecified || h.BmcIP != "" {
		t.Fatalf("after the BMC's deletion: got bmcKind %s %q, want unspecified", h.BmcKind, h.BmcIP)
	}
	if strings.Contains(j.logs.String(), "ipmi-pass-1") {
		t.Fatal("the BMC's password is in the logs")
	}
}

func TestPollDriftAndCapabilities(t *testing.T) {
	f := newFake(oob.PowerOn)
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	run(t, j.svc.Work)
	j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobSucceeded)
	// Switched off behind EIM's back.
	f.mu.Lock()
	f.state = oob.PowerOff
	f.mu.Unlock()
	if err := j.svc.PollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	h := j.host(t)
	if h.CurrentPowerState != eim.PowerStateOff || h.PowerStatus != oob.MismatchText || h.PowerStatusIndicator != eim.StatusError {
		t.Fatalf("after drift: got %s %q %s, want OFF, the mismatch, ERROR", h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator)
	}
	if !strings.Contains(j.logs.String(), "power drift") {
		t.Fatal("drift not logged")
	}
	var b eim.BMCView
	_, out := j.do("admin", "GET", bmcPath("a", j.hostA), nil)
	decode(t, out, &b)
	if b.Reachable.Status != "REACHABLE" || fmt.Sprint(b.Capabilities.ResetTypes) != "[ON FORCE_OFF]" || fmt.Sprint(b.Capabilities.BootTargets) != "[PXE]" {
		t.Fatalf("BMC: got %+v, want reachable with its capabilities", b)
	}
	// Back on: the mismatch clears.
	f.mu.Lock()
	f.state = oob.PowerOn
	f.mu.Unlock()
	if err := j.svc.PollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := j.host(t); h.CurrentPowerState != eim.PowerStateOn || h.PowerStatus != "Powered on" {
		t.Fatalf("back on: got %s %q, want ON, Powered on", h.CurrentPowerState, h.PowerStatus)
	}
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
}

// fleet is a driver of one fake BMC per address.
type fleet struct {
	mu sync.Mutex
	m  map[string]*fakeBMC
}

func (p *fleet) Open(_ context.Context, t oob.Target) (oob.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.m[t.Address]
	if f == nil {
		f = newFake(oob.PowerOff)
		p.m[t.Address] = f
	}
	return f, nil
}

// TestSiteLimit: six hosts of a site powered on with a limit of 2 per
// second: never three power-ons within a second, and all end on.
func TestSiteLimit(t *testing.T) {
	e := newEnv(t, "sqlite", t.TempDir()+"/eim.db")
	st := newSite(t, e, 6, func(o *oob.Options) { o.Workers, o.SiteLimit, o.SiteWindow = 6, 2, time.Second })
	st.powerOn(t)
	run(t, st.svc.Work)
	st.waitAll(t, 30*time.Second)
	hosts := st.hosts
	// When each power-on was started: its step's SentAt, stamped as it
	// got a slot (the fake's own times add the calls' latency).
	var at []time.Time
	for _, h := range hosts {
		list, _, err := e.store.ListPowerJobs(t.Context(), "a", h, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, list[0].Steps[0].SentAt.Time)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(at) != 6 {
		t.Fatalf("power-ons: got %d, want 6", len(at))
	}
	// A step's SentAt is stamped after its slot was taken, so a worker
	// descheduled in between (the race detector on two cores) stamps it
	// late: the bounds allow 400 ms of that. Without the limit all six
	// start within a few milliseconds.
	for i := 0; i+2 < len(at); i++ {
		if d := at[i+2].Sub(at[i]); d < 600*time.Millisecond {
			t.Fatalf("power-ons %d..%d within %s, want at most 2 per second", i, i+2, d)
		}
	}
	if d := at[5].Sub(at[0]); d < 1600*time.Millisecond {
		t.Fatalf("six power-ons within %s, want three windows of a second (2 s and more)", d)
	}
}

// TestTakeOverCycleInProgress: a worker that takes over a power cycle
// recorded as sent and finds the machine off sees the cycle's middle, not
// a cycle that failed: a machine that comes back on is confirmed with
// nothing sent; one that stays off past a confirmation wait is powered on.
// Neither is cycled a second time.
func TestTakeOverCycleInProgress(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name    string
			backOn  bool
			on      int
			action  oob.Action
			noteHas string
		}{
			{"comes back on", true, 0, oob.ActionPowerCycle, "confirmed from the BMC's state (on), not sent again"},
			{"stays off", false, 1, oob.ActionOn, "the machine stayed off for 3s: powered on"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newFake(oob.PowerOn)
				f.hang = true
				j := newJobs(t, e, f, nil)
				stopA := run(t, j.svc.Work)
				id := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_POWER_CYCLE"})
				deadline := time.Now().Add(20 * time.Second)
				for f.sent(oob.ActionPowerCycle) == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				stopA()
				// The worker stopped in the cycle's off.
				f.mu.Lock()
				f.hang, f.state = false, oob.PowerOff
				if tc.backOn {
					f.next, f.lag = oob.PowerOn, 10 // ten reads: within the wait
				}
				f.mu.Unlock()
				o := fastOptions(e, f, "process-b")
				o.ConfirmTimeout = 3 * time.Second // ten reads, however slow the machine running the test
				b, err := oob.New(o)
				if err != nil {
					t.Fatal(err)
				}
				run(t, b.Work)
				got := j.wait(t, id, eim.PowerJobSucceeded)
				st := got.Steps[0]
				if c, on := f.sent(oob.ActionPowerCycle), f.sent(oob.ActionOn); c != 1 || on != tc.on {
					t.Fatalf("sent: got %d power cycles and %d power-ons, want 1 and %d; step %+v", c, on, tc.on, st)
				}
				if st.Action != string(tc.action) || !strings.Contains(st.Note, tc.noteHas) || got.Attempts < 2 {
					t.Fatalf("step: got %+v (attempts %d), want action %s, a note with %q, a second attempt", st, got.Attempts, tc.action, tc.noteHas)
				}
				if h := j.host(t); h.CurrentPowerState != eim.PowerStatePowerCycle || h.PowerStatus != "Power cycle successful" {
					t.Fatalf("host: got %s %q, want POWER_CYCLE, Power cycle successful", h.CurrentPowerState, h.PowerStatus)
				}
			})
		}
	})
}
