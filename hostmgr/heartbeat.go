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
	"github.com/eimhq/eim/inventory"
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
	if len(m.BootId) > inventory.MaxBootID {
		return fmt.Errorf("boot_id: longer than %d bytes", inventory.MaxBootID)
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
	e := t.hosts[id]
	if e == nil || !e.known || e.status != status || e.action != nil || m.ActionResult != nil || e.project != project ||
		(m.BootId != "" && m.BootId != e.boot) {
		return false, "", time.Time{}
	}
	prev = t.heardAt(e, now)
	e.until = time.Time{}
	t.queue(e, now)
	return true, e.digest, prev
}

// sync is the slow path: read the host (from the host view, which holds
// it unless it changed), write it if the heartbeat changes it, and
// remember what it shows.
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
	probe := probeOf(v)
	act, _, changed := applyBeat(probe, m, ts, want)
	status, digest, boot := v.HostStatus, v.HardwareDigest, probe.BootID
	if changed {
		err = s.batch.DoIn(ctx, n.Project, func(tx eim.Tx) error {
			h, err := getHost(ctx, tx, n.HostID)
			if err != nil {
				return err
			}
			before := *h
			var changed bool
			act, _, changed = applyBeat(h, m, ts, want)
			status, digest, boot = h.HostStatus, h.HardwareDigest, h.BootID
			if !changed {
				return nil
			}
			return writeBeat(ctx, tx, &before, h)
		})
		if err != nil {
			return nil, "", prev, err
		}
	}
	s.live.synced(n.HostID, gen, status, digest, boot, act)
	return act, digest, prev, nil
}

// probeOf returns a host with the fields of v that applyBeat reads.
func probeOf(v *hostview.Host) *eim.Host {
	return &eim.Host{Meta: eim.Meta{ResourceID: v.ID, Project: v.Project},
		HostStatus: v.HostStatus, HostStatusIndicator: v.HostStatusIndicator, HardwareDigest: v.HardwareDigest,
		BootID: v.BootID, BmcKind: v.BmcKind, DesiredPowerState: v.DesiredPowerState, CurrentPowerState: v.CurrentPowerState,
		PowerStatus: v.PowerStatus, PowerStatusTimestamp: v.PowerStatusTimestamp}
}

// applyBeat applies a heartbeat to h: power first (a reboot or shut down
// the node starts sets the status), the node's boot, then the status the
// node's health asks for, when the current one is this module's to
// change.
func applyBeat(h *eim.Host, m *hostv1.HeartbeatRequest, now uint64, want hostStatus) (act *hostv1.HostAction, status hostStatus, changed bool) {
	act, st, changed := applyPower(h, m.ActionResult, now)
	if m.BootId != "" && m.BootId != h.BootID {
		h.BootID = m.BootId // a reboot, or the first boot reported
		changed = true
	}
	if st.text == "" {
		st = want
	}
	if ours(h.HostStatus) && (h.HostStatus != st.text || h.HostStatusIndicator != st.indicator) {
		h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = st.text, st.indicator, now
		changed = true
	}
	return act, st, changed
}

// writeBeat writes what applyBeat changed of a host, before as it was
// read and after as applyBeat left it: its power state and status, its
// node's boot, and its host status (each only over what before shows).
func writeBeat(ctx context.Context, tx eim.Tx, before, after *eim.Host) error {
	if before.CurrentPowerState != after.CurrentPowerState || before.PowerStatus != after.PowerStatus ||
		before.PowerStatusIndicator != after.PowerStatusIndicator || before.PowerStatusTimestamp != after.PowerStatusTimestamp {
		st := inventory.Status{Text: after.PowerStatus, Indicator: after.PowerStatusIndicator, Timestamp: after.PowerStatusTimestamp}
		if err := inventory.SetHostPower(ctx, tx, before, after.CurrentPowerState, st); err != nil {
			return err
		}
	}
	if before.BootID != after.BootID {
		if err := inventory.RecordBoot(ctx, tx, before, after.BootID); err != nil {
			return err
		}
	}
	if before.HostStatus != after.HostStatus || before.HostStatusIndicator != after.HostStatusIndicator ||
		before.HostStatusTimestamp != after.HostStatusTimestamp {
		st := inventory.Status{Text: after.HostStatus, Indicator: after.HostStatusIndicator, Timestamp: after.HostStatusTimestamp}
		if err := inventory.SetHostStatus(ctx, tx, before, st); err != nil {
			return err
		}
	}
	return nil
}

func getHost(ctx context.Context, tx eim.Tx, id string) (*eim.Host, error) {
	r, err := tx.Get(ctx, eim.KindHost, id)
	if err != nil {
		return nil, err
	}
	return r.(*eim.Host), nil
}

// syncing records a heartbeat about to be synced and returns the host's
// change generation, and when the node was heard from before.
func (t *tracker) syncing(project, id string, now time.Time) (gen uint64, prev time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	prev = t.heardAt(e, now)
	e.until = time.Time{}
	t.queue(e, now)
	return e.gen, prev
}

// synced records what a host shows after a sync; the entry is known unless
// the host changed in the meantime.
func (t *tracker) synced(id string, gen uint64, status, digest, boot string, act *hostv1.HostAction) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.hosts[id]
	if e == nil {
		return
	}
	e.status, e.digest, e.boot, e.action = status, digest, boot, act
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
			err := s.batch.DoIn(gctx, x.project, func(tx eim.Tx) error {
				flagged, lapsed, hold = false, false, time.Time{}
				h, err := getHost(gctx, tx, x.id)
				if eim.ErrorCode(err) == eim.ENOTFOUND {
					return nil
				}
				if err != nil {
					return err
				}
				// Heard from since, or not a status that times out.
				if !s.live.silentSince(x.id, x.seen) || !timesOut(h.HostStatus) {
					return nil
				}
				// The lease of the host's shard may have lapsed (a late
				// renewal): not ours to flag now; checked again at the
				// next pass.
				if lapsed = !s.owns(x.id); lapsed {
					return nil
				}
				// An update may reboot the node and keep it silent for
				// a while: not lost, unless the update takes too long.
				if until, err := s.updatingUntil(gctx, tx, x.id); err != nil {
					return err
				} else if until.After(now) {
					hold = until
					return nil
				}
				at := x.seen
				if at.IsZero() { // known from the feed only, never heard
					at = now
				}
				flagged = true
				return inventory.SetHostStatus(gctx, tx, h, inventory.StatusAt(statusNoConnection, eim.StatusError, at))
			})
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
	if now.Sub(s.lastRebootScan) >= rebootScanEvery {
		s.lastRebootScan = now
		if err := s.checkReboots(ctx, now); err != nil && ctx.Err() == nil {
			s.log.Warn("hostmgr: reboot scan", "err", err)
		}
	}
}

// updatingUntil returns, when the host's instance is updating its OS, until
// when its silence is not taken for a lost connection: the update's last
// report plus the update timeout. The zero time when it is not updating.
func (s *Service) updatingUntil(ctx context.Context, tx eim.Tx, hostID string) (time.Time, error) {
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}, Limit: 1, NoTotal: true})
	if err != nil || len(items) == 0 {
		return time.Time{}, err
	}
	in := items[0].(*eim.Instance)
	if in.UpdateStatusIndicator != eim.StatusInProgress {
		return time.Time{}, nil
	}
	return time.Unix(int64(in.UpdateStatusTimestamp), 0).Add(s.updateMax), nil
}

// hold keeps a silent host from timing out until until (it is updating);
// its next heartbeat ends the hold.
func (t *tracker) hold(id string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.hosts[id]; e != nil {
		e.until = until
		t.queue(e, until)
	}
}

// setStatus records a status this module wrote outside a node's call.
func (t *tracker) setStatus(id, status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.hosts[id]; e != nil {
		e.status = status
	}
}

// silentSince reports whether the host was not heard from after seen.
func (t *tracker) silentSince(id string, seen time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.hosts[id]
	return e == nil || !e.seen.After(seen)
}

// rebootScanEvery is how often hosts stuck "Rebooting" are looked for:
// the reboot timeout is minutes long.
const rebootScanEvery = 30 * time.Second

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
	var stuck []*eim.Host
	for _, p := range projects {
		// Oldest first, so that a page ends at the first host not yet
		// due; the (project, status) index serves it.
		q := eim.Query{Where: []eim.Cond{{Field: "hostStatus", Value: statusRebooting}}, OrderBy: "hostStatusTimestamp", Limit: 500, NoTotal: true}
		for {
			var page []eim.Resource
			err := s.store.View(ctx, p.Name, func(tx eim.Tx) error {
				var err error
				page, _, err = tx.List(ctx, eim.KindHost, q)
				return err
			})
			if err != nil {
				return err
			}
			due := 0
			for _, r := range page {
				if h := r.(*eim.Host); h.HostStatusTimestamp <= cutoff {
					if s.owns(h.ResourceID) { // another replica's otherwise
						stuck = append(stuck, h)
					}
					due++
				}
			}
			if len(page) < q.Limit || due < len(page) {
				break
			}
			q.Offset += q.Limit
		}
	}
	for _, h := range stuck {
		err := s.batch.DoIn(ctx, h.Project, func(tx eim.Tx) error {
			h, err := getHost(ctx, tx, h.ResourceID)
			if err != nil || h.HostStatus != statusRebooting || h.HostStatusTimestamp > cutoff {
				return ignoreNotFound(err)
			}
			return inventory.SetHostStatus(ctx, tx, h, inventory.Status{Text: statusNoConnection, Indicator: eim.StatusError, Timestamp: h.HostStatusTimestamp})
		})
		if err != nil {
			return fmt.Errorf("flag %s: %w", h.ResourceID, err)
		}
		s.live.setStatus(h.ResourceID, statusNoConnection)
		s.log.Info("hostmgr: host did not come back from its reboot", "host", h.ResourceID, "project", h.Project, "since", time.Unix(int64(h.HostStatusTimestamp), 0).UTC())
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
	if e := t.hosts[id]; e != nil && !e.off {
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
	for _, e := range t.hosts {
		if now.After(e.restored) {
			e.restored = now
			e.spread = true
		}
	}
	return len(t.hosts)
}
