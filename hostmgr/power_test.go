package hostmgr_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// desiredPowerState RESET reaches the node as a reboot, the same id until
// the node starts it; then the host is "Rebooting", current RESET, and no
// action is sent. A host that does not come back within the reboot timeout
// is "No Connection"; one that comes back is "Running".
func TestReboot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.beat(e.svc, h, nil)
		e.edit(h.ResourceID, func(h *eim.Host) { h.DesiredPowerState = eim.PowerStateReset })
		// No feed watcher here: a fresh service reads the host at once.
		svc := newService(e)
		a := e.beat(svc, h, nil).Action
		if a.GetKind() != hostv1.HostAction_KIND_REBOOT || !strings.HasPrefix(a.GetId(), "reboot-") {
			t.Fatalf("action %v, want a reboot", a)
		}
		got := e.getHost(h.ResourceID)
		if got.PowerStatus != "Reboot requested" || got.PowerStatusIndicator != eim.StatusInProgress {
			t.Fatalf("power status %q %s, want Reboot requested", got.PowerStatus, got.PowerStatusIndicator)
		}
		e.clock.Add(10 * time.Second)
		if again := e.beat(svc, h, nil).Action; again.GetId() != a.Id {
			t.Fatalf("second answer %v, want the same action %s", again, a.Id)
		}
		// The id survives a restart of the server.
		if again := e.beat(newService(e), h, nil).Action; again.GetId() != a.Id {
			t.Fatalf("after a restart %v, want the same action %s", again, a.Id)
		}
		resp := e.beat(svc, h, &hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: a.Id, State: hostv1.ActionResult_STATE_STARTED}})
		if resp.Action != nil {
			t.Fatalf("after the node started it: action %v, want none", resp.Action)
		}
		got = e.wantStatus(h.ResourceID, "Rebooting", eim.StatusInProgress)
		if got.CurrentPowerState != eim.PowerStateReset || got.PowerStatus != "Rebooting" {
			t.Fatalf("current power %s, status %q; want RESET, Rebooting", got.CurrentPowerState, got.PowerStatus)
		}
		// Silence during the reboot is not "No Connection"…
		e.clock.Add(5 * time.Minute)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Rebooting", eim.StatusInProgress)
		// …until the reboot timeout.
		e.clock.Add(11 * time.Minute)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
		// Back: running, and no new reboot (current is RESET).
		if resp := e.beat(svc, h, nil); resp.Action != nil {
			t.Fatalf("back from the reboot: action %v, want none", resp.Action)
		}
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
	})
}

// desiredPowerState OFF reaches the node as a shutdown; once it starts,
// the host is "Powered Off" and its silence is expected. A node that is on
// again reports current ON.
func TestShutdown(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(func(h *eim.Host) { h.DesiredPowerState = eim.PowerStateOff })
		a := e.beat(e.svc, h, nil).Action
		if a.GetKind() != hostv1.HostAction_KIND_SHUTDOWN {
			t.Fatalf("action %v, want a shutdown", a)
		}
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: a.Id, State: hostv1.ActionResult_STATE_STARTED}})
		got := e.wantStatus(h.ResourceID, "Powered Off", eim.StatusIdle)
		if got.CurrentPowerState != eim.PowerStateOff || got.PowerStatus != "Powered off" {
			t.Fatalf("current %s, power status %q; want OFF, Powered off", got.CurrentPowerState, got.PowerStatus)
		}
		e.clock.Add(time.Hour)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Powered Off", eim.StatusIdle)
		// Someone powers it on and sets desired ON.
		e.edit(h.ResourceID, func(h *eim.Host) { h.DesiredPowerState = eim.PowerStateOn })
		if resp := e.beat(newService(e), h, nil); resp.Action != nil {
			t.Fatalf("desired ON: action %v, want none", resp.Action)
		}
		got = e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		if got.CurrentPowerState != eim.PowerStateOn || got.PowerStatus != "" {
			t.Fatalf("current %s, power status %q; want ON and no power status", got.CurrentPowerState, got.PowerStatus)
		}
	})
}

// A failed action is recorded and not sent again until the desired state
// changes; states a node cannot reach in band are an error; hosts with an
// out-of-band controller get no in-band actions.
func TestPowerEdges(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(func(h *eim.Host) { h.DesiredPowerState = eim.PowerStatePowerCycle })
		a := e.beat(e.svc, h, nil).Action
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: a.GetId(), State: hostv1.ActionResult_STATE_FAILED, Detail: "systemctl: access denied"}})
		got := e.getHost(h.ResourceID)
		if got.PowerStatus != "Reboot failed: systemctl: access denied" || got.PowerStatusIndicator != eim.StatusError {
			t.Fatalf("power status %q %s, want the failure", got.PowerStatus, got.PowerStatusIndicator)
		}
		if resp := e.beat(e.svc, h, nil); resp.Action != nil {
			t.Fatalf("after a failure: action %v, want none", resp.Action)
		}
		// A result for an id that is not pending changes nothing.
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: "reboot-1", State: hostv1.ActionResult_STATE_STARTED}})
		if got := e.getHost(h.ResourceID); got.CurrentPowerState == eim.PowerStatePowerCycle {
			t.Fatal("a stale action id changed the current power state")
		}

		sleepy := e.host(func(h *eim.Host) { h.DesiredPowerState = eim.PowerStateSleep })
		if resp := e.beat(e.svc, sleepy, nil); resp.Action != nil {
			t.Fatalf("SLEEP: action %v, want none", resp.Action)
		}
		if got := e.getHost(sleepy.ResourceID); !strings.Contains(got.PowerStatus, "out-of-band") || got.PowerStatusIndicator != eim.StatusError {
			t.Fatalf("SLEEP: power status %q %s, want an error about out-of-band control", got.PowerStatus, got.PowerStatusIndicator)
		}

		bmc := e.host(func(h *eim.Host) { h.DesiredPowerState = eim.PowerStateReset })
		e.edit(bmc.ResourceID, func(h *eim.Host) { h.BmcKind = "BAREMETAL_CONTROLLER_KIND_VPRO" })
		if resp := e.beat(newService(e), bmc, nil); resp.Action != nil {
			t.Fatalf("vPro host: action %v, want none (out of band)", resp.Action)
		}
	})
}
