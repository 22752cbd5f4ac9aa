package oob_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// beat records a call of hostA's node as the host module does (through
// eim.HostBeats): its status, and the boot it reports.
func (j *jobs) beat(t *testing.T, status, boot string) {
	t.Helper()
	ctx := eim.WithActor(t.Context(), eim.ModuleActor("host"))
	if _, err := j.store.HostBeats(nil).RecordBeat(ctx, "a", j.hostA, func(l eim.HostLiveness) eim.LivenessChange {
		var ch eim.LivenessChange
		if l.Status.Text != status {
			ch.Status = &eim.StatusValue{Text: status, Indicator: eim.StatusIdle, Timestamp: uint64(time.Now().Unix())}
		}
		if l.BootID != boot {
			ch.BootID = &boot
		}
		return ch
	}); err != nil {
		t.Fatal(err)
	}
}

// silent flags hostA "No Connection" as the host module does, dated when
// its node was last heard from.
func (j *jobs) silent(t *testing.T, heard time.Time) {
	t.Helper()
	ctx := eim.WithActor(t.Context(), eim.ModuleActor("host"))
	if _, err := j.store.HostBeats(nil).RecordSilence(ctx, "a", j.hostA, func(l eim.HostLiveness) eim.LivenessChange {
		return eim.LivenessChange{Status: &eim.StatusValue{Text: "No Connection", Indicator: eim.StatusError, Timestamp: uint64(heard.Unix())}}
	}); err != nil {
		t.Fatal(err)
	}
}

// until polls hostA until ok, for up to 20 s.
func (j *jobs) until(t *testing.T, what string, ok func(h *eim.Host) bool) *eim.Host {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := j.host(t)
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: host shows %s %q (%s), status %q; log:\n%s", what, h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator, h.HostStatus, j.logs.String())
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace
	}
}

// logged waits until the log has text n times, for up to 20 s.
func (j *jobs) logged(t *testing.T, text string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(j.logs.String(), text) < n {
		if time.Now().After(deadline) {
			t.Fatalf("not logged %d times: %q; log:\n%s", n, text, j.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setFake sets the fake BMC's power state.
func setFake(f *fakeBMC, s oob.PowerState) {
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
}

// TestDriftSeenByAgent: the host's own writes in the change feed (its
// status and boot, as its agent's calls change them) show a machine
// switched off or on behind EIM's back before the next poll (which runs
// hourly here): a host going "No Connection" has its BMC read at once
// (policy REPORT); an agent calling again (its status back to Running,
// or a new boot before its silence was noticed) corrects a recorded OFF
// at once, confirmed by its BMC; a BMC that says OFF while the agent
// calls is a finding the poll does not overwrite.
func TestDriftSeenByAgent(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, nil)
		run(t, j.svc.Work)
		j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobSucceeded)
		j.beat(t, "Running", "boot-1")
		run(t, j.svc.Follow)
		isOff := func(h *eim.Host) bool {
			return h.CurrentPowerState == eim.PowerStateOff && h.PowerStatus == oob.MismatchText
		}
		isOn := func(h *eim.Host) bool {
			return h.CurrentPowerState == eim.PowerStateOn && h.PowerStatus == "Powered on" && h.PowerStatusIndicator == eim.StatusIdle
		}

		// Switched off behind EIM's back: its agent goes silent, and its
		// BMC is read at once.
		setFake(f, oob.PowerOff)
		j.silent(t, time.Now().Add(-time.Minute))
		h := j.until(t, "off, read when the host lost its connection", isOff)
		j.logged(t, "host lost its connection: reading its BMC", 1)

		// Switched on behind EIM's back: its agent calls again (a boot
		// takes longer than the second the timestamps count in).
		setFake(f, oob.PowerOn)
		for uint64(time.Now().Unix()) <= h.PowerStatusTimestamp {
			time.Sleep(10 * time.Millisecond)
		}
		j.beat(t, "Running", "boot-2")
		j.until(t, "on, corrected by the agent's call", isOn)
		j.logged(t, "host's agent reports it running while its power was recorded off", 1)

		// Off and on again before its silence was noticed: the poll saw
		// the off, the agent's new boot shows the on.
		const watching = "a new boot will be a machine switched on"
		offWhileRunning := func(n int) {
			setFake(f, oob.PowerOff)
			if err := j.svc.PollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			j.until(t, "off, as the poll read it", isOff)
			j.logged(t, watching, n) // the follower saw the off
		}
		offWhileRunning(1)
		setFake(f, oob.PowerOn)
		j.beat(t, "Running", "boot-3")
		j.until(t, "on, corrected by the agent's new boot", isOn)

		// The BMC says off while the agent calls: a finding, which the
		// poll leaves shown while the agent runs.
		offWhileRunning(2)
		j.beat(t, "Running", "boot-4")
		finding := func(h *eim.Host) bool {
			return h.CurrentPowerState == eim.PowerStateOn && h.PowerStatus == oob.BMCDisagreesText && h.PowerStatusIndicator == eim.StatusError
		}
		j.until(t, "the BMC's off shown as a finding", finding)
		j.logged(t, "check the BMC's address and systemId", 1)
		if err := j.svc.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h := j.host(t); !finding(h) {
			t.Fatalf("after a poll: got %s %q, want the finding kept while the agent runs", h.CurrentPowerState, h.PowerStatus)
		}
		// The agent goes silent: the BMC's off stands.
		j.silent(t, time.Now())
		j.until(t, "off once the agent is silent", isOff)
		if n := len(j.jobsOf(t)); n != 1 {
			t.Fatalf("got %d jobs, want the first only (policy REPORT)", n)
		}
	})
}
