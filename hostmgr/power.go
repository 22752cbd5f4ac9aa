package hostmgr

import (
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// In-band power control: when no out-of-band controller manages a host
// (bmcKind unspecified or NONE), a desired power state that differs from
// the current one reaches the node as a HostAction in the heartbeat's
// answer. The request is recorded in the host's power status
// ("Reboot requested", with its timestamp), which also names it: the
// action's id is "<kind>-<timestamp>", so a restarted server sends the
// same id and the node does not carry it out twice.
//
// Power states are commands in the original's model: once the node starts
// a reboot, currentPowerState becomes the desired RESET (or POWER_CYCLE)
// and stays so; to reboot again, set desiredPowerState to ON and then RESET
// again. A host that calls home is on: current UNSPECIFIED or OFF become ON.

const (
	powerRebootRequested   = "Reboot requested"
	powerShutdownRequested = "Shutdown requested"
	powerRebooting         = "Rebooting"
	powerOff               = "Powered off"
	powerFailed            = " failed: " // "Reboot failed: …"
	powerUnsupported       = "Not supported without an out-of-band controller: "
)

// inBand reports whether the host module carries out h's power changes.
func inBand(h *eim.Host) bool {
	return h.BmcKind == "" || h.BmcKind == eim.BaremetalControllerKindUnspecified || h.BmcKind == eim.BaremetalControllerKindNone
}

// wanted returns the action kind and its power status texts for h's
// desired power state, or KIND_UNSPECIFIED when there is nothing to do in
// band, and unsupported when the change cannot be made in band.
func wanted(h *eim.Host) (kind hostv1.HostAction_Kind, requested, name string, unsupported bool) {
	d := h.DesiredPowerState
	if d == "" || d == eim.PowerStateUnspecified || d == h.CurrentPowerState {
		return 0, "", "", false
	}
	switch d {
	case eim.PowerStateOn:
		return 0, "", "", false // a node that calls is on; see applyPower
	case eim.PowerStateOff:
		return hostv1.HostAction_KIND_SHUTDOWN, powerShutdownRequested, "Shutdown", false
	case eim.PowerStateReset, eim.PowerStatePowerCycle:
		return hostv1.HostAction_KIND_REBOOT, powerRebootRequested, "Reboot", false
	}
	return 0, "", "", true
}

// actionID names the request recorded at ts.
func actionID(kind hostv1.HostAction_Kind, ts uint64) string {
	k := "reboot"
	if kind == hostv1.HostAction_KIND_SHUTDOWN {
		k = "shutdown"
	}
	return k + "-" + strconv.FormatUint(ts, 10)
}

// applyPower updates h's power fields for a call of its node at now (unix
// seconds) with result r (may be nil). It returns the action to send, the
// host status the call leads to ("" = unchanged) and whether h changed.
func applyPower(h *eim.Host, r *hostv1.ActionResult, now uint64) (act *hostv1.HostAction, status hostStatus, changed bool) {
	if !inBand(h) {
		return nil, hostStatus{}, false
	}
	setPower := func(text string, ind eim.StatusIndication) {
		h.PowerStatus, h.PowerStatusIndicator, h.PowerStatusTimestamp = text, ind, now
		changed = true
	}
	kind, requested, name, unsupported := wanted(h)
	switch {
	case unsupported:
		if text := powerUnsupported + string(h.DesiredPowerState); h.PowerStatus != text {
			setPower(text, eim.StatusError)
		}
		return nil, hostStatus{}, changed
	case kind == 0:
		// Nothing asked. A node that calls is on; leftovers of an
		// earlier request go.
		if h.CurrentPowerState == "" || h.CurrentPowerState == eim.PowerStateUnspecified || h.CurrentPowerState == eim.PowerStateOff {
			h.CurrentPowerState = eim.PowerStateOn
			changed = true
		}
		if ourPowerStatus(h.PowerStatus) && h.PowerStatus != powerRebooting {
			setPower("", eim.StatusUnspecified)
		}
		return nil, hostStatus{}, changed
	}
	if strings.HasPrefix(h.PowerStatus, name+powerFailed) {
		return nil, hostStatus{}, false // failed: wait for a new desired state
	}
	if h.PowerStatus != requested {
		setPower(requested, eim.StatusInProgress)
	}
	id := actionID(kind, h.PowerStatusTimestamp)
	if r == nil || r.Id != id {
		return &hostv1.HostAction{Kind: kind, Id: id}, hostStatus{}, changed
	}
	switch r.State {
	case hostv1.ActionResult_STATE_STARTED:
		h.CurrentPowerState = h.DesiredPowerState
		if kind == hostv1.HostAction_KIND_SHUTDOWN {
			setPower(powerOff, eim.StatusIdle)
			return nil, hostStatus{statusPoweredOff, eim.StatusIdle}, true
		}
		setPower(powerRebooting, eim.StatusInProgress)
		return nil, hostStatus{statusRebooting, eim.StatusInProgress}, true
	case hostv1.ActionResult_STATE_FAILED:
		detail := r.Detail
		if detail == "" {
			detail = "the node gave no reason"
		}
		setPower(name+powerFailed+detail, eim.StatusError)
		return nil, hostStatus{}, true
	}
	return &hostv1.HostAction{Kind: kind, Id: id}, hostStatus{}, changed
}

// ourPowerStatus reports whether a power status is one applyPower writes.
func ourPowerStatus(s string) bool {
	switch s {
	case powerRebootRequested, powerShutdownRequested, powerRebooting, powerOff:
		return true
	}
	return strings.Contains(s, powerFailed) || strings.HasPrefix(s, powerUnsupported)
}
