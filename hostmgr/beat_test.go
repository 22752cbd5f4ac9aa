package hostmgr

import (
	"reflect"
	"testing"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// applyBeat is the heartbeat's decision: what a heartbeat changes of its
// host's liveness, and the action it sends back.
func TestApplyBeat(t *testing.T) {
	const now, asked = 1700000900, 1700000000
	running := eim.StatusValue{Text: statusRunning, Indicator: eim.StatusIdle, Timestamp: 1700000100}
	on := eim.HostPower{Current: eim.PowerStateOn}
	host := func(f func(*eim.HostLiveness)) eim.HostLiveness {
		l := eim.HostLiveness{ID: "host-0000abcd", Project: "p", Status: running, Power: on, BmcKind: eim.BaremetalControllerKindNone}
		if f != nil {
			f(&l)
		}
		return l
	}
	status := func(text string, ind eim.StatusIndication) *eim.StatusValue {
		return &eim.StatusValue{Text: text, Indicator: ind, Timestamp: now}
	}
	power := func(cur eim.PowerState, text string, ind eim.StatusIndication, ts uint64) *eim.HostPower {
		return &eim.HostPower{Current: cur, Status: eim.StatusValue{Text: text, Indicator: ind, Timestamp: ts}}
	}
	healthy := &hostv1.HeartbeatRequest{}
	unhealthy := &hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{State: hostv1.Health_STATE_UNHEALTHY, Detail: "disk full"}}
	result := func(id string, st hostv1.ActionResult_State, detail string) *hostv1.HeartbeatRequest {
		return &hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: id, State: st, Detail: detail}}
	}
	reboot := func(l *eim.HostLiveness) { l.DesiredPowerState = eim.PowerStateReset }
	requested := func(l *eim.HostLiveness) {
		reboot(l)
		l.Power.Status = eim.StatusValue{Text: powerRebootRequested, Indicator: eim.StatusInProgress, Timestamp: asked}
	}
	for _, tc := range []struct {
		name string
		l    eim.HostLiveness
		m    *hostv1.HeartbeatRequest
		act  *hostv1.HostAction
		want eim.LivenessChange
	}{
		{"running and healthy: nothing", host(nil), healthy, nil, eim.LivenessChange{}},
		{"first heartbeat", host(func(l *eim.HostLiveness) { l.Status = eim.StatusValue{Text: statusNotConnected} }), healthy, nil,
			eim.LivenessChange{Status: status(statusRunning, eim.StatusIdle)}},
		{"back from No Connection", host(func(l *eim.HostLiveness) {
			l.Status = eim.StatusValue{Text: statusNoConnection, Indicator: eim.StatusError}
		}), healthy, nil,
			eim.LivenessChange{Status: status(statusRunning, eim.StatusIdle)}},
		{"unhealthy node", host(nil), unhealthy, nil,
			eim.LivenessChange{Status: status("Error: node unhealthy: disk full", eim.StatusError)}},
		{"another module's status stays", host(func(l *eim.HostLiveness) { l.Status = eim.StatusValue{Text: "Invalidated", Indicator: eim.StatusError} }), unhealthy, nil,
			eim.LivenessChange{}},
		{"a node that calls is on", host(func(l *eim.HostLiveness) { l.Power.Current = eim.PowerStateOff }), healthy, nil,
			eim.LivenessChange{Power: &eim.HostPower{Current: eim.PowerStateOn}}},
		{"reboot asked: requested, and sent", host(reboot), healthy,
			&hostv1.HostAction{Kind: hostv1.HostAction_KIND_REBOOT, Id: "reboot-1700000900"},
			eim.LivenessChange{Power: power(eim.PowerStateOn, powerRebootRequested, eim.StatusInProgress, now)}},
		{"reboot requested: sent again, nothing written", host(requested), healthy,
			&hostv1.HostAction{Kind: hostv1.HostAction_KIND_REBOOT, Id: "reboot-1700000000"}, eim.LivenessChange{}},
		{"reboot started", host(requested), result("reboot-1700000000", hostv1.ActionResult_STATE_STARTED, ""), nil,
			eim.LivenessChange{Power: power(eim.PowerStateReset, powerRebooting, eim.StatusInProgress, now), Status: status(statusRebooting, eim.StatusInProgress)}},
		{"reboot failed", host(requested), result("reboot-1700000000", hostv1.ActionResult_STATE_FAILED, "busy"), nil,
			eim.LivenessChange{Power: power(eim.PowerStateOn, "Reboot failed: busy", eim.StatusError, now)}},
		{"a result of another request: sent again", host(requested), result("reboot-1", hostv1.ActionResult_STATE_STARTED, ""),
			&hostv1.HostAction{Kind: hostv1.HostAction_KIND_REBOOT, Id: "reboot-1700000000"}, eim.LivenessChange{}},
		{"shut down started", host(func(l *eim.HostLiveness) {
			l.DesiredPowerState = eim.PowerStateOff
			l.Power.Status = eim.StatusValue{Text: powerShutdownRequested, Indicator: eim.StatusInProgress, Timestamp: asked}
		}), result("shutdown-1700000000", hostv1.ActionResult_STATE_STARTED, ""), nil,
			eim.LivenessChange{Power: power(eim.PowerStateOff, powerOff, eim.StatusIdle, now), Status: status(statusPoweredOff, eim.StatusIdle)}},
		{"not in band", host(func(l *eim.HostLiveness) {
			l.BmcKind = eim.BaremetalControllerKindRedfish
			l.DesiredPowerState = eim.PowerStateReset
		}), healthy, nil, eim.LivenessChange{}},
		{"not possible in band", host(func(l *eim.HostLiveness) { l.DesiredPowerState = eim.PowerStateHibernate }), healthy, nil,
			eim.LivenessChange{Power: power(eim.PowerStateOn, powerUnsupported+"POWER_STATE_HIBERNATE", eim.StatusError, now)}},
		{"done: the request's leftovers go", host(func(l *eim.HostLiveness) {
			l.Power.Status = eim.StatusValue{Text: powerRebootRequested, Indicator: eim.StatusInProgress, Timestamp: asked}
		}), healthy, nil, eim.LivenessChange{Power: power(eim.PowerStateOn, "", eim.StatusUnspecified, now)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act, ch := applyBeat(tc.l, tc.m, now, healthStatus(tc.m))
			if !reflect.DeepEqual(act, tc.act) {
				t.Errorf("action: got %v, want %v", act, tc.act)
			}
			if !reflect.DeepEqual(ch, tc.want) {
				t.Errorf("change: got %s, want %s", show(ch), show(tc.want))
			}
			if err := ch.Check(); err != nil {
				t.Errorf("the change is not valid: %v", err)
			}
		})
	}
}

func show(ch eim.LivenessChange) string {
	s := "{"
	if ch.Status != nil {
		s += "status " + ch.Status.Text + " " + string(ch.Status.Indicator)
	}
	if ch.Power != nil {
		s += " power " + string(ch.Power.Current) + " " + ch.Power.Status.Text + " " + string(ch.Power.Status.Indicator)
	}
	return s + "}"
}
