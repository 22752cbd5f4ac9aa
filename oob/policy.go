package oob

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// Power policy: a host whose effective policy (its BMC's, else its
// site's, else its project's) is ALWAYS_ON and that its BMC reports off
// while its desiredPowerState is ON is powered on again by a job whose
// reason says why, at most once per host per RestoreBackoff. The poll
// finds such a host (after recording the drift), and so does a host
// going "No Connection": its BMC is read at once rather than at the next
// poll (lostConnection). REPORT (the default) shows the drift only.

// RestorePrefix begins the reason of a job the power policy made.
const RestorePrefix = "restored by power policy "

// restoreReason is the reason of a job that powers a host on again.
func restoreReason(obs eim.PowerState) string {
	return RestorePrefix + string(eim.PowerPolicyAlwaysOn) + ": the BMC reported " + strings.TrimPrefix(string(obs), "POWER_STATE_")
}

// noConnection is the hostStatus of a host whose agent went silent.
const noConnection = "No Connection"

// policyState is what the module remembers for lost connections: when
// a host seen "No Connection" last had its BMC read for it, and for which
// silence (the status's timestamp: when its node was last heard from).
type policyState struct {
	mu      sync.Mutex
	checked map[string]checked // by project/host
}

type checked struct {
	at      time.Time
	silence uint64
}

// due reports whether the host's BMC may be read for its lost connection
// (silence) now: once for each silence, and at most once per every for
// the same one; it notes it.
func (p *policyState) due(key string, silence uint64, now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.checked == nil {
		p.checked = map[string]checked{}
	}
	if c, ok := p.checked[key]; ok && c.silence == silence && now.Sub(c.at) < every {
		return false
	}
	for k, c := range p.checked {
		if now.Sub(c.at) >= every {
			delete(p.checked, k)
		}
	}
	p.checked[key] = checked{at: now, silence: silence}
	return true
}

// Policy returns the host's effective power policy: its BMC's, else its
// site's, else its project's, else REPORT.
func (s *Service) Policy(ctx context.Context, b *eim.BMC, h *eim.Host) (eim.PowerPolicy, error) {
	if b.PowerPolicy != eim.PowerPolicyUnset {
		return b.PowerPolicy, nil
	}
	var site eim.PowerPolicy
	if h.SiteID != "" {
		err := s.o.Store.View(ctx, h.Project, func(tx eim.Tx) error {
			r, err := tx.Get(ctx, eim.KindSite, h.SiteID)
			if err != nil {
				return err
			}
			site = r.(*eim.Site).PowerPolicy
			return nil
		})
		if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return "", err
		}
	}
	if site != eim.PowerPolicyUnset {
		return site, nil
	}
	p, err := s.o.Store.FindProject(ctx, h.Project)
	if err != nil {
		return "", err
	}
	return eim.EffectivePowerPolicy(b.PowerPolicy, site, p.Settings.PowerPolicy), nil
}

// enforce applies the host's power policy after its BMC reported obs
// with no job in flight: an ALWAYS_ON host asked to be ON and found off
// is powered on again.
func (s *Service) enforce(ctx context.Context, b *eim.BMC, obs eim.PowerState) {
	if obs == eim.PowerStateOn || obs == "" {
		return
	}
	h, err := s.host(ctx, b.Project, b.HostID)
	if err != nil {
		return // gone, or the store away: the next poll sees it
	}
	if h.DesiredPowerState != eim.PowerStateOn {
		return
	}
	if h.PowerStatus == BMCDisagreesText && agentUp(h.HostStatus) {
		return // its agent runs: the BMC's off is in doubt (drift.go)
	}
	pol, err := s.Policy(ctx, b, h)
	if err != nil {
		s.log.Info("host's power policy not read", "project", b.Project, "host", b.HostID, "err", err)
		return
	}
	if pol != eim.PowerPolicyAlwaysOn {
		return
	}
	if _, err := s.restore(ctx, h, obs); err != nil {
		s.log.Warn("host not powered on again by its power policy", "project", b.Project, "host", b.HostID, "err", err)
	}
}

// restore adds the job that powers h on again, unless the power policy
// made one for it less than RestoreBackoff ago (nil, nil then).
func (s *Service) restore(ctx context.Context, h *eim.Host, obs eim.PowerState) (*eim.PowerJob, error) {
	recent, _, err := s.o.Store.ListPowerJobs(ctx, h.Project, h.ResourceID, 20, 0)
	if err != nil {
		return nil, err
	}
	since := time.Now().Add(-s.o.RestoreBackoff)
	for _, j := range recent {
		if !j.State.Ended() {
			return nil, nil // a job is in flight: it decides
		}
		if strings.HasPrefix(j.Reason, RestorePrefix) && j.CreatedAt.After(since) {
			s.log.Info("power policy ALWAYS_ON: host found off again, not powered on before its back-off ends", "project", h.Project,
				"host", h.ResourceID, "last", j.ID, "until", j.CreatedAt.Add(s.o.RestoreBackoff))
			return nil, nil
		}
	}
	steps, err := Plan(eim.PowerStateOn, nil, s.o.GracefulTimeout)
	if err != nil {
		return nil, err
	}
	j := &eim.PowerJob{Project: h.Project, HostID: h.ResourceID, Desired: eim.PowerStateOn, Reason: restoreReason(obs), Steps: steps,
		Deadline: eim.NewTime(time.Now().Add(s.o.JobTimeout))}
	if _, err := s.o.Store.RequestPowerJob(ctx, eim.PowerJobRequest{Job: j}); err != nil {
		return nil, err
	}
	s.log.Warn("power policy ALWAYS_ON: powering the host on again", "project", h.Project, "host", h.ResourceID, "job", j.ID, "reported", string(obs))
	s.poke()
	return j, nil
}

// lostConnection reads the BMC of a host that went "No Connection" (once
// a silence, and at most once per PollEvery for the same one) when its power is recorded on — a
// machine switched off behind EIM's back is recorded off at once rather
// than at the next poll — or when it is asked to be ON under ALWAYS_ON:
// the poll's record of its state and the policy's restore follow. A
// silent agent on a machine the BMC reports on changes nothing.
func (s *Service) lostConnection(ctx context.Context, h *eim.Host, b *eim.BMC) {
	if h.HostStatus != noConnection {
		return
	}
	if offish(h.CurrentPowerState) {
		if h.DesiredPowerState != eim.PowerStateOn {
			return
		}
		pol, err := s.Policy(ctx, b, h)
		if err != nil || pol != eim.PowerPolicyAlwaysOn {
			return
		}
	}
	if !s.pol.due(h.Project+"/"+h.ResourceID, h.HostStatusTimestamp, time.Now(), s.o.PollEvery) {
		return
	}
	s.log.Info("host lost its connection: reading its BMC", "project", h.Project, "host", h.ResourceID)
	s.pollOne(ctx, b)
}
