package workloads

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// The rollout engine: for a workload with a rollout policy, the targets
// loop asks it which revision each selected device must run. A new
// revision starts a rollout (stored: eim.EdgeWorkloadRollout and a row per
// device in a batch), and each step of the loop moves it on:
//
//  1. devices given the revision that report it Running are done; those
//     that do not within the batch's update timeout have failed (a late
//     success still counts);
//  2. the current batch is taken when it starts (the devices not in an
//     earlier batch that its selector matches, up to its limit, by host ID
//     and spread over the disruption groups; the last batch takes the
//     rest, and every device that joins the selector later);
//  3. waiting devices of the batch are given the revision as far as the
//     disruption budget and the maintenance windows let them;
//  4. a batch with nothing updating is judged: when enough of it runs the
//     revision (its success threshold) the next starts, otherwise the
//     rollout pauses with the reason. A batch held only by the budget
//     (its groups full of unavailable devices) is judged once it made no
//     progress for its update timeout: it never waits silently.
//
// A device not in a started batch keeps the revision it had (a new device
// gets none until the last batch). The state is written with the
// generation read, so a user's pause in between wins; the loop tries again
// on its next wake-up.

// hostNoConnection is the host module's status of a host whose heartbeats
// stopped: such a device counts as unavailable in its disruption budget.
const hostNoConnection = "No Connection"

// device is a selected device as the engine sees it.
type device struct {
	id      string
	labels  map[string]string
	offline bool
	site    string
	region  string
}

// maxListed bounds the hosts a reason names.
const maxListed = 5

func listHosts(ids []string) string {
	if len(ids) <= maxListed {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:maxListed], ", "), len(ids)-maxListed)
}

// rolloutStep is one step of a workload's rollout.
type rolloutStep struct {
	s      *Service
	w      *eim.EdgeWorkload
	pol    *eim.RolloutPolicy
	plan   []eim.RolloutBatchPlan
	devs   []device
	byID   map[string]*device
	stored map[string]int64 // host → its stored target
	now    time.Time
	win    *windows

	r     *eim.EdgeWorkloadRollout
	fresh bool
	rows  map[string]*eim.EdgeWorkloadRolloutDevice
	old   map[string]eim.EdgeWorkloadRolloutDevice
	stat  map[string]eim.EdgeWorkloadStatus
}

// rollout runs one step of w's rollout (r: its stored rollout, nil none)
// and returns each selected device's target (absent: none). On a
// conflict with another writer it returns the stored targets unchanged.
func (s *Service) rollout(ctx context.Context, w *eim.EdgeWorkload, devs []device, stored map[string]int64, r *eim.EdgeWorkloadRollout, win *windows) (map[string]int64, error) {
	st := &rolloutStep{s: s, w: w, pol: w.Spec.RolloutPolicy, plan: w.Spec.RolloutPolicy.Plan(), devs: devs, stored: stored,
		now: s.o.Now(), win: win, rows: map[string]*eim.EdgeWorkloadRolloutDevice{}, old: map[string]eim.EdgeWorkloadRolloutDevice{}}
	st.byID = make(map[string]*device, len(devs))
	for i := range devs {
		st.byID[devs[i].id] = &devs[i]
	}
	if r != nil && r.ToRevision == w.Revision {
		rows, err := s.o.Store.EdgeWorkloadRolloutDevices(ctx, w.Project, w.Name)
		if err != nil {
			return nil, err
		}
		for _, d := range rows {
			st.old[d.HostID] = d
			d := d
			st.rows[d.HostID] = &d
		}
		cp := *r
		st.r = &cp
	} else {
		st.start(r)
	}
	statuses, err := s.o.Store.EdgeWorkloadStatuses(ctx, w.Project, w.Name)
	if err != nil {
		return nil, err
	}
	st.stat = make(map[string]eim.EdgeWorkloadStatus, len(statuses))
	for _, x := range statuses {
		st.stat[x.HostID] = x
	}
	before := *st.r
	st.step()

	var (
		changed []eim.EdgeWorkloadRolloutDevice
		removed []string
	)
	for id, d := range st.rows {
		if o, ok := st.old[id]; !ok || o != *d {
			changed = append(changed, *d)
		}
	}
	for id := range st.old {
		if _, ok := st.rows[id]; !ok {
			removed = append(removed, id)
		}
	}
	sort.Slice(changed, func(i, j int) bool { return changed[i].HostID < changed[j].HostID })
	sort.Strings(removed)
	if st.fresh || before != *st.r || len(changed) > 0 || len(removed) > 0 {
		if err := s.o.Store.SaveEdgeWorkloadRollout(ctx, st.r, st.fresh, changed, removed); err != nil {
			if eim.ErrorCode(err) != eim.ECONFLICT {
				return nil, err
			}
			// A user changed it meanwhile (their event wakes the loop
			// again): leave the devices as they are.
			s.log.Debug("rollout changed meanwhile", "project", w.Project, "workload", w.Name)
			keep := map[string]int64{}
			for _, d := range devs {
				if rev := stored[d.id]; rev > 0 {
					keep[d.id] = rev
				}
			}
			return keep, nil
		}
	}
	return st.targets(), nil
}

// start begins the rollout of the workload's latest revision, after prev
// (nil: the workload's first rollout).
func (st *rolloutStep) start(prev *eim.EdgeWorkloadRollout) {
	now := eim.NewTime(st.now)
	r := &eim.EdgeWorkloadRollout{Project: st.w.Project, Workload: st.w.Name, ID: 1, ToRevision: st.w.Revision,
		State: eim.RolloutProgressing, Since: now, Total: len(st.devs)}
	if prev != nil {
		r.ID, r.FromRevision, r.Generation = prev.ID+1, prev.ToRevision, prev.Generation
	} else {
		r.FromRevision = commonRevision(st.stored)
	}
	if r.FromRevision == r.ToRevision {
		// The policy came to a workload whose devices run its latest
		// revision: nothing to roll out; devices that join later get it
		// as the last batch's.
		r.State, r.Reason, r.Batch = eim.RolloutDone, fmt.Sprintf("the devices ran revision %d when the rollout policy was set", r.ToRevision), len(st.plan)-1
		r.BatchStartedAt = now
	}
	st.r, st.fresh = r, true
}

// commonRevision is the revision most devices have (the highest of a
// tie); 0 when none has one.
func commonRevision(stored map[string]int64) int64 {
	n := map[int64]int{}
	var best int64
	for _, rev := range stored {
		n[rev]++
		if n[rev] > n[best] || n[rev] == n[best] && rev > best {
			best = rev
		}
	}
	return best
}

func (st *rolloutStep) batchPlan(i int) eim.RolloutBatchPlan {
	return st.plan[max(0, min(i, len(st.plan)-1))]
}

func (st *rolloutStep) running(id string) bool {
	x, ok := st.stat[id]
	return ok && x.Revision == st.r.ToRevision && x.Phase == eim.PhaseRunning
}

func (st *rolloutStep) set(d *eim.EdgeWorkloadRolloutDevice, state, reason string) {
	d.State, d.Reason, d.Since = state, reason, eim.NewTime(st.now)
}

func (st *rolloutStep) setState(state, reason string) {
	if st.r.State != state || st.r.Reason != reason {
		st.r.State, st.r.Reason, st.r.Since = state, reason, eim.NewTime(st.now)
	}
}

func (st *rolloutStep) step() {
	r := st.r
	now := eim.NewTime(st.now)
	// 1. Devices: gone, done, failed.
	for id, d := range st.rows {
		if st.byID[id] == nil {
			delete(st.rows, id)
			continue
		}
		switch d.State {
		case eim.RolloutDeviceUpdating:
			if st.running(id) {
				st.set(d, eim.RolloutDeviceDone, "")
				r.ProgressAt = now
			} else if tmo := st.batchPlan(d.Batch).UpdateTimeout; st.now.Sub(d.Since.Time) >= tmo {
				st.set(d, eim.RolloutDeviceFailed, st.failure(id, tmo))
				r.ProgressAt = now
			}
		case eim.RolloutDeviceFailed:
			if st.running(id) {
				st.set(d, eim.RolloutDeviceDone, "")
			}
		}
	}
	if r.State != eim.RolloutProgressing && r.State != eim.RolloutDone {
		return
	}
	for range len(st.plan) + 1 {
		if r.State == eim.RolloutProgressing && r.BatchStartedAt.IsZero() {
			st.take()
		}
		st.join()
		held := st.begin()
		if r.State != eim.RolloutProgressing || !st.judge(held) {
			return
		}
	}
}

// failure says why a device failed its update.
func (st *rolloutStep) failure(id string, tmo time.Duration) string {
	x, ok := st.stat[id]
	switch {
	case st.byID[id].offline:
		return fmt.Sprintf("no connection, not running revision %d after %s", st.r.ToRevision, tmo)
	case !ok:
		return fmt.Sprintf("no report of revision %d after %s", st.r.ToRevision, tmo)
	case x.Revision != st.r.ToRevision:
		return fmt.Sprintf("still reports revision %d (%s) after %s", x.Revision, x.Phase, tmo)
	}
	msg := fmt.Sprintf("%s at revision %d after %s", x.Phase, x.Revision, tmo)
	if x.LastError != "" {
		msg += ": " + x.LastError
	}
	return msg
}

// take starts batch r.Batch: its devices, or DONE after the last.
func (st *rolloutStep) take() {
	r := st.r
	now := eim.NewTime(st.now)
	for r.State == eim.RolloutProgressing {
		if r.Batch >= len(st.plan) {
			st.setState(eim.RolloutDone, fmt.Sprintf("every batch passed: the devices are at revision %d", r.ToRevision))
			r.Batch, r.BatchStartedAt = len(st.plan)-1, now
			return
		}
		b := st.plan[r.Batch]
		var free []string
		for _, d := range st.devs {
			if st.rows[d.id] == nil && (b.Selector == nil || b.Selector.Matches(d.labels)) {
				free = append(free, d.id)
			}
		}
		sort.Strings(free)
		st.spread(free)
		if b.Limit != "" {
			total := r.Total
			if total == 0 {
				total = len(st.devs)
			}
			free = free[:min(len(free), b.Limit.Of(total))]
		}
		for _, id := range free {
			st.rows[id] = &eim.EdgeWorkloadRolloutDevice{HostID: id, Batch: r.Batch, State: eim.RolloutDeviceWaiting, Since: now}
		}
		r.BatchStartedAt, r.ProgressAt = now, now
		if len(free) > 0 || r.Batch == len(st.plan)-1 {
			st.setState(eim.RolloutProgressing, "")
			return
		}
		r.Batch++ // an empty batch passes at once
	}
}

// spread orders ids (sorted) so that a batch takes devices of every
// disruption group in turn: the first of each group, then the second, …
// A batch then spreads over the groups instead of filling one group's
// budget while the others idle.
func (st *rolloutStep) spread(ids []string) {
	if st.pol.DisruptionBudget == nil || len(st.pol.DisruptionBudget.GroupBy) == 0 {
		return
	}
	rank := make(map[string]int, len(ids))
	group := make(map[string]string, len(ids))
	seen := map[string]int{}
	for _, id := range ids {
		g := st.group(st.byID[id])
		group[id], rank[id] = g, seen[g]
		seen[g]++
	}
	sort.SliceStable(ids, func(i, j int) bool {
		a, b := ids[i], ids[j]
		if rank[a] != rank[b] {
			return rank[a] < rank[b]
		}
		return group[a] < group[b]
	})
}

// join puts the devices that joined the selector into the last batch once
// it has started (before, the last batch takes them when it starts).
func (st *rolloutStep) join() {
	r := st.r
	last := len(st.plan) - 1
	if r.Batch != last || r.BatchStartedAt.IsZero() {
		return
	}
	for _, d := range st.devs {
		if st.rows[d.id] == nil {
			st.rows[d.id] = &eim.EdgeWorkloadRolloutDevice{HostID: d.id, Batch: last, State: eim.RolloutDeviceWaiting, Since: eim.NewTime(st.now)}
		}
	}
}

// holds are why waiting devices of the current batch did not start.
type holds struct {
	budget   []string // "group: n unavailable of max (hosts)"
	byBudget int
	window   int
	opens    int64 // the soonest opening of a window of a held device (unix s)
	never    []string
}

// group is a device's disruption group.
func (st *rolloutStep) group(d *device) string {
	b := st.pol.DisruptionBudget
	parts := make([]string, len(b.GroupBy))
	for i, k := range b.GroupBy {
		parts[i] = k + "=" + d.labels[k]
	}
	return strings.Join(parts, ",")
}

// begin gives the revision to the waiting devices that the budget and
// the windows let start, and says why the others of the current batch
// wait.
func (st *rolloutStep) begin() holds {
	var h holds
	r := st.r
	now := eim.NewTime(st.now)
	var waiting []*eim.EdgeWorkloadRolloutDevice
	for _, d := range st.rows {
		if d.State == eim.RolloutDeviceWaiting {
			waiting = append(waiting, d)
		}
	}
	if len(waiting) == 0 {
		return h
	}
	sort.Slice(waiting, func(i, j int) bool {
		if waiting[i].Batch != waiting[j].Batch {
			return waiting[i].Batch < waiting[j].Batch
		}
		return waiting[i].HostID < waiting[j].HostID
	})
	var (
		size, unavail, limit map[string]int
		blockers             map[string][]string
	)
	if st.pol.DisruptionBudget != nil {
		size, unavail, limit, blockers = map[string]int{}, map[string]int{}, map[string]int{}, map[string][]string{}
		for i := range st.devs {
			d := &st.devs[i]
			g := st.group(d)
			size[g]++
			row := st.rows[d.id]
			switch {
			case row != nil && row.State == eim.RolloutDeviceUpdating:
				unavail[g]++
			case d.offline:
				unavail[g]++
				blockers[g] = append(blockers[g], d.id+" (no connection)")
			case row != nil && row.State == eim.RolloutDeviceFailed:
				unavail[g]++
				blockers[g] = append(blockers[g], d.id+" (failed)")
			}
		}
		for g, n := range size {
			limit[g] = st.pol.DisruptionBudget.MaxUnavailable.Of(n)
		}
	}
	full := map[string]bool{}
	for _, d := range waiting {
		dev := st.byID[d.HostID]
		current := d.Batch == r.Batch
		if st.stored[d.HostID] == r.ToRevision {
			// It has the revision already (a rollout started by a
			// policy over devices that had it): starting it changes
			// nothing on the device, so neither budget nor window holds
			// it.
			if size != nil {
				unavail[st.group(dev)]++
			}
			st.set(d, eim.RolloutDeviceUpdating, "")
			r.ProgressAt = now
			continue
		}
		if st.pol.HonorMaintenanceWindows && st.win != nil {
			open, next := st.win.openAt(dev, st.now.Unix())
			if !open {
				if next == 0 {
					if d.Reason == "" {
						d.Reason = "no maintenance window, now or later"
					}
					if current {
						h.never = append(h.never, d.HostID)
					}
				} else {
					if d.Reason != "waiting for its maintenance window" {
						d.Reason = "waiting for its maintenance window"
					}
					if current {
						h.window++
						if h.opens == 0 || next < h.opens {
							h.opens = next
						}
					}
				}
				continue
			}
		}
		if size != nil {
			g := st.group(dev)
			if unavail[g] >= limit[g] {
				if current {
					h.byBudget++
					if !full[g] {
						full[g] = true
						msg := fmt.Sprintf("%s has %d unavailable of at most %d", orAll(g), unavail[g], limit[g])
						if len(blockers[g]) > 0 {
							msg += ": " + listHosts(blockers[g])
						}
						h.budget = append(h.budget, msg)
					}
				}
				continue
			}
			unavail[g]++
		}
		st.set(d, eim.RolloutDeviceUpdating, "")
		r.ProgressAt = now
	}
	sort.Strings(h.budget)
	return h
}

func orAll(g string) string {
	if g == "" {
		return "the whole selection"
	}
	return "group " + g
}

// judge decides on the current batch once nothing in it updates: the next
// batch (true: take it now), or a pause. Otherwise it says what the batch
// waits for.
func (st *rolloutStep) judge(h holds) bool {
	r := st.r
	b := st.batchPlan(r.Batch)
	var n, done, updating, waiting int
	var failed []string
	for _, d := range st.rows {
		if d.Batch != r.Batch {
			continue
		}
		n++
		switch d.State {
		case eim.RolloutDeviceDone:
			done++
		case eim.RolloutDeviceUpdating:
			updating++
		case eim.RolloutDeviceWaiting:
			waiting++
		case eim.RolloutDeviceFailed:
			failed = append(failed, d.HostID)
		}
	}
	sort.Strings(failed)
	label := fmt.Sprintf("batch %d of %d", r.Batch+1, len(st.plan))
	if len(h.never) > 0 {
		sort.Strings(h.never)
		st.setState(eim.RolloutFailed, fmt.Sprintf("%s: %d devices have no maintenance window, now or later (%s): give them a schedule or set honorMaintenanceWindows false, then resume",
			label, len(h.never), listHosts(h.never)))
		return false
	}
	stalled := updating == 0 && h.window == 0 && st.now.Sub(r.ProgressAt.Time) >= b.UpdateTimeout
	if updating > 0 || (waiting > 0 && !stalled) {
		var why []string
		if updating > 0 {
			why = append(why, fmt.Sprintf("its devices to run revision %d (update timeout %s)", r.ToRevision, b.UpdateTimeout))
		}
		if h.byBudget > 0 {
			why = append(why, "the disruption budget: "+strings.Join(h.budget, "; "))
		}
		if h.window > 0 {
			why = append(why, "maintenance windows (the next opens at "+time.Unix(h.opens, 0).UTC().Format(time.RFC3339)+")")
		}
		if len(why) == 0 {
			why = append(why, "its devices to start")
		}
		st.setState(eim.RolloutProgressing, label+": waiting for "+strings.Join(why, " and "))
		return false
	}
	if b.SuccessThreshold.Met(done, n) {
		r.Batch++
		r.BatchStartedAt = eim.Time{}
		return true
	}
	reason := fmt.Sprintf("%s missed its success threshold (%s): %d of %d devices run revision %d", label, b.SuccessThreshold, done, n, r.ToRevision)
	if len(failed) > 0 {
		reason += "; failed: " + listHosts(failed)
	}
	if waiting > 0 {
		reason += fmt.Sprintf("; %d never started (%s)", waiting, strings.Join(h.budget, "; "))
	}
	reason += fmt.Sprintf(". Resume goes on with the next batch; rollback returns to revision %d", r.FromRevision)
	if r.FromRevision == 0 {
		reason = strings.TrimSuffix(reason, fmt.Sprintf("; rollback returns to revision %d", r.FromRevision)) + "; there is no earlier revision to roll back to"
	}
	st.setState(eim.RolloutPaused, reason)
	r.Batch++
	r.BatchStartedAt = eim.Time{}
	return false
}

// targets is each selected device's revision: the rollout's for a device
// given it, else the one it had.
func (st *rolloutStep) targets() map[string]int64 {
	out := make(map[string]int64, len(st.devs))
	for _, d := range st.devs {
		if row := st.rows[d.id]; row != nil && row.State != eim.RolloutDeviceWaiting {
			out[d.id] = st.r.ToRevision
		} else if rev := st.stored[d.id]; rev > 0 {
			out[d.id] = rev
		}
	}
	return out
}

// windows are a project's maintenance schedules, by what they target.
type windows struct {
	byTarget map[string][]schedule // host, site or region ID → its schedules
	parent   map[string]string     // region → parent region
}

type schedule interface {
	OpenAt(t int64) (bool, int64)
}

// openAt reports whether a window of d (its host's, its site's or its
// regions') is open at t, and otherwise when the next opens (0: never).
func (w *windows) openAt(d *device, t int64) (open bool, next int64) {
	ids := []string{d.id, d.site}
	for reg, n := d.region, 0; reg != "" && n < 16; reg, n = w.parent[reg], n+1 {
		ids = append(ids, reg)
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		for _, s := range w.byTarget[id] {
			if ok, _ := s.OpenAt(t); ok {
				return true, 0
			}
			if n := nextOpening(s, t); n > 0 && (next == 0 || n < next) {
				next = n
			}
		}
	}
	return false, next
}
