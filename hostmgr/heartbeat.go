package hostmgr

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
)

// maxText bounds the free-text fields of a heartbeat.
const maxText = 1024

// ReportIn implements hostv1connect.HostServiceHandler: the provisioning
// module's report-in, which also counts as a heartbeat (agents older than
// Heartbeat report in at every interval). The answer carries the project's
// heartbeat interval.
func (s *Service) ReportIn(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.reportIn(ctx, req)
	if err != nil {
		return nil, err
	}
	interval, _ := s.settings.get(ctx, n.Project)
	s.live.heard(n.Project, n.HostID, s.now())
	resp.Msg.HeartbeatIntervalSeconds = seconds(interval)
	return resp, nil
}

// GetTelemetryConfig implements hostv1connect.HostServiceHandler: the
// telemetry module's, when there is one.
func (s *Service) GetTelemetryConfig(ctx context.Context, req *connect.Request[hostv1.GetTelemetryConfigRequest]) (*connect.Response[hostv1.GetTelemetryConfigResponse], error) {
	if s.telemetry == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server does not serve telemetry configurations"))
	}
	return s.telemetry.GetTelemetryConfig(ctx, req)
}

// heard records a call of the node that the handler did not sync with the
// host row (the report-in wrote it): the next heartbeat reads the row.
func (t *tracker) heard(project, id string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	t.heardAt(e, now)
	e.known = false
	t.queue(e, now)
}

// Heartbeat implements hostv1connect.HostServiceHandler. A node whose host
// already shows what the heartbeat says costs a map update: no database
// access. Otherwise the host is read and, when its status or power state
// must change, written.
func (s *Service) Heartbeat(ctx context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkHeartbeat(m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	interval, _ := s.settings.get(ctx, n.Project)
	now := s.now()
	want := healthStatus(m)
	out := &hostv1.HeartbeatResponse{IntervalSeconds: seconds(interval), HardwareIntervalSeconds: seconds(s.hwEvery)}
	if s.telemetry != nil {
		out.TelemetryVersion = s.telemetry.Version(ctx, n.Project, n.HostID)
	}
	if s.maintenance != nil {
		out.MaintenanceVersion = s.maintenance.Version(ctx, n.Project, n.HostID)
	}
	if s.clusters != nil {
		out.ClusterVersion = s.clusters.Version(ctx, n.Project, n.HostID)
	}
	if s.workloads != nil {
		out.WorkloadsVersion = s.workloads.Version(ctx, n.Project, n.HostID)
		out.WorkloadsStatusWanted = s.workloads.StatusWanted(ctx, n.Project, n.HostID)
	}
	if ok, digest, prev := s.live.beat(n.Project, n.HostID, now, want.text, m); ok {
		s.metrics.heard(prev, now, interval)
		out.SendHardware = needHardware(digest, m)
		return connect.NewResponse(out), nil
	}
	act, digest, prev, err := s.sync(ctx, n, m, now, want)
	s.metrics.heard(prev, now, interval)
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "hostmgr: heartbeat", err)
	}
	out.Action = act
	out.SendHardware = needHardware(digest, m)
	return connect.NewResponse(out), nil
}

// needHardware reports whether the node must send its inventory: the host
// has none, or not the one the node last sent.
func needHardware(stored string, m *hostv1.HeartbeatRequest) bool {
	return stored == "" || stored != m.HardwareDigest
}

func seconds(d time.Duration) uint32 { return uint32((d + time.Second - 1) / time.Second) }

// checkHeartbeat validates what a heartbeat carries.
func checkHeartbeat(m *hostv1.HeartbeatRequest) error {
	for _, f := range []struct{ name, v string }{
		{"agent_version", m.AgentVersion}, {"boot_id", m.BootId}, {"hardware_digest", m.HardwareDigest},
		{"agent_health.detail", m.AgentHealth.GetDetail()}, {"node_health.detail", m.NodeHealth.GetDetail()},
		{"action_result.id", m.ActionResult.GetId()}, {"action_result.detail", m.ActionResult.GetDetail()},
	} {
		if len(f.v) > maxText {
			return fmt.Errorf("%s: longer than %d bytes", f.name, maxText)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: not valid UTF-8", f.name)
		}
	}
	if len(m.BootId) > eim.MaxBootID {
		return fmt.Errorf("boot_id: longer than %d bytes", eim.MaxBootID)
	}
	for _, h := range []struct {
		name string
		h    *hostv1.Health
	}{{"agent_health", m.AgentHealth}, {"node_health", m.NodeHealth}} {
		if _, ok := hostv1.Health_State_name[int32(h.h.GetState())]; !ok {
			return fmt.Errorf("%s.state: unknown value %d", h.name, h.h.GetState())
		}
	}
	if r := m.ActionResult; r != nil {
		if r.Id == "" {
			return errors.New("action_result.id: required")
		}
		if r.State != hostv1.ActionResult_STATE_STARTED && r.State != hostv1.ActionResult_STATE_FAILED {
			return fmt.Errorf("action_result.state: want STARTED or FAILED, got %v", r.State)
		}
	}
	return nil
}

// beat is the fast path: when the tracker knows the host shows status
// and the node's boot already and has no action pending, it records the
// heartbeat and returns the host's hardware digest.
func (t *tracker) beat(project, id string, now time.Time, status string, m *hostv1.HeartbeatRequest) (ok bool, digest string, prev time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.find(id)
	if e == nil || !e.known || e.statusText() != status || e.action != nil || m.ActionResult != nil || e.projectName() != project ||
		(m.BootId != "" && m.BootId != e.boot) {
		return false, "", time.Time{}
	}
	prev = t.heardAt(e, now)
	e.until = 0
	t.queue(e, now)
	return true, e.digest, prev
}

// sync is the slow path: decide on the host as the host view holds it
// (unless it changed, as stored) and, when the heartbeat changes it,
// record the beat: the decision is taken again on the liveness the store
// reads in the write's transaction, and its writes made there. Then
// remember what the host shows.
//
// prev is when the node was heard from before (zero: not known).
func (s *Service) sync(ctx context.Context, n southbound.Node, m *hostv1.HeartbeatRequest, now time.Time, want hostStatus) (_ *hostv1.HostAction, _ string, prev time.Time, _ error) {
	gen, prev := s.live.syncing(n.Project, n.HostID, now)
	v, err := s.hosts.Host(ctx, n.Project, n.HostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		s.live.forget(n.HostID)
	}
	if err != nil {
		return nil, "", prev, err
	}
	ts := uint64(now.Unix())
	act, ch := applyBeat(livenessOf(v), m, ts, want)
	status, digest, boot := v.HostStatus(), v.HardwareDigest(), v.BootID()
	if !ch.Empty() {
		l, err := s.store.RecordBeat(ctx, n.Project, n.HostID, func(l eim.HostLiveness) eim.LivenessChange {
			act, ch = applyBeat(l, m, ts, want)
			return ch
		})
		if err != nil {
			return nil, "", prev, err
		}
		status, digest, boot = l.Status.Text, l.HardwareDigest, l.BootID
	}
	s.live.synced(n.HostID, gen, status, digest, boot, act)
	return act, digest, prev, nil
}

// livenessOf returns the liveness of a host as the host view holds it.
func livenessOf(v *hostview.Host) eim.HostLiveness {
	return eim.HostLiveness{ID: v.ID(), Project: v.Project(),
		Status: eim.StatusValue{Text: v.HostStatus(), Indicator: v.HostStatusIndicator()},
		Power: eim.HostPower{Current: v.CurrentPowerState(),
			Status: eim.StatusValue{Text: v.PowerStatus(), Timestamp: v.PowerStatusTimestamp()}},
		BmcKind: v.BmcKind(), DesiredPowerState: v.DesiredPowerState(), HardwareDigest: v.HardwareDigest(), BootID: v.BootID()}
}

// applyBeat decides what a heartbeat m at now (unix seconds) changes of a
// host with liveness l: power first (a reboot or shut down the node
// starts sets the status), the node's boot (a new boot ID: a reboot, or
// the first boot reported), then the status the node's health asks for
// (want), when the current one is this module's to change. It returns the
// action to send the node and the writes.
func applyBeat(l eim.HostLiveness, m *hostv1.HeartbeatRequest, now uint64, want hostStatus) (act *hostv1.HostAction, ch eim.LivenessChange) {
	act, st, power := applyPower(l, m.ActionResult, now)
	ch.Power = power
	if m.BootId != "" && m.BootId != l.BootID {
		ch.BootID = &m.BootId
	}
	if st.text == "" {
		st = want
	}
	if ours(l.Status.Text) && (l.Status.Text != st.text || l.Status.Indicator != st.indicator) {
		ch.Status = &eim.StatusValue{Text: st.text, Indicator: st.indicator, Timestamp: now}
	}
	return act, ch
}

// syncing records a heartbeat about to be synced and returns the host's
// change generation, and when the node was heard from before.
func (t *tracker) syncing(project, id string, now time.Time) (gen uint64, prev time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	prev = t.heardAt(e, now)
	e.until = 0
	t.queue(e, now)
	return e.gen, prev
}

// synced records what a host shows after a sync; the entry is known unless
// the host changed in the meantime.
func (t *tracker) synced(id string, gen uint64, status, digest, boot string, act *hostv1.HostAction) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.find(id)
	if e == nil {
		return
	}
	e.setStatus(status)
	e.digest, e.boot, e.action = digest, boot, act
	e.known = e.gen == gen
}

// CheckTimeouts flags the hosts whose heartbeats stopped "No Connection",
// with the time they were last heard from as the status's timestamp, and
// the hosts that did not come back from a reboot in time. Run calls it
// every CheckInterval.
//
// While the store is away nobody is flagged: the silence may be the
// store's (nodes refused while it was away), and the flag could not be
// written anyway. When it is back, every host's deadline counts from
// then, as after a restart.
func (s *Service) CheckTimeouts(ctx context.Context) {
	now := s.now()
	if !s.storeBack(ctx, now) {
		return
	}
	// Every project's timeout, also of projects whose nodes call only
	// other replicas; when the read fails, the times held stand.
	if err := s.settings.refreshAll(ctx); err != nil && ctx.Err() == nil {
		s.log.Debug("hostmgr: read the projects' heartbeat settings", "err", err)
	}
	due := s.live.expired(now, s.settings.timeoutOf)
	if len(due) > 0 && s.live.isShared() {
		due = s.confirm(ctx, due, now)
	}
	g, gctx := errgroup.WithContext(ctx)
	// Concurrent calls let the batcher put many hosts in one transaction.
	g.SetLimit(64)
	for _, x := range due {
		g.Go(func() error {
			var flagged, lapsed bool
			var hold time.Time
			at := x.seen
			if at.IsZero() { // known from the feed only, never heard
				at = now
			}
			_, err := s.store.RecordSilence(gctx, x.project, x.id, func(l eim.HostLiveness) eim.LivenessChange {
				var ch eim.LivenessChange
				ch, flagged, lapsed, hold = s.silence(l, x.id, x.seen, at, now)
				return ch
			})
			if eim.ErrorCode(err) == eim.ENOTFOUND {
				err = nil
			}
			if err != nil && gctx.Err() == nil {
				s.log.Warn("hostmgr: flag host", "host", x.id, "project", x.project, "err", err)
				// Not flagged: check it again at the next pass.
				s.live.retry(x.id, now)
				s.storeFailed(err)
			}
			if err == nil && flagged {
				s.live.setStatus(x.id, statusNoConnection)
			}
			if err == nil && !hold.IsZero() {
				s.live.hold(x.id, hold)
			}
			if err == nil && lapsed {
				s.live.retry(x.id, now)
			}
			return nil
		})
	}
	g.Wait()
	if s.shards != nil && now.Sub(s.lastSweep) >= sweepEvery {
		s.lastSweep = now
		if n := s.live.sweep(now, s.idleAfter); n > 0 {
			s.log.Debug("hostmgr: dropped hosts this replica no longer hears nor owns", "hosts", n)
		}
	}
	if now.Sub(s.lastRebootScan) >= rebootScanEvery {
		s.lastRebootScan = now
		if err := s.checkReboots(ctx, now); err != nil && ctx.Err() == nil {
			s.log.Warn("hostmgr: reboot scan", "err", err)
		}
	}
}

// silence decides on a host whose node was silent since seen: it is
// flagged "No Connection", dated at, unless it was heard from since, its
// status does not time out, its shard's lease lapsed (a late renewal: not
// this replica's to flag now; checked again at the next pass: lapsed), or
// its instance is updating its OS (an update may reboot the node and keep
// it silent for a while: not lost until the update takes too long; hold
// is when).
func (s *Service) silence(l eim.HostLiveness, id string, seen, at, now time.Time) (ch eim.LivenessChange, flagged, lapsed bool, hold time.Time) {
	if !s.live.silentSince(id, seen) || !timesOut(l.Status.Text) {
		return ch, false, false, time.Time{}
	}
	if !s.ownsForFlag(id) {
		return ch, false, true, time.Time{}
	}
	if l.Updating {
		if until := time.Unix(int64(l.UpdateTimestamp), 0).Add(s.updateMax); until.After(now) {
			return ch, false, false, until
		}
	}
	ch.Status = &eim.StatusValue{Text: statusNoConnection, Indicator: eim.StatusError, Timestamp: uint64(at.Unix())}
	return ch, true, false, time.Time{}
}

// hold keeps a silent host from timing out until until (it is updating);
// its next heartbeat ends the hold.
func (t *tracker) hold(id string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(id); e != nil {
		e.until = nanos(until)
		t.queue(e, until)
	}
}

// setStatus records a status this module wrote outside a node's call.
func (t *tracker) setStatus(id, status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(id); e != nil {
		e.setStatus(status)
	}
}

// silentSince reports whether the host was not heard from after seen.
func (t *tracker) silentSince(id string, seen time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.find(id)
	return e == nil || e.seen <= nanos(seen)
}

// rebootScanEvery is how often hosts stuck "Rebooting" are looked for:
// the reboot timeout is minutes long.
const rebootScanEvery = 30 * time.Second

// rebootPage is how many hosts one read of the reboot scan returns.
const rebootPage = 500

// checkReboots flags the hosts that show "Rebooting" for longer than the
// reboot timeout: after their provisioning workflow's reboot, or after a
// reboot asked through desiredPowerState. The original left them
// "Rebooting" forever. Hosts are indexed by (project, status), so a scan
// reads the rebooting hosts only, oldest first.
func (s *Service) checkReboots(ctx context.Context, now time.Time) error {
	cutoff := uint64(now.Add(-s.rebootMax).Unix())
	projects, err := s.store.ListProjects(ctx)
	if err != nil {
		return err
	}
	var stuck []eim.HostLiveness
	for _, p := range projects {
		// Oldest first, up to the cutoff; the (project, status) index
		// serves it.
		for offset := 0; ; offset += rebootPage {
			page, err := s.store.HostsInStatus(ctx, p.Name, statusRebooting, cutoff, offset, rebootPage)
			if err != nil {
				return err
			}
			for _, l := range page {
				if s.owns(l.ID) { // another replica's otherwise
					stuck = append(stuck, l)
				}
			}
			if len(page) < rebootPage {
				break
			}
		}
	}
	for _, h := range stuck {
		var flagged bool
		_, err := s.store.RecordSilence(ctx, h.Project, h.ID, func(l eim.HostLiveness) eim.LivenessChange {
			flagged = l.Status.Text == statusRebooting && l.Status.Timestamp <= cutoff
			if !flagged {
				return eim.LivenessChange{}
			}
			return eim.LivenessChange{Status: &eim.StatusValue{Text: statusNoConnection, Indicator: eim.StatusError, Timestamp: l.Status.Timestamp}}
		})
		if err = ignoreNotFound(err); err != nil {
			return fmt.Errorf("flag %s: %w", h.ID, err)
		}
		if !flagged {
			continue // gone, or back meanwhile
		}
		s.live.setStatus(h.ID, statusNoConnection)
		s.log.Info("hostmgr: host did not come back from its reboot", "host", h.ID, "project", h.Project, "since", time.Unix(int64(h.Status.Timestamp), 0).UTC())
	}
	return nil
}

func ignoreNotFound(err error) error {
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	return err
}

// Store health as the checker sees it: a write that failed with
// "unavailable" makes the store suspect; the next pass asks it for its
// revision, and a store that does not answer is down until it does.
const (
	storeOK int32 = iota
	storeSuspect
	storeDown
)

// storeFailed notes a failed store call of the checker or the flusher.
func (s *Service) storeFailed(err error) {
	s.troubled(err)
	if eim.ErrorCode(err) == eim.EUNAVAILABLE {
		s.storeState.CompareAndSwap(storeOK, storeSuspect)
	}
}

// storeBack reports whether the checker may flag hosts now. A suspect
// store is probed: if it answers, the failure was a passing one (a write
// that lost its races) and nothing changes; if not, it is down. A store
// that was down and answers again pardons the fleet: each host's deadline
// counts from now.
func (s *Service) storeBack(ctx context.Context, now time.Time) bool {
	state := s.storeState.Load()
	if state == storeOK {
		return true
	}
	if _, err := s.store.Revision(ctx); err != nil {
		if ctx.Err() == nil && s.storeState.Swap(storeDown) != storeDown {
			s.log.Warn("hostmgr: the store is away; no host is flagged until it is back", "err", err)
		}
		return false
	}
	if s.storeState.Swap(storeOK) == storeDown {
		n := s.live.pardon(now)
		s.log.Info("hostmgr: the store is back; liveness deadlines count from now", "hosts", n)
	}
	return true
}

// retry puts a host whose flag could not be written back in the heap, due
// at at.
func (t *tracker) retry(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(id); e != nil && !e.off {
		t.queue(e, at)
	}
}

// pardon makes every host's deadline count from now, as a restart does
// (restore): the store was away, and a node refused meanwhile was not
// silent of its own doing. It returns how many hosts it covered.
func (t *tracker) pardon(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pardoned = now
	n := nanos(now)
	for _, e := range t.hosts {
		if n > e.restored {
			e.restored = n
			e.spread = true
		}
	}
	return len(t.hosts)
}
