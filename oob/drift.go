package oob

import (
	"context"
	"strings"
	"sync"

	"github.com/eimhq/eim"
)

// Drift seen through the host's agent: a machine switched on behind
// EIM's back is seen by its agent before the next poll. The signal is
// the host's own writes in the change feed, which the module follows
// anyway (Follow → syncHost → agentBeats): the host module writes a host
// only when its node's status or boot changes ("No Connection" →
// "Running", a new boot ID), never on a steady heartbeat, so nothing is
// added to the heartbeat's path and no BMC is called there. A host whose
// power is recorded off (OFF, SLEEP, HIBERNATE) and whose agent
// evidently called after that record — its status set after the power
// status was, or a boot other than the one it showed when it was seen
// off — is recorded on at once, then its BMC read to confirm it. A BMC
// that still reports the machine off while its agent runs (a BMC put on
// the wrong host, a stale BMC) is a finding: the host shows
// BMCDisagreesText (ERROR), the agent's word standing until it goes
// silent; the poll neither overwrites it nor lets the power policy act
// on it meanwhile.

// BMCDisagreesText is the power status of a host whose agent runs while
// its BMC reports the machine off.
const BMCDisagreesText = "the BMC reports the machine off while the host's agent reports it running"

// agentUp reports whether a host status is one only a calling agent
// holds (the host module's "Running", or a node's own "Error: …"): it
// becomes "No Connection" when the agent goes silent.
func agentUp(status string) bool { return status == "Running" || strings.HasPrefix(status, "Error: ") }

// offish reports whether p is a recorded power state of a machine whose
// agent cannot run.
func offish(p eim.PowerState) bool {
	return p == eim.PowerStateOff || p == eim.PowerStateSleep || p == eim.PowerStateHibernate
}

// driftState is what the module remembers of hosts recorded off while
// their agent's status still showed it running (the short time before
// the host module flags it "No Connection"): the boot they showed then,
// by project/host. A new boot there is a machine switched back on before
// its silence was noticed. Lost on a restart: the poll then corrects it.
type driftState struct {
	mu    sync.Mutex
	boots map[string]string
}

// evident reports whether h's agent evidently called after its power was
// recorded off; the first time a host is seen so, its boot is noted
// (noted true).
func (d *driftState) evident(key string, h *eim.Host) (yes, noted bool) {
	if h.HostStatusTimestamp > h.PowerStatusTimestamp {
		return true, false // its status changed after the off was recorded
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.boots == nil {
		d.boots = map[string]string{}
	}
	boot, ok := d.boots[key]
	if !ok {
		d.boots[key] = h.BootID
		return false, true
	}
	return h.BootID != "" && h.BootID != boot, false
}

func (d *driftState) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.boots, key)
}

// agentBeats corrects the recorded power of a host whose agent runs
// while its power is recorded off (see above), then reads its BMC to
// confirm it. Called for every host event: what it checks first is in
// the event's host, with no read.
func (s *Service) agentBeats(ctx context.Context, h *eim.Host, b *eim.BMC) {
	key := h.Project + "/" + h.ResourceID
	if !offish(h.CurrentPowerState) || !agentUp(h.HostStatus) {
		s.drift.forget(key)
		return
	}
	yes, noted := s.drift.evident(key, h)
	if noted {
		s.log.Debug("host recorded off while its agent's status shows it running: a new boot will be a machine switched on", "project", h.Project, "host", h.ResourceID)
	}
	if !yes {
		return
	}
	s.drift.forget(key)
	recent, _, err := s.o.Store.ListPowerJobs(ctx, h.Project, h.ResourceID, 1, 0)
	if err != nil || (len(recent) > 0 && !recent[0].State.Ended()) {
		return // a job is in flight: it writes the state
	}
	err = s.writePower(ctx, h.Project, h.ResourceID, func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool) {
		if !offish(h.CurrentPowerState) || !agentUp(h.HostStatus) {
			return h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator, false // changed meanwhile
		}
		return s.observedPower(h, eim.PowerStateOn, "the host's agent")
	})
	if err != nil {
		if eim.ErrorCode(err) != eim.ENOTFOUND {
			s.log.Info("host's power state not recorded", "host", h.ResourceID, "err", err)
		}
		return
	}
	s.log.Info("host's agent reports it running while its power was recorded off: recorded on, reading its BMC to confirm",
		"project", h.Project, "host", h.ResourceID, "was", string(h.CurrentPowerState))
	s.confirmRunning(ctx, b)
}

// confirmRunning reads the BMC of a host whose agent runs: a BMC that
// reports the machine off is a finding, shown on the host.
func (s *Service) confirmRunning(ctx context.Context, b *eim.BMC) {
	conn, err := s.open(ctx, b)
	if err != nil {
		return
	}
	defer conn.Close()
	st, err := conn.PowerState(ctx)
	s.reached(ctx, b.Project, b.HostID, err)
	if err != nil {
		return
	}
	obs := observed(st)
	if !offish(obs) {
		return // on (confirmed), or in transition
	}
	err = s.writePower(ctx, b.Project, b.HostID, func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool) {
		if offish(h.CurrentPowerState) || !agentUp(h.HostStatus) {
			return h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator, false // changed meanwhile
		}
		return h.CurrentPowerState, BMCDisagreesText, eim.StatusError, false
	})
	if err != nil {
		if eim.ErrorCode(err) != eim.ENOTFOUND {
			s.log.Info("host's power status not recorded", "host", b.HostID, "err", err)
		}
		return
	}
	s.log.Warn("the BMC reports the machine off while the host's agent reports it running: check the BMC's address and systemId",
		"project", b.Project, "host", b.HostID, "reported", string(obs))
}

// observedPower is what a host's power becomes when obs is seen (by the
// BMC, or the host's agent: by) with no job in flight: its
// currentPowerState follows obs; a state other than the desired one is
// drift (logged, and the mismatch status), cleared when the machine is
// back where it was asked. While the host's agent runs, a BMC reporting
// the machine off does not overwrite BMCDisagreesText.
func (s *Service) observedPower(h *eim.Host, obs eim.PowerState, by string) (eim.PowerState, string, eim.StatusIndication, bool) {
	finding := h.PowerStatus == BMCDisagreesText
	if finding && offish(obs) && agentUp(h.HostStatus) {
		return h.CurrentPowerState, h.PowerStatus, h.PowerStatusIndicator, false
	}
	want := expected(h.DesiredPowerState)
	switch {
	case want == "":
		if finding {
			return obs, "", eim.StatusUnspecified, false
		}
		return obs, h.PowerStatus, h.PowerStatusIndicator, false
	case obs == want:
		cur := obs
		if obs == eim.PowerStateOn && expected(h.CurrentPowerState) == eim.PowerStateOn {
			cur = h.CurrentPowerState // RESET or POWER_CYCLE done: shown as asked
		}
		if h.PowerStatus == MismatchText || finding {
			return cur, doneText(h.DesiredPowerState), eim.StatusIdle, false
		}
		return cur, h.PowerStatus, h.PowerStatusIndicator, false
	}
	if h.CurrentPowerState != obs || h.PowerStatus != MismatchText {
		s.log.Warn("power drift: the machine is in a state other than the one desired", "project", h.Project, "host", h.ResourceID,
			"desired", string(h.DesiredPowerState), "reported", string(obs), "by", by, "was", string(h.CurrentPowerState))
	}
	return obs, MismatchText, eim.StatusError, false
}
