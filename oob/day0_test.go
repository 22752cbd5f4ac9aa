package oob_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/oob"
)

// Network-boot jobs (Day 0 through the BMC, oob/day0.go) on the fake BMC;
// the real ones (ipmi_sim and the Redfish test BMC driving a VM) are in
// cmd/eim's TestVMDay0BMC.

// addInstance gives project a's host an instance to provision.
func (e *env) addInstance(t *testing.T, host string) *eim.Instance {
	t.Helper()
	in := &eim.Instance{Name: "os-of-" + host, Kind: eim.InstanceKindMetal, HostID: host}
	if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error { return tx.Create(t.Context(), in) }); err != nil {
		t.Fatal(err)
	}
	return in
}

// callHome writes what the micro-OS's provisioning writes when the node
// calls home: its instance's provisioning status, in a second after the
// job's power action.
func (j *jobs) callHome(t *testing.T, in *eim.Instance, after time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Unix() <= after.Unix() {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not pass the power action's second")
		}
		time.Sleep(10 * time.Millisecond) // the next second of the clock: status timestamps are in seconds
	}
	err := j.store.Update(t.Context(), "a", func(tx eim.Tx) error {
		r, err := tx.Get(t.Context(), eim.KindInstance, in.ResourceID)
		if err != nil {
			return err
		}
		return inventory.SetProvisioningStatus(t.Context(), tx, r.(*eim.Instance), inventory.StatusAt("Provisioning In Progress: 1/7", eim.StatusInProgress, time.Now()))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitStep polls the job until it is at step i (RUNNING), or fails.
func (j *jobs) waitStep(t *testing.T, id string, i int) *eim.PowerJob {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := j.store.GetPowerJob(t.Context(), "a", j.hostA, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Step >= i && got.State == eim.PowerJobRunning {
			return got
		}
		if got.State.Ended() || time.Now().After(deadline) {
			t.Fatalf("job %s: %s at step %d (%s), want RUNNING at step %d; steps %+v", id, got.State, got.Step, got.LastError, i, got.Steps)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace
	}
}

func stepKinds(j *eim.PowerJob) string {
	var k []string
	for _, s := range j.Steps {
		k = append(k, s.Kind)
	}
	return strings.Join(k, ",")
}

// TestNetbootPowersOnAndClears: a machine that is off gets a one-time PXE
// boot, is powered on, and once its node has called home the override is
// cleared and read back; the job succeeds and the host asks to be on.
func TestNetbootPowersOnAndClears(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, nil)
		in := e.addInstance(t, e.hostA)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "network"})
		got := j.waitStep(t, id, 2)
		if k := stepKinds(got); k != "SET_BOOT,BOOT_POWER,CALL_HOME,CLEAR_BOOT" {
			t.Fatalf("steps %s, want SET_BOOT,BOOT_POWER,CALL_HOME,CLEAR_BOOT", k)
		}
		if f.sent(oob.ActionOn) != 1 || f.sent(oob.ActionReset) != 0 {
			t.Fatalf("sends %v, want one power-on", f.sends)
		}
		if got.Steps[1].Action != string(oob.ActionOn) {
			t.Fatalf("BOOT_POWER chose %q, want ON for a machine that is off", got.Steps[1].Action)
		}
		// Not done before the node calls home, though the BMC says on.
		if got.State.Ended() {
			t.Fatalf("job ended (%s) before the node called home", got.State)
		}
		j.callHome(t, in, got.Steps[1].SentAt.Time)
		done := j.wait(t, id, eim.PowerJobSucceeded)
		if !strings.Contains(done.Steps[2].Note, "provisioning status") {
			t.Errorf("CALL_HOME note %q, want what showed the call-home", done.Steps[2].Note)
		}
		f.mu.Lock()
		boots := append([]oob.Boot(nil), f.boots...)
		f.mu.Unlock()
		if len(boots) != 2 || boots[0] != (oob.Boot{Target: oob.BootPXE, Once: true}) || boots[1].Target != oob.BootNone {
			t.Fatalf("overrides set %+v, want a one-time PXE, then none", boots)
		}
		if h := j.host(t); h.DesiredPowerState != eim.PowerStateOn || h.CurrentPowerState != eim.PowerStateOn {
			t.Errorf("host desired %s current %s, want ON and ON", h.DesiredPowerState, h.CurrentPowerState)
		}
	})
}

// TestNetbootResetsARunningMachine: a machine that is on is reset (not
// powered on), and HTTP boot with EIM's URL is used when the BMC lists it.
func TestNetbootResetsARunningMachine(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		const url = "http://10.0.0.1:8080/boot/ipxe.efi"
		j := newJobs(t, e, f, func(o *oob.Options) { o.HTTPBootURL = url })
		caps := &eim.BMCCapabilities{ResetTypes: []string{"ON", "RESET"}, BootTargets: []string{"PXE", "HTTP"}}
		if err := e.store.RecordBMCFound(t.Context(), "a", e.hostA, caps, eim.BMCReachable{Status: "REACHABLE", CheckedAt: eim.NewTime(time.Now())}); err != nil {
			t.Fatal(err)
		}
		in := e.addInstance(t, e.hostA)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "NETWORK", "desiredPowerState": "POWER_STATE_ON"})
		got := j.waitStep(t, id, 2)
		if f.sent(oob.ActionReset) != 1 || f.sent(oob.ActionOn) != 0 {
			t.Fatalf("sends %v, want one reset", f.sends)
		}
		j.callHome(t, in, got.Steps[1].SentAt.Time)
		j.wait(t, id, eim.PowerJobSucceeded)
		f.mu.Lock()
		first := f.boots[0]
		f.mu.Unlock()
		if first != (oob.Boot{Target: oob.BootHTTP, Once: true, UEFI: true, URL: url}) {
			t.Fatalf("override %+v, want a one-time UEFI HTTP boot from %s", first, url)
		}
	})
}

// TestNetbootNoCallHome: a node that never calls home fails the job by
// the call-home timeout, naming it, and the override is cleared anyway.
func TestNetbootNoCallHome(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, func(o *oob.Options) { o.CallHomeTimeout = 500 * time.Millisecond })
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "NETWORK"})
		got := j.wait(t, id, eim.PowerJobFailed)
		if !strings.Contains(got.LastError, "did not call home within 500ms") || !strings.Contains(got.LastError, "boot override was cleared") {
			t.Fatalf("lastError %q, want the call-home timeout and the override cleared", got.LastError)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.boot.Target != oob.BootNone {
			t.Fatalf("override left %+v, want none", f.boot)
		}
	})
}

// TestDay0StartsByItself: a registered host with an instance and a BMC,
// asking to be on (new hosts do), gets a network-boot job from the change
// feed; one without an instance gets a plain power-on.
func TestDay0StartsByItself(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, nil)
		// hostA2 has no instance: a plain power-on.
		if code, body := e.do("admin", "PUT", bmcPath("a", e.hostA2), map[string]any{"protocol": "IPMI", "address": "127.0.0.1:9624", "username": "admin", "password": "ipmi-pass-1"}); code != 200 {
			t.Fatalf("PUT bmc: %d %s", code, body)
		}
		for _, h := range []string{e.hostA, e.hostA2} {
			if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error {
				return inventory.SetDesiredPower(t.Context(), tx, &eim.Host{Meta: eim.Meta{ResourceID: h}}, eim.PowerStateOn)
			}); err != nil {
				t.Fatal(err)
			}
		}
		e.addInstance(t, e.hostA)
		run(t, j.svc.Follow)
		latest := func(host string) *eim.PowerJob {
			deadline := time.Now().Add(20 * time.Second)
			for {
				jobs, _, err := e.store.ListPowerJobs(t.Context(), "a", host, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) > 0 {
					return jobs[0]
				}
				if time.Now().After(deadline) {
					t.Fatalf("no job for %s", host)
				}
				time.Sleep(10 * time.Millisecond) // a poll's pace
			}
		}
		if got := latest(e.hostA); !oob.IsNetboot(got) || got.Desired != eim.PowerStateOn {
			t.Errorf("host with an instance: job %s for %s, want a network boot for ON", stepKinds(got), got.Desired)
		}
		if got := latest(e.hostA2); oob.IsNetboot(got) || stepKinds(got) != "POWER" {
			t.Errorf("host without an instance: job %s, want a plain power-on", stepKinds(got))
		}
		// Once: the Day 0 job is not asked again while it is there.
		n, _, _ := e.store.ListPowerJobs(t.Context(), "a", e.hostA, 20, 0)
		if err := j.svc.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Another event of the host (its BMC moved): no second Day 0.
		if code, body := e.do("admin", "PUT", bmcPath("a", e.hostA), map[string]any{"protocol": "IPMI", "address": "127.0.0.2:9623", "username": "admin"}); code != 200 {
			t.Fatalf("PUT bmc: %d %s", code, body)
		}
		time.Sleep(300 * time.Millisecond) // the feed's pace: a second job would have come by now
		if m, _, _ := e.store.ListPowerJobs(t.Context(), "a", e.hostA, 20, 0); len(m) != len(n) {
			t.Errorf("jobs of the host: %d, then %d after another event: Day 0 asked twice", len(n), len(m))
		}
	})
}

// TestNetbootBadRequests: a network boot leaves the machine on, and is
// always once.
func TestNetbootBadRequests(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		newJobs(t, e, newFake(oob.PowerOff), nil)
		path := bmcPath("a", e.hostA) + "/jobs"
		e.want("admin", "POST", path, map[string]any{"boot": "NETWORK", "desiredPowerState": "POWER_STATE_OFF"}, 400, "desiredPowerState")
		e.want("admin", "POST", path, map[string]any{"boot": "NETWORK", "bootOnce": true}, 400, "bootOnce")
		e.want("admin", "POST", bmcPath("a", e.hostA2)+"/jobs", map[string]any{"boot": "NETWORK"}, 404)
		e.want("admin", "POST", bmcPath("b", e.hostA)+"/jobs", map[string]any{"boot": "NETWORK"}, 404)
		// A host being deleted is not booted for provisioning.
		if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error {
			return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: e.hostA}, DesiredState: eim.HostStateDeleted}, "desiredState")
		}); err != nil {
			t.Fatal(err)
		}
		e.want("admin", "POST", path, map[string]any{"boot": "NETWORK"}, 409, "HOST_STATE_DELETED")
	})
}

// TestNetbootTakenOver: the process of a network-boot job that reset a
// running machine dies while it waits for the node; another takes the job
// over after the lease, does not reset the machine again (the step's
// action was recorded), waits for the call-home from the first send, and
// clears the override.
func TestNetbootTakenOver(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, nil)
		in := e.addInstance(t, e.hostA)
		stopA := run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "NETWORK"})
		got := j.waitStep(t, id, 2)
		stopA()
		b, err := oob.New(fastOptions(e, f, "process-b"))
		if err != nil {
			t.Fatal(err)
		}
		run(t, b.Work)
		j.callHome(t, in, got.Steps[1].SentAt.Time)
		done := j.wait(t, id, eim.PowerJobSucceeded)
		if f.sent(oob.ActionReset) != 1 || f.sent(oob.ActionOn) != 0 || done.Attempts < 2 {
			t.Fatalf("sends %v, attempts %d: want one reset, the job taken over", f.sends, done.Attempts)
		}
		if !done.Steps[1].SentAt.Equal(got.Steps[1].SentAt.Time) {
			t.Errorf("BOOT_POWER sent at %v, then %v: want the one send", got.Steps[1].SentAt, done.Steps[1].SentAt)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.boot.Target != oob.BootNone {
			t.Fatalf("override left %+v, want none", f.boot)
		}
	})
}

// TestReprovisionBootsThroughBMC: a provisioning workflow retried (attempt
// 2, PENDING again: `eim instance reprovision`) of a host with a BMC that
// asks to be on gets a network-boot job, once for the attempt; a first
// attempt, and a retried workflow its node took up already, get none.
func TestReprovisionBootsThroughBMC(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, nil)
		in := e.addInstance(t, e.hostA)
		// The host is onboarded (its Day 0 is done): only the retry asks.
		if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error {
			r, err := tx.Get(t.Context(), eim.KindHost, e.hostA)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			if err := tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, DesiredState: eim.HostStateOnboarded}, "desiredState"); err != nil {
				return err
			}
			h.DesiredState = eim.HostStateOnboarded
			if err := inventory.SetDesiredPower(t.Context(), tx, h, eim.PowerStateOn); err != nil {
				return err
			}
			// Onboarding's credentials, as its Discover writes them.
			return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, NodeSecretHash: strings.Repeat("ab", 32),
				NodeCredGen: h.NodeCredGen + 1, CurrentState: eim.HostStateOnboarded, OnboardingStatus: "Onboarded", OnboardingStatusIndicator: eim.StatusIdle,
				OnboardingStatusTimestamp: uint64(time.Now().Unix())},
				"node_secret_hash", "node_cred_gen", "currentState", "onboardingStatus", "onboardingStatusIndicator", "onboardingStatusTimestamp")
		}); err != nil {
			t.Fatal(err)
		}
		run(t, j.svc.Follow)
		wf := &eim.Workflow{InstanceID: in.ResourceID, HostID: e.hostA, Attempt: 1, State: eim.WorkflowFailed, StartedAt: eim.NewTime(time.Now())}
		if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error { return tx.Create(t.Context(), wf) }); err != nil {
			t.Fatal(err)
		}
		save := func(state eim.WorkflowState, attempt int) {
			t.Helper()
			if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error {
				r, err := tx.Get(t.Context(), eim.KindWorkflow, wf.ResourceID)
				if err != nil {
					return err
				}
				w := r.(*eim.Workflow)
				w.State, w.Attempt, w.StartedAt = state, attempt, eim.NewTime(time.Now())
				return inventory.SaveWorkflow(t.Context(), tx, w)
			}); err != nil {
				t.Fatal(err)
			}
		}
		netboots := func() int {
			jobs, _, err := e.store.ListPowerJobs(t.Context(), "a", e.hostA, 20, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, j := range jobs {
				if oob.IsNetboot(j) {
					n++
				}
			}
			return n
		}
		// A first attempt failing and pending: no job.
		save(eim.WorkflowPending, 1)
		time.Sleep(300 * time.Millisecond) // the feed's pace: a job would have come by now
		if n := netboots(); n != 0 {
			t.Fatalf("a first attempt: %d network-boot jobs, want none", n)
		}
		// A retry: one job.
		save(eim.WorkflowFailed, 1)
		save(eim.WorkflowPending, 2)
		deadline := time.Now().Add(20 * time.Second)
		for netboots() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no network-boot job after the retry")
			}
			time.Sleep(10 * time.Millisecond) // a poll's pace
		}
		// The node takes it up: no second job for the attempt.
		save(eim.WorkflowRunning, 2)
		time.Sleep(300 * time.Millisecond) // the feed's pace
		if n := netboots(); n != 1 {
			t.Fatalf("after the retry: %d network-boot jobs, want 1", n)
		}
	})
}

// TestNetbootCancelledClears: a network-boot job cancelled while it waits
// for the node clears the override it set.
func TestNetbootCancelledClears(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, nil)
		run(t, j.svc.Work)
		id := j.post(t, map[string]any{"boot": "NETWORK"})
		j.waitStep(t, id, 2)
		e.want("admin", "POST", bmcPath("a", e.hostA)+"/jobs/"+id+"/cancel", nil, 200, "CANCELLED")
		deadline := time.Now().Add(20 * time.Second)
		for {
			f.mu.Lock()
			b := f.boot
			f.mu.Unlock()
			if b.Target == oob.BootNone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("override %+v after the cancel, want none", b)
			}
			time.Sleep(10 * time.Millisecond) // a poll's pace
		}
	})
}
