package sqlstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// Rollouts of edge workloads (eim.EdgeWorkloadRolloutStore): the tables of
// migration 0027, scoped to the project like the workloads'. Writes are
// conditional on the generation the writer read, so that the engine never
// overwrites a user's pause, nor a user the engine's step it did not see.

// SetEdgeWorkloadRolloutPolicy implements eim.EdgeWorkloadRolloutStore.
func (s *Store) SetEdgeWorkloadRolloutPolicy(ctx context.Context, project, name string, prev int64, policy *eim.RolloutPolicy) (*eim.EdgeWorkload, error) {
	now := eim.NewTime(s.now())
	var out *eim.EdgeWorkload
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		ws, err := s.edgeWorkloadsWhere(ctx, t, "project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
		}
		w := ws[0]
		oldPolicy := w.Spec.RolloutPolicy
		if w.Revision != prev {
			return eim.Errorf(eim.ECONFLICT, "edge workload %s changed meanwhile (its latest revision is not %d any more): read it again", name, prev)
		}
		w.Spec.RolloutPolicy = policy
		body, err := json.Marshal(w.Spec)
		if err != nil {
			return t.fail(err)
		}
		if _, err := t.exec(ctx, "UPDATE edge_workloads SET spec = ?, updated_at = ? WHERE project = ? AND name = ?",
			string(body), now.UnixMilli(), project, name); err != nil {
			return s.failf(t, "set rollout policy: %w", err)
		}
		t.addEvent(project, eim.KindEdgeWorkload, name, eim.OpUpdated)
		t.addAudit(ctx, project, eim.KindEdgeWorkload, name, eim.OpUpdated, map[string]eim.Change{"rolloutPolicy": {Old: mustJSON(oldPolicy), New: mustJSON(policy)}})
		w.UpdatedAt = now
		out = w
		return nil
	})
	return out, err
}

const rolloutColumns = "project, name, id, from_revision, to_revision, state, reason, since, batch, total, batch_started_at, progress_at, created_at, updated_at, generation"

func (s *Store) rolloutsWhere(ctx context.Context, t *tx, where string, args ...any) ([]*eim.EdgeWorkloadRollout, error) {
	rows, err := t.query(ctx, "SELECT "+rolloutColumns+" FROM edge_workload_rollouts WHERE "+where+" ORDER BY name", args...)
	if err != nil {
		return nil, s.failf(t, "read edge workload rollouts: %w", err)
	}
	defer rows.Close()
	var out []*eim.EdgeWorkloadRollout
	for rows.Next() {
		var (
			r                                               eim.EdgeWorkloadRollout
			since, started, progress, created, updated, bat int64
			total                                           int64
		)
		if err := rows.Scan(&r.Project, &r.Workload, &r.ID, &r.FromRevision, &r.ToRevision, &r.State, &r.Reason, &since, &bat, &total,
			&started, &progress, &created, &updated, &r.Generation); err != nil {
			return nil, t.fail(err)
		}
		r.Batch, r.Total = int(bat), int(total)
		r.Since, r.BatchStartedAt, r.ProgressAt = milli(since), milli(started), milli(progress)
		r.CreatedAt, r.UpdatedAt = milli(created), milli(updated)
		out = append(out, &r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failf(t, "read edge workload rollouts: %w", err)
	}
	return out, nil
}

// EdgeWorkloadRollouts implements eim.EdgeWorkloadRolloutStore.
func (s *Store) EdgeWorkloadRollouts(ctx context.Context, project string) ([]*eim.EdgeWorkloadRollout, error) {
	var out []*eim.EdgeWorkloadRollout
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		out, err = s.rolloutsWhere(ctx, etx.(*tx), "project = ?", project)
		return err
	})
	return out, err
}

// FindEdgeWorkloadRollout implements eim.EdgeWorkloadRolloutStore.
func (s *Store) FindEdgeWorkloadRollout(ctx context.Context, project, name string) (*eim.EdgeWorkloadRollout, error) {
	var out *eim.EdgeWorkloadRollout
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		rs, err := s.rolloutsWhere(ctx, etx.(*tx), "project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s has no rollout", name)
		}
		out = rs[0]
		return nil
	})
	return out, err
}

// EdgeWorkloadRolloutDevices implements eim.EdgeWorkloadRolloutStore.
func (s *Store) EdgeWorkloadRolloutDevices(ctx context.Context, project, name string) ([]eim.EdgeWorkloadRolloutDevice, error) {
	var out []eim.EdgeWorkloadRolloutDevice
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, "SELECT host_id, batch, state, since, reason FROM edge_workload_rollout_devices WHERE project = ? AND name = ? ORDER BY host_id", project, name)
		if err != nil {
			return s.failf(t, "read edge workload rollout devices: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d            eim.EdgeWorkloadRolloutDevice
				batch, since int64
			)
			if err := rows.Scan(&d.HostID, &batch, &d.State, &since, &d.Reason); err != nil {
				return t.fail(err)
			}
			d.Batch, d.Since = int(batch), milli(since)
			out = append(out, d)
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "read edge workload rollout devices: %w", err)
		}
		return nil
	})
	return out, err
}

func validRolloutState(st string) bool {
	switch st {
	case eim.RolloutProgressing, eim.RolloutPaused, eim.RolloutDone, eim.RolloutAborted, eim.RolloutFailed:
		return true
	}
	return false
}

func validRolloutDeviceState(st string) bool {
	switch st {
	case eim.RolloutDeviceWaiting, eim.RolloutDeviceUpdating, eim.RolloutDeviceDone, eim.RolloutDeviceFailed:
		return true
	}
	return false
}

// SaveEdgeWorkloadRollout implements eim.EdgeWorkloadRolloutStore.
func (s *Store) SaveEdgeWorkloadRollout(ctx context.Context, r *eim.EdgeWorkloadRollout, fresh bool, devices []eim.EdgeWorkloadRolloutDevice, removed []string) error {
	if r.Project == "" || r.Workload == "" || r.ToRevision <= 0 {
		return eim.Errorf(eim.EINVALID, "edge workload rollout: project, workload and revision required")
	}
	if !validRolloutState(r.State) {
		return eim.Errorf(eim.EINVALID, "edge workload rollout: state %q unknown", r.State)
	}
	for _, d := range devices {
		if !validRolloutDeviceState(d.State) {
			return eim.Errorf(eim.EINVALID, "edge workload rollout: device %s: state %q unknown", d.HostID, d.State)
		}
	}
	now := eim.NewTime(s.now())
	return s.run(ctx, r.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		// The workload and the hosts, locked (keyShare): a delete meanwhile
		// waits, or, committed first, is seen.
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?"+s.keyShare(""), r.Project, r.Workload); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", r.Workload)
		}
		cur, err := s.rolloutsWhere(ctx, t, "project = ? AND name = ?", r.Project, r.Workload)
		if err != nil {
			return err
		}
		var stored int64
		if len(cur) > 0 {
			stored = cur[0].Generation
		}
		if stored != r.Generation {
			return eim.Errorf(eim.ECONFLICT, "the rollout of edge workload %s changed meanwhile: read it again", r.Workload)
		}
		created := r.CreatedAt
		if created.IsZero() {
			created = now
		}
		args := []any{r.ID, r.FromRevision, r.ToRevision, r.State, r.Reason, r.Since.UnixMilli(), r.Batch, r.Total,
			r.BatchStartedAt.UnixMilli(), r.ProgressAt.UnixMilli(), now.UnixMilli(), stored + 1, r.Project, r.Workload}
		if len(cur) == 0 {
			if _, err := t.exec(ctx, "INSERT INTO edge_workload_rollouts (id, from_revision, to_revision, state, reason, since, batch, total, batch_started_at, progress_at, updated_at, generation, project, name, created_at)"+
				" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", append(args, created.UnixMilli())...); err != nil {
				return s.failf(t, "create edge workload rollout: %w", err)
			}
		} else {
			if fresh {
				if _, err := t.exec(ctx, "DELETE FROM edge_workload_rollout_devices WHERE project = ? AND name = ?", r.Project, r.Workload); err != nil {
					return s.failf(t, "start edge workload rollout: %w", err)
				}
			}
			// Conditional on the generation too, whatever the isolation
			// level: a write in between is never overwritten.
			res, err := t.exec(ctx, "UPDATE edge_workload_rollouts SET id = ?, from_revision = ?, to_revision = ?, state = ?, reason = ?, since = ?, batch = ?, total = ?,"+
				" batch_started_at = ?, progress_at = ?, updated_at = ?, generation = ?, created_at = ? WHERE project = ? AND name = ? AND generation = ?",
				append(args[:12:12], created.UnixMilli(), r.Project, r.Workload, stored)...)
			if err != nil {
				return s.failf(t, "save edge workload rollout: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return eim.Errorf(eim.ECONFLICT, "the rollout of edge workload %s changed meanwhile: read it again", r.Workload)
			}
		}
		for _, h := range removed {
			if _, err := t.exec(ctx, "DELETE FROM edge_workload_rollout_devices WHERE project = ? AND name = ? AND host_id = ?", r.Project, r.Workload, h); err != nil {
				return s.failf(t, "save edge workload rollout device: %w", err)
			}
		}
		for _, d := range devices {
			if ok, err := s.locked(ctx, t, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+s.keyShare(""), r.Project, d.HostID); err != nil || !ok {
				if err != nil {
					return err
				}
				continue // the host is gone: its row would go with it
			}
			if _, err := t.exec(ctx, "INSERT INTO edge_workload_rollout_devices (project, name, host_id, batch, state, since, reason) VALUES (?, ?, ?, ?, ?, ?, ?)"+
				" ON CONFLICT (project, name, host_id) DO UPDATE SET batch = excluded.batch, state = excluded.state, since = excluded.since, reason = excluded.reason",
				r.Project, r.Workload, d.HostID, d.Batch, d.State, d.Since.UnixMilli(), d.Reason); err != nil {
				return s.failf(t, "save edge workload rollout device: %w", err)
			}
		}
		r.Generation, r.UpdatedAt, r.CreatedAt = stored+1, now, created
		return nil
	})
}

// DeleteEdgeWorkloadRollout implements eim.EdgeWorkloadRolloutStore.
func (s *Store) DeleteEdgeWorkloadRollout(ctx context.Context, project, name string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if _, err := t.exec(ctx, "DELETE FROM edge_workload_rollouts WHERE project = ? AND name = ?", project, name); err != nil {
			return s.failf(t, "delete edge workload rollout: %w", err)
		}
		return nil
	})
}

// SetEdgeWorkloadRolloutState implements eim.EdgeWorkloadRolloutStore.
func (s *Store) SetEdgeWorkloadRolloutState(ctx context.Context, project, name string, from []string, state, reason string) (*eim.EdgeWorkloadRollout, error) {
	if !validRolloutState(state) {
		return nil, eim.Errorf(eim.EINVALID, "edge workload rollout: state %q unknown", state)
	}
	now := eim.NewTime(s.now())
	var out *eim.EdgeWorkloadRollout
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		cur, err := s.rolloutsWhere(ctx, t, "project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		if len(cur) == 0 {
			if !t.exists(ctx, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?", project, name) {
				return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
			}
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s has no rollout (it has no rolloutPolicy, or no revision was rolled out under it yet)", name)
		}
		r := cur[0]
		if !slices.Contains(from, r.State) {
			return eim.Errorf(eim.ECONFLICT, "the rollout of edge workload %s is %s: want it %s", name, r.State, strings.Join(from, " or "))
		}
		res, err := t.exec(ctx, "UPDATE edge_workload_rollouts SET state = ?, reason = ?, since = ?, updated_at = ?, generation = generation + 1 WHERE project = ? AND name = ? AND generation = ?",
			state, reason, now.UnixMilli(), now.UnixMilli(), project, name, r.Generation)
		if err != nil {
			return s.failf(t, "set edge workload rollout state: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return eim.Errorf(eim.ECONFLICT, "the rollout of edge workload %s changed meanwhile: try again", name)
		}
		t.addEvent(project, eim.KindEdgeWorkload, name, eim.OpUpdated)
		t.addAudit(ctx, project, eim.KindEdgeWorkload, name, eim.OpUpdated, map[string]eim.Change{"rolloutState": {Old: mustJSON(r.State), New: mustJSON(state)}})
		r.State, r.Reason, r.Since, r.UpdatedAt, r.Generation = state, reason, now, now, r.Generation+1
		out = r
		return nil
	})
	return out, err
}
