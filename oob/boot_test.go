package oob_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// TestResetConfirmedByNewBoot: a RESET or POWER_CYCLE of a host whose
// agent is connected is done when the agent reports a new boot, not when
// the BMC says on (it says on at once); without a connected agent the
// BMC's state confirms it as before; a new boot not reported within the
// call-home timeout counts the BMC's on as done, noted, and the action
// is never sent twice.
func TestResetConfirmedByNewBoot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		desired  string
		status   string // the host's status (its agent connected, or not)
		reboot   bool   // the agent reports a new boot after the send
		wantBoot string // the step's recorded boot
		wantNote string
	}{
		{"reset, agent reboots", "POWER_STATE_RESET", "Running", true, "boot-1", "a new boot reported by the host's agent"},
		{"power cycle, agent reboots", "POWER_STATE_POWER_CYCLE", "Running", true, "boot-1", "a new boot reported by the host's agent"},
		{"reset, agent silent", "POWER_STATE_RESET", "Running", false, "boot-1", "no new boot reported by the host's agent within"},
		{"reset, no connection", "POWER_STATE_RESET", "No Connection", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engines(t, func(t *testing.T, e *env) {
				f := newFake(oob.PowerOn)
				callHome := time.Minute
				if !tc.reboot {
					callHome = 500 * time.Millisecond
				}
				j := newJobs(t, e, f, func(o *oob.Options) { o.CallHomeTimeout = callHome })
				if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error {
					return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: e.hostA}, HostStatus: tc.status, BootID: "boot-1"}, "hostStatus", "boot_id")
				}); err != nil {
					t.Fatal(err)
				}
				run(t, j.svc.Work)
				id := j.post(t, map[string]any{"desiredPowerState": tc.desired})
				if tc.reboot {
					// The action is sent and the BMC reports on at once; the
					// job waits for the new boot.
					deadline := time.Now().Add(20 * time.Second)
					for {
						got, err := e.store.GetPowerJob(t.Context(), "a", e.hostA, id)
						if err != nil {
							t.Fatal(err)
						}
						if got.State.Ended() {
							t.Fatalf("job %s before the new boot, want it waiting for it; steps %+v", got.State, got.Steps)
						}
						if got.Steps[0].Sends == 1 && got.Steps[0].BootID == "boot-1" {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("job not sent: %+v", got)
						}
						time.Sleep(10 * time.Millisecond) // a poll's pace, not a wait for an event
					}
					// The node's heartbeat of its new boot, as the host
					// module records it.
					if _, err := e.store.HostBeats(nil).RecordBeat(t.Context(), "a", e.hostA, func(eim.HostLiveness) eim.LivenessChange {
						boot := "boot-2"
						return eim.LivenessChange{BootID: &boot}
					}); err != nil {
						t.Fatal(err)
					}
				}
				got := j.wait(t, id, eim.PowerJobSucceeded)
				st := got.Steps[0]
				if st.BootID != tc.wantBoot || !st.Done || !strings.Contains(st.Note, tc.wantNote) {
					t.Fatalf("step: got boot %q, done %v, note %q; want boot %q, done, a note with %q", st.BootID, st.Done, st.Note, tc.wantBoot, tc.wantNote)
				}
				if tc.wantNote == "" && strings.Contains(st.Note, "boot") {
					t.Fatalf("step note %q, want none about boots (no agent connected)", st.Note)
				}
				if n := f.sent(oob.ActionReset) + f.sent(oob.ActionPowerCycle); n != 1 {
					t.Fatalf("resets and power cycles sent: got %d, want 1", n)
				}
			})
		})
	}
}

// TestPowerCycleLeftOff: a BMC whose power cycle turns the machine off
// and never on again (a chassis whose power-on failed) gets a power-on:
// the job ends with the machine on, not with a second cycle of an off
// machine.
func TestPowerCycleLeftOff(t *testing.T) {
	f := newFake(oob.PowerOn)
	f.cycleOff = true
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, nil)
	run(t, j.svc.Work)
	id := j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_POWER_CYCLE"})
	got := j.wait(t, id, eim.PowerJobSucceeded)
	st := got.Steps[0]
	if st.Action != string(oob.ActionOn) || !st.Done || !strings.Contains(st.Note, "the power cycle left the machine off") {
		t.Fatalf("step: got %+v, want the cycle turned into a power-on, noted", st)
	}
	if c, on := f.sent(oob.ActionPowerCycle), f.sent(oob.ActionOn); c != 1 || on != 1 {
		t.Fatalf("sent: got %d power cycles and %d power-ons, want 1 and 1", c, on)
	}
	if h := j.host(t); h.CurrentPowerState != eim.PowerStatePowerCycle || h.PowerStatus != "Power cycle successful" {
		t.Fatalf("host: got %s %q, want POWER_CYCLE, Power cycle successful", h.CurrentPowerState, h.PowerStatus)
	}
}
