package workloads

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// The targets loop: one process of the deployment at a time decides, per
// project, which revision each device must run of each workload (its
// target) and stores the difference with what is stored
// (SetEdgeWorkloadTargets, which gives the devices whose set changed a
// new version). It is level-based: woken by the change feed (a workload,
// a host, a site, a region or an instance changed: labels and selectors
// may select other devices now), it reconciles the hosts named, or the
// whole project (handleEvents says when); a re-list at the start and
// every Options.Relist makes up for a missed wake-up.

// Reconcile runs the targets loop until ctx ends.
func (s *Service) Reconcile(ctx context.Context) error {
	r := feed.New(feed.Options{Store: s.o.FeedStore, Name: "edge workload targets", Logger: s.log, Metrics: s.o.Metrics, MinWait: s.o.RetryWait,
		Kinds:       []eim.Kind{eim.KindEdgeWorkload, eim.KindHost, eim.KindSite, eim.KindRegion, eim.KindInstance},
		Handle:      s.handleEvents,
		Relist:      s.reconcileAll,
		RelistEvery: s.o.Relist,
		// The handler keeps only the batch's projects, and reconciles
		// each once: a storm of host events (a site's hosts losing
		// their connection, the fleet's first heartbeats after a
		// restart) costs one reconcile of a project per ten thousand
		// events, not per hundred (a reconcile of 100,000 devices reads
		// them all: seconds of CPU).
		MaxBatch: 10000,
	})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.Run(gctx) })
	g.Go(func() error { return s.tickRollouts(gctx) })
	g.Go(func() error { return s.sweepStatus(gctx) })
	return g.Wait()
}

// sweepStatus marks, every quarter of Options.StatusGrace, the devices
// whose version moved more than StatusGrace ago and whose stored status
// names an older version: a device that never reported what it was
// given (a lost report, a device that was away, a status table restored
// from an older copy). Their heartbeats' answers then ask for their full
// status (Versions.StatusWanted) until a report clears the mark. The
// mark is in the store, one statement for every project, so it runs here,
// in the one process holding the targets loop.
func (s *Service) sweepStatus(ctx context.Context) error {
	t := time.NewTicker(max(s.o.StatusGrace/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := s.o.Store.WantStaleEdgeDeviceStatus(ctx, s.o.Now().Add(-s.o.StatusGrace))
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("workloads: look for devices whose status is stale", "err", err)
			}
			continue
		}
		if n > 0 {
			s.log.Info("asking devices for their full workloads status", "devices", n)
		}
	}
}

// tickRollouts steps the rollouts every Options.RolloutTick: devices'
// reports of their status and the passing of update timeouts and windows
// move them, and neither is a change event. Only projects with a
// rollout in progress are stepped (a step reads the whole project); a
// paused, failed or aborted rollout waits for a user's action, which is an
// event, and a done one's late joiners move on the feed's events and its
// re-list.
func (s *Service) tickRollouts(ctx context.Context) error {
	t := time.NewTicker(s.o.RolloutTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ws, err := s.o.Store.ListEdgeWorkloads(ctx, "")
		if err != nil {
			s.log.Warn("rollouts: list workloads", "err", err)
			continue
		}
		seen := map[string]bool{}
		for _, w := range ws {
			if w.Spec.RolloutPolicy == nil || seen[w.Project] {
				continue
			}
			seen[w.Project] = true
			if err := s.tickProject(ctx, w.Project); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND && ctx.Err() == nil {
				s.log.Warn("rollouts: step", "project", w.Project, "err", err)
			}
		}
	}
}

func (s *Service) reconcileAll(ctx context.Context) error {
	ps, err := s.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := s.reconcileProject(ctx, p.Name); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
	}
	return nil
}

// ReconcileProject sets the targets of a project's devices now (the
// targets loop does it on every change; tests and tools call it).
func (s *Service) ReconcileProject(ctx context.Context, project string) error {
	return s.reconcileProject(ctx, project)
}

// hostsAtOnce is the most hosts of a project a batch of events may name
// for the targets loop to reconcile them one by one; more, and it
// reconciles the whole project (a host costs two reads, a project's
// reconcile a read of every host).
const hostsAtOnce = 1000

// handleEvents is the targets loop's handler. Events of a project's
// hosts alone reconcile those hosts (reconcileHosts); any other event (a
// workload, a site, a region, an instance: they may change what many
// devices are selected by) reconciles the whole project, once a batch.
func (s *Service) handleEvents(ctx context.Context, evs []eim.Event) error {
	whole := map[string]bool{}
	hosts := map[string]map[string]bool{}
	for _, ev := range evs {
		switch {
		case ev.Project == "":
		case ev.Kind == eim.KindHost:
			if hosts[ev.Project] == nil {
				hosts[ev.Project] = map[string]bool{}
			}
			hosts[ev.Project][ev.ID] = true
		default:
			whole[ev.Project] = true
		}
	}
	for p, ids := range hosts {
		if len(ids) > hostsAtOnce {
			whole[p] = true
		}
		if whole[p] {
			continue
		}
		if err := s.reconcileHosts(ctx, p, slices.Sorted(maps.Keys(ids))); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(whole)) {
		if err := s.reconcileProject(ctx, p); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
	}
	return nil
}

// reconcileHosts reconciles the targets of the named hosts of a project:
// what each one's labels select now against what is stored for it. A
// project with a workload under a rollout policy is reconciled whole
// instead (the rollout engine decides over every device it selects), and
// so is one without workloads.
func (s *Service) reconcileHosts(ctx context.Context, project string, ids []string) error {
	ws, err := s.o.Store.ListEdgeWorkloads(ctx, project)
	if err != nil {
		return err
	}
	if len(ws) == 0 || slices.ContainsFunc(ws, func(w *eim.EdgeWorkload) bool { return w.Spec.RolloutPolicy != nil }) {
		// No workload: the project's reconcile is two reads (and
		// removes what its deleted workloads left).
		return s.reconcileProject(ctx, project)
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	s.reconciles.WithLabelValues("hosts").Inc()
	var changes []eim.EdgeWorkloadTarget
	for _, id := range ids {
		stored, err := s.o.Store.EdgeWorkloadTargets(ctx, project, id)
		if err != nil {
			return err
		}
		want := map[string]int64{} // workload → revision
		r, err := s.o.Inventory.Get(ctx, project, eim.KindHost, id)
		switch {
		case eim.ErrorCode(err) == eim.ENOTFOUND:
		case err != nil:
			return err
		default:
			if h, ok := r.(*eim.Host); ok && h.DesiredState != eim.HostStateDeleted {
				labels := eim.DeviceLabels(h)
				for _, w := range ws {
					if selects(w, h.ResourceID, labels) {
						want[w.Name] = w.Revision
					}
				}
			}
		}
		for _, t := range stored {
			if rev, ok := want[t.Workload]; !ok || rev != t.Revision {
				changes = append(changes, eim.EdgeWorkloadTarget{Workload: t.Workload, HostID: id, Revision: rev})
			}
			delete(want, t.Workload)
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			changes = append(changes, eim.EdgeWorkloadTarget{Workload: name, HostID: id, Revision: want[name]})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return s.o.Store.SetEdgeWorkloadTargets(ctx, project, changes)
}

func (s *Service) reconcileProject(ctx context.Context, project string) error {
	// The feed's handler and the rollouts' ticker both step rollouts:
	// one at a time.
	s.recMu.Lock()
	defer s.recMu.Unlock()
	s.reconciles.WithLabelValues("project").Inc()
	ws, err := s.o.Store.ListEdgeWorkloads(ctx, project)
	if err != nil {
		return err
	}
	stored, err := s.o.Store.EdgeWorkloadTargets(ctx, project, "")
	if err != nil {
		return err
	}
	if len(ws) == 0 && len(stored) == 0 {
		return nil
	}
	selected := map[string][]device{} // by workload
	if len(ws) > 0 {
		err := s.eachDevice(ctx, project, func(h *eim.Host) {
			labels := eim.DeviceLabels(h)
			for _, w := range ws {
				if selects(w, h.ResourceID, labels) {
					d := device{id: h.ResourceID, labels: labels, offline: h.HostStatus == hostNoConnection, site: h.SiteID}
					if h.Site != nil {
						d.region = h.Site.RegionID
					}
					selected[w.Name] = append(selected[w.Name], d)
				}
			}
		})
		if err != nil {
			return err
		}
	}
	storedBy := map[string]map[string]int64{} // workload → host → revision
	for _, t := range stored {
		if storedBy[t.Workload] == nil {
			storedBy[t.Workload] = map[string]int64{}
		}
		storedBy[t.Workload][t.HostID] = t.Revision
	}
	want := map[[2]string]int64{}
	rollouts := map[string]*eim.EdgeWorkloadRollout{}
	if len(ws) > 0 {
		rs, err := s.o.Store.EdgeWorkloadRollouts(ctx, project)
		if err != nil {
			return err
		}
		for _, r := range rs {
			rollouts[r.Workload] = r
		}
	}
	var win *windows
	for _, w := range ws {
		pol := w.Spec.RolloutPolicy
		if pol == nil {
			for _, d := range selected[w.Name] {
				want[[2]string{w.Name, d.id}] = w.Revision
			}
			continue
		}
		if pol.HonorMaintenanceWindows && win == nil {
			if win, err = s.loadWindows(ctx, project); err != nil {
				return err
			}
		}
		revs, err := s.rollout(ctx, w, selected[w.Name], storedBy[w.Name], rollouts[w.Name], win)
		if err != nil {
			return fmt.Errorf("rollout of edge workload %s: %w", w.Name, err)
		}
		for id, rev := range revs {
			want[[2]string{w.Name, id}] = rev
		}
	}
	// A workload whose policy was removed has no rollout any more.
	for name := range rollouts {
		if i := slices.IndexFunc(ws, func(w *eim.EdgeWorkload) bool { return w.Name == name }); i >= 0 && ws[i].Spec.RolloutPolicy == nil {
			if err := s.o.Store.DeleteEdgeWorkloadRollout(ctx, project, name); err != nil {
				return err
			}
		}
	}
	var changes []eim.EdgeWorkloadTarget
	have := map[[2]string]bool{}
	for _, t := range stored {
		k := [2]string{t.Workload, t.HostID}
		have[k] = true
		switch rev, ok := want[k]; {
		case !ok:
			changes = append(changes, eim.EdgeWorkloadTarget{Workload: t.Workload, HostID: t.HostID})
		case rev != t.Revision:
			changes = append(changes, eim.EdgeWorkloadTarget{Workload: t.Workload, HostID: t.HostID, Revision: rev})
		}
	}
	for k, rev := range want {
		if !have[k] {
			changes = append(changes, eim.EdgeWorkloadTarget{Workload: k[0], HostID: k[1], Revision: rev})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].HostID != changes[j].HostID {
			return changes[i].HostID < changes[j].HostID
		}
		return changes[i].Workload < changes[j].Workload
	})
	return s.o.Store.SetEdgeWorkloadTargets(ctx, project, changes)
}

// selects reports whether w selects the device.
func selects(w *eim.EdgeWorkload, hostID string, labels map[string]string) bool {
	if w.Spec.Device != "" {
		return w.Spec.Device == hostID
	}
	return w.Spec.DeviceSelector.Matches(labels)
}

// eachDevice calls fn with every host of the project, expanded (what it
// inherits, its site and instance), in ID order (inventory.Each).
func (s *Service) eachDevice(ctx context.Context, project string, fn func(*eim.Host)) error {
	return s.o.Inventory.Each(ctx, project, eim.KindHost, func(r eim.Resource) error {
		if h, ok := r.(*eim.Host); ok && h.DesiredState != eim.HostStateDeleted {
			fn(h)
		}
		return nil
	})
}

// tickProject steps a project's rollouts if one is in progress.
func (s *Service) tickProject(ctx context.Context, project string) error {
	rs, err := s.o.Store.EdgeWorkloadRollouts(ctx, project)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.State == eim.RolloutProgressing {
			return s.reconcileProject(ctx, project)
		}
	}
	return nil
}
