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

// inBand reports whether the host module carries out the power changes of
// a host whose BMC is of kind k.
func inBand(k eim.BaremetalControllerKind) bool {
	return k == "" || k == eim.BaremetalControllerKindUnspecified || k == eim.BaremetalControllerKindNone
}

// wanted returns the action kind and its power status texts for the
// desired power state d of a host whose current one is current, or
// KIND_UNSPECIFIED when there is nothing to do in band, and unsupported
// when the change cannot be made in band.
func wanted(d, current eim.PowerState) (kind hostv1.HostAction_Kind, requested, name string, unsupported bool) {
	if d == "" || d == eim.PowerStateUnspecified || d == current {
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

// applyPower decides what a call of the node of a host with liveness l at
// now (unix seconds), with result r (may be nil), does to its power. It
// returns the action to send, the host status the call leads to ("" =
// unchanged) and the power to write (nil: unchanged).
func applyPower(l eim.HostLiveness, r *hostv1.ActionResult, now uint64) (act *hostv1.HostAction, status hostStatus, write *eim.HostPower) {
	if !inBand(l.BmcKind) {
		return nil, hostStatus{}, nil
	}
	p, changed := l.Power, false
	setPower := func(text string, ind eim.StatusIndication) {
		p.Status = eim.StatusValue{Text: text, Indicator: ind, Timestamp: now}
		changed = true
	}
	written := func() *eim.HostPower {
		if !changed {
			return nil
		}
		return &p
	}
	kind, requested, name, unsupported := wanted(l.DesiredPowerState, p.Current)
	switch {
	case unsupported:
		if text := powerUnsupported + string(l.DesiredPowerState); p.Status.Text != text {
			setPower(text, eim.StatusError)
		}
		return nil, hostStatus{}, written()
	case kind == 0:
		// Nothing asked. A node that calls is on; leftovers of an
		// earlier request go.
		if p.Current == "" || p.Current == eim.PowerStateUnspecified || p.Current == eim.PowerStateOff {
			p.Current = eim.PowerStateOn
			changed = true
		}
		if ourPowerStatus(p.Status.Text) && p.Status.Text != powerRebooting {
			setPower("", eim.StatusUnspecified)
		}
		return nil, hostStatus{}, written()
	}
	if strings.HasPrefix(p.Status.Text, name+powerFailed) {
		return nil, hostStatus{}, nil // failed: wait for a new desired state
	}
	if p.Status.Text != requested {
		setPower(requested, eim.StatusInProgress)
	}
	id := actionID(kind, p.Status.Timestamp)
	if r == nil || r.Id != id {
		return &hostv1.HostAction{Kind: kind, Id: id}, hostStatus{}, written()
	}
	switch r.State {
	case hostv1.ActionResult_STATE_STARTED:
		p.Current = l.DesiredPowerState
		if kind == hostv1.HostAction_KIND_SHUTDOWN {
			setPower(powerOff, eim.StatusIdle)
			return nil, hostStatus{statusPoweredOff, eim.StatusIdle}, written()
		}
		setPower(powerRebooting, eim.StatusInProgress)
		return nil, hostStatus{statusRebooting, eim.StatusInProgress}, written()
	case hostv1.ActionResult_STATE_FAILED:
		detail := r.Detail
		if detail == "" {
			detail = "the node gave no reason"
		}
		setPower(name+powerFailed+detail, eim.StatusError)
		return nil, hostStatus{}, written()
	}
	return &hostv1.HostAction{Kind: kind, Id: id}, hostStatus{}, written()
}

// ourPowerStatus reports whether a power status is one applyPower writes.
func ourPowerStatus(s string) bool {
	switch s {
	case powerRebootRequested, powerShutdownRequested, powerRebooting, powerOff:
		return true
	}
	return strings.Contains(s, powerFailed) || strings.HasPrefix(s, powerUnsupported)
}
