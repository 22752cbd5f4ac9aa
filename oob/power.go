package oob

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/inventory"
)

// desiredPowerState drives the jobs: the module follows hosts in the change
// feed (and re-lists the BMCs), and when a host with a BMC asks for a power
// state that its latest job did not, it adds a job. It also keeps the
// host's bmcKind and bmcIp those of its BMC; a bmcKind set takes the
// host's power out of the host module's in-band hands.
//
// Most hosts have no BMC, and their events are most of the feed: a
// follower that resumes on a store of 100,000 nodes catches up on some
// 200,000 host and instance events. So the follower knows which hosts
// have a BMC (bmcHosts, kept by the feed's KindBMC events, whichever
// process wrote them) and spends no read on the others' events.

// Follow follows the change feed until ctx ends (one process of the
// deployment runs it).
func (s *Service) Follow(ctx context.Context) error {
	r := feed.New(feed.Options{Store: s.o.Feed, Name: "oob", Logger: s.log, Kinds: []eim.Kind{eim.KindHost, eim.KindInstance, eim.KindWorkflow, eim.KindBMC}, Durable: true,
		Metrics: s.o.Metrics, MinWait: s.o.RetryWait,
		Handle: func(ctx context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				if err := s.follow(ctx, ev); err != nil {
					if eim.ErrorCode(err) == eim.EUNAVAILABLE {
						return err
					}
					s.log.Warn("host's power not followed", "project", ev.Project, "host", ev.ID, "err", err)
				}
			}
			return nil
		},
		Relist:      s.relist,
		RelistEvery: s.o.RelistEvery,
	})
	return r.Run(ctx)
}

// follow handles one event of the feed.
func (s *Service) follow(ctx context.Context, ev eim.Event) error {
	if ev.Kind == eim.KindBMC {
		// The project's BMCs read first: a mark on a project not read yet
		// would be lost.
		if _, err := s.bmcs.any(ctx, s.o.Store, ev.Project); err != nil {
			return err
		}
		s.bmcs.mark(ev.Project, ev.ID, ev.Op != eim.OpDeleted)
		// A BMC put sets the host's bmcKind (and may ask for a job); one
		// deleted clears it.
		return s.syncHost(ctx, ev.Project, ev.ID)
	}
	if ev.Op == eim.OpDeleted {
		if ev.Kind == eim.KindHost {
			s.bmcs.mark(ev.Project, ev.ID, false) // its BMC went with it
		}
		return nil
	}
	// A project without a BMC has nothing to follow.
	if some, err := s.bmcs.any(ctx, s.o.Store, ev.Project); err != nil || !some {
		return err
	}
	switch ev.Kind {
	case eim.KindInstance:
		return s.syncInstance(ctx, ev.Project, ev.ID) // Day 0 may be due (day0.go)
	case eim.KindWorkflow:
		return s.syncWorkflow(ctx, ev.Project, ev.ID) // a reprovisioning (day0.go)
	}
	return s.followHost(ctx, ev.Project, ev.ID)
}

// followHost syncs a host the feed brought, when it has a BMC.
func (s *Service) followHost(ctx context.Context, project, hostID string) error {
	if !s.bmcs.has(project, hostID) {
		return nil
	}
	return s.syncHost(ctx, project, hostID)
}

// relist syncs every host that has a BMC, and learns again which hosts
// have one.
func (s *Service) relist(ctx context.Context) error {
	projects, err := s.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	names := make(map[string]bool, len(projects))
	for _, p := range projects {
		bmcs, err := s.o.Store.ListBMCs(ctx, p.Name)
		if err != nil {
			return err
		}
		s.bmcs.load(p.Name, bmcs)
		names[p.Name] = true
		for _, b := range bmcs {
			if err := s.syncHost(ctx, b.Project, b.HostID); err != nil && eim.ErrorCode(err) == eim.EUNAVAILABLE {
				return err
			}
		}
	}
	s.bmcs.keep(names)
	return nil
}

// eachBMC calls fn for the BMCs of every project.
func (s *Service) eachBMC(ctx context.Context, fn func(b *eim.BMC) error) error {
	projects, err := s.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range projects {
		bmcs, err := s.o.Store.ListBMCs(ctx, p.Name)
		if err != nil {
			return err
		}
		for _, b := range bmcs {
			if err := fn(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// bmcHosts is the follower's knowledge of which hosts have a BMC, by
// project: a project's is read from the store with its first event (and
// again at each re-list), then kept by the feed's KindBMC events, which
// every process's puts and deletes write. It may be ahead of the events
// still to handle (a read sees changes whose events come later), never
// behind: every change after a read has its event still to come, and the
// syncs it leads to read the host and its BMC as they are then.
type bmcHosts struct {
	mu sync.Mutex
	by map[string]map[string]bool // project → hosts with a BMC; absent: not read yet
}

// any reports whether the project has a host with a BMC, reading the
// project's BMCs the first time.
func (b *bmcHosts) any(ctx context.Context, st Store, project string) (bool, error) {
	b.mu.Lock()
	hosts, ok := b.by[project]
	b.mu.Unlock()
	if ok {
		return len(hosts) > 0, nil
	}
	bmcs, err := st.ListBMCs(ctx, project)
	if err != nil {
		return false, err
	}
	b.load(project, bmcs)
	return len(bmcs) > 0, nil
}

// has reports whether the host has a BMC (false for a project not read).
func (b *bmcHosts) has(project, hostID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.by[project][hostID]
}

// mark records that the host has a BMC, or has none; a project not read
// yet is left to its read.
func (b *bmcHosts) mark(project, hostID string, has bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hosts, ok := b.by[project]
	switch {
	case !ok:
	case has:
		hosts[hostID] = true
	default:
		delete(hosts, hostID)
	}
}

// load replaces what is known of a project by its BMCs as read.
func (b *bmcHosts) load(project string, bmcs []*eim.BMC) {
	hosts := make(map[string]bool, len(bmcs))
	for _, m := range bmcs {
		hosts[m.HostID] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[string]map[string]bool{}
	}
	b.by[project] = hosts
}

// keep forgets the projects not among those given (deleted).
func (b *bmcHosts) keep(projects map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.by {
		if !projects[p] {
			delete(b.by, p)
		}
	}
}

// controllerKind is the host's bmcKind for a BMC's protocol.
func controllerKind(p eim.BMCProtocol) eim.BaremetalControllerKind {
	switch p {
	case eim.BMCIPMI:
		return eim.BaremetalControllerKindIPMI
	case eim.BMCAMT:
		return eim.BaremetalControllerKindVPRO
	case eim.BMCRedfish:
		return eim.BaremetalControllerKindRedfish
	}
	return eim.BaremetalControllerKindUnspecified
}

// ours reports whether k is a bmcKind this module sets.
func ours(k eim.BaremetalControllerKind) bool {
	return k == eim.BaremetalControllerKindIPMI || k == eim.BaremetalControllerKindVPRO || k == eim.BaremetalControllerKindRedfish
}

// bmcHost is the host part of a BMC's address.
func bmcHost(addr string) string {
	if strings.Contains(addr, "://") {
		if u, err := url.Parse(addr); err == nil {
			return u.Hostname()
		}
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// syncHost brings a host's bmcKind and bmcIp in line with its BMC, and
// adds a job when it asks for a power state its latest job did not.
func (s *Service) syncHost(ctx context.Context, project, hostID string) error {
	h, err := s.host(ctx, project, hostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := s.o.Store.GetBMC(ctx, project, hostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		if ours(h.BmcKind) {
			return s.setHostBMC(ctx, project, hostID, eim.BaremetalControllerKindUnspecified, "")
		}
		return nil
	}
	if err != nil {
		return err
	}
	kind, ip := controllerKind(b.Protocol), bmcHost(b.Address)
	if h.BmcKind != kind || h.BmcIP != ip {
		// The host's event of this write brings it here again, for the job.
		return s.setHostBMC(ctx, project, hostID, kind, ip)
	}
	if _, err = s.requestFor(ctx, h, b); err != nil {
		return err
	}
	s.lostConnection(ctx, h, b)
	s.agentBeats(ctx, h, b) // drift.go
	return nil
}

func (s *Service) setHostBMC(ctx context.Context, project, hostID string, kind eim.BaremetalControllerKind, ip string) error {
	return s.o.Store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, hostID)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		if h.BmcKind == kind && h.BmcIP == ip {
			return nil
		}
		return inventory.SetHostBMC(ctx, tx, h, kind, ip)
	})
}

// request adds a job for h's desired power state: when explicit (the
// API's POST, with a boot override perhaps), always; else only when the
// host's latest job was for another state (nil, nil then). A host whose
// powerCommandPolicy is IMMEDIATE has the jobs still to end cancelled;
// otherwise (ORDERED) the new job waits behind them. before (nil: none)
// is the inventory's write that goes with the request: the cancels, it
// and the new job are one transaction.
func (s *Service) request(ctx context.Context, h *eim.Host, boot *Boot, explicit bool, before func(eim.Tx) error) (*eim.PowerJob, error) {
	d := h.DesiredPowerState
	if d == "" || d == eim.PowerStateUnspecified {
		if explicit {
			return nil, eim.Errorf(eim.EINVALID, "desiredPowerState: required")
		}
		return nil, nil
	}
	if !explicit {
		// Most host events ask for nothing new: seen in a read, without a
		// write transaction (the store checks again in the request's).
		recent, _, err := s.o.Store.ListPowerJobs(ctx, h.Project, h.ResourceID, 1, 0)
		if err != nil {
			return nil, err
		}
		if len(recent) > 0 && recent[0].Desired == d {
			return nil, nil
		}
	}
	steps, err := Plan(d, boot, s.o.GracefulTimeout)
	if err != nil {
		if explicit {
			return nil, err
		}
		s.log.Info("desired power state not carried out by the BMC", "project", h.Project, "host", h.ResourceID, "err", err)
		return nil, nil
	}
	return s.enqueue(ctx, h, d, steps, s.o.JobTimeout, before, !explicit)
}

// Poll reads every BMC's power state every PollEvery until ctx ends (one
// process of the deployment runs it): the hosts' currentPowerState
// follows what the BMCs report, a state other than the desired one when
// no job is in flight is drift (logged, and shown as the original's
// mismatch status), and the BMCs' capabilities are read while unknown.
func (s *Service) Poll(ctx context.Context) error {
	t := time.NewTicker(s.o.PollEvery)
	defer t.Stop()
	for {
		if err := s.PollOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("poll of the BMCs", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PollOnce reads every BMC once. As many reads run at once as finish
// the round within 3/4 of PollEvery at the read time measured so far
// (kept across rounds): at least Workers, at most PollWorkers. A fleet's
// reads take mostly the BMCs' latency, so 10,000 BMCs at a third of a
// second each need some 75 at once where 4 would take 14 minutes.
func (s *Service) PollOnce(ctx context.Context) error {
	var bmcs []*eim.BMC
	if err := s.eachBMC(ctx, func(b *eim.BMC) error { bmcs = append(bmcs, b); return nil }); err != nil {
		return err
	}
	start := time.Now()
	budget := s.o.PollEvery * 3 / 4
	done := make(chan time.Duration, s.o.PollWorkers)
	inflight, peak := 0, 0
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, b := range bmcs {
		for {
			// Take in the reads that ended, then see whether one more
			// may start.
			for more := true; more; {
				select {
				case d := <-done:
					inflight--
					s.pace.add(d)
				default:
					more = false
				}
			}
			if inflight < s.pace.limit(len(bmcs)-i, budget-time.Since(start), s.o.Workers, s.o.PollWorkers) {
				break
			}
			select {
			case d := <-done:
				inflight--
				s.pace.add(d)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		inflight++
		peak = max(peak, inflight)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			s.pollOne(ctx, b)
			done <- time.Since(t)
		}()
	}
	wg.Wait()
	for len(done) > 0 {
		s.pace.add(<-done)
	}
	if took := time.Since(start); took > s.o.PollEvery && ctx.Err() == nil {
		s.log.Warn("a poll round of the BMCs outlasted --oob-poll-every", "bmcs", len(bmcs), "took", took.Round(time.Millisecond),
			"every", s.o.PollEvery, "at once", peak, "most allowed", s.o.PollWorkers, "read time", s.pace.mean().Round(time.Millisecond))
	}
	return nil
}

// pollPace is the poll's measure of a BMC read's time.
type pollPace struct {
	mu  sync.Mutex
	lat time.Duration // moving average; 0 before the first read
}

func (p *pollPace) add(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lat == 0 {
		p.lat = d
	} else {
		p.lat += (d - p.lat) / 16
	}
}

func (p *pollPace) mean() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lat
}

// limit is how many reads may run at once for left reads to end within
// the time left of the round, between least and most.
func (p *pollPace) limit(left int, within time.Duration, least, most int) int {
	lat := p.mean()
	switch {
	case lat == 0:
		return least
	case within <= 0:
		return most
	}
	need := int((time.Duration(left)*lat + within - 1) / within)
	return min(max(need, least), most)
}

// expected is the power state a BMC should report for a desired one (""
// none).
func expected(d eim.PowerState) eim.PowerState {
	switch d {
	case eim.PowerStateOn, eim.PowerStateReset, eim.PowerStateResetRepeat, eim.PowerStatePowerCycle:
		return eim.PowerStateOn
	case eim.PowerStateOff, eim.PowerStateSleep, eim.PowerStateHibernate:
		return d
	}
	return ""
}

func (s *Service) pollOne(ctx context.Context, b *eim.BMC) {
	conn, err := s.open(ctx, b)
	if err != nil {
		return
	}
	defer conn.Close()
	if len(b.Capabilities.ResetTypes) == 0 {
		if c, err := conn.Capabilities(ctx); err == nil {
			caps := &eim.BMCCapabilities{VirtualMedia: c.VirtualMedia}
			for _, a := range c.Actions {
				caps.ResetTypes = append(caps.ResetTypes, string(a))
			}
			for _, t := range c.BootTargets {
				caps.BootTargets = append(caps.BootTargets, string(t))
			}
			reach := eim.BMCReachable{Status: "REACHABLE", CheckedAt: eim.NewTime(time.Now())}
			if err := s.o.Store.RecordBMCFound(ctx, b.Project, b.HostID, caps, reach); err != nil {
				s.log.Info("BMC's capabilities not recorded", "host", b.HostID, "err", err)
			}
		}
	}
	st, err := conn.PowerState(ctx)
	s.reached(ctx, b.Project, b.HostID, err)
	if err != nil {
		return
	}
	obs := observed(st)
	if obs == "" {
		return // in transition
	}
	recent, _, err := s.o.Store.ListPowerJobs(ctx, b.Project, b.HostID, 1, 0)
	if err != nil || (len(recent) > 0 && !recent[0].State.Ended()) {
		return // a job is in flight: it writes the state
	}
	err = s.writePower(ctx, b.Project, b.HostID, func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool) {
		return s.observedPower(h, obs, "the BMC")
	})
	if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		s.log.Info("host's power state not recorded", "host", b.HostID, "err", err)
		return
	}
	s.enforce(ctx, b, obs)
}
