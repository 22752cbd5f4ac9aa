package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// Edge workloads (eim.EdgeWorkloadStore): the tables of migration 0023,
// scoped to the project (row-level security on PostgreSQL). A workload's
// write records an event and an audit record (KindEdgeWorkload, its name;
// the audit names the revision, not the spec, which holds sealed
// secrets); a change of
// devices' versions one event for the project (KindEdgeDevices, the
// project's name), which the versions caches follow.

var _ eim.EdgeWorkloadStore = (*Store)(nil)

func (s *Store) failf(t *tx, format string, err error) error {
	return t.fail(s.d.translate(fmt.Errorf(format, err), nil))
}

// keyShare locks, on PostgreSQL, the rows a write reads to check that
// the workload or host its rows refer to exists: a concurrent delete of
// that workload or host then waits for the write's commit, or, if it
// committed first, the read does not find the row and the write answers
// as if it had never existed. Without it the delete could commit between
// the check and the insert, whose foreign key would fail (an internal
// error). It is the lock the foreign key's own check takes, so it costs
// no more. SQLite needs none: its writes are one at a time. of names the
// table (of a join) whose rows are locked; "" for every table's.
func (s *Store) keyShare(of string) string {
	switch {
	case !s.d.pg:
		return ""
	case of != "":
		return " FOR KEY SHARE OF " + of
	}
	return " FOR KEY SHARE"
}

// locked reads whether the row q selects exists; q ends with its lock
// (keyShare). Its error (a deadlock, say, which runTx runs again) is the
// transaction's, never taken for a missing row.
func (s *Store) locked(ctx context.Context, t *tx, q string, args ...any) (bool, error) {
	var one int
	err := t.q.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.failf(t, "check edge workload reference: %w", err)
	}
	return true, nil
}

// CreateEdgeWorkload implements eim.EdgeWorkloadStore.
func (s *Store) CreateEdgeWorkload(ctx context.Context, w *eim.EdgeWorkload) error {
	if w.Project == "" || w.Name == "" {
		return eim.Errorf(eim.EINVALID, "edge workload: project and name required")
	}
	spec, err := json.Marshal(w.Spec)
	if err != nil {
		return err
	}
	now := eim.NewTime(s.now())
	return s.run(ctx, w.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if t.exists(ctx, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?", w.Project, w.Name) {
			return eim.Errorf(eim.ECONFLICT, "edge workload %s exists already", w.Name)
		}
		if _, err := t.exec(ctx, "INSERT INTO edge_workloads (project, name, revision, spec, created_at, updated_at) VALUES (?, ?, 1, ?, ?, ?)",
			w.Project, w.Name, string(spec), now.UnixMilli(), now.UnixMilli()); err != nil {
			return s.failf(t, "create edge workload: %w", err)
		}
		if _, err := t.exec(ctx, "INSERT INTO edge_workload_revisions (project, name, revision, spec, created_at) VALUES (?, ?, 1, ?, ?)",
			w.Project, w.Name, string(spec), now.UnixMilli()); err != nil {
			return s.failf(t, "create edge workload revision: %w", err)
		}
		t.addEvent(w.Project, eim.KindEdgeWorkload, w.Name, eim.OpCreated)
		t.addAudit(ctx, w.Project, eim.KindEdgeWorkload, w.Name, eim.OpCreated, revisionChange(0, 1))
		w.Revision, w.CreatedAt, w.UpdatedAt = 1, now, now
		return nil
	})
}

// ReviseEdgeWorkload implements eim.EdgeWorkloadStore.
func (s *Store) ReviseEdgeWorkload(ctx context.Context, project, name string, prev int64, spec eim.EdgeWorkloadSpec) (*eim.EdgeWorkload, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	now := eim.NewTime(s.now())
	var out *eim.EdgeWorkload
	err = s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "UPDATE edge_workloads SET revision = revision + 1, spec = ?, updated_at = ? WHERE project = ? AND name = ? AND revision = ?",
			string(body), now.UnixMilli(), project, name, prev)
		if err != nil {
			return s.failf(t, "revise edge workload: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			if !t.exists(ctx, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?", project, name) {
				return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
			}
			return eim.Errorf(eim.ECONFLICT, "edge workload %s changed meanwhile (its latest revision is not %d any more): read it again", name, prev)
		}
		if _, err := t.exec(ctx, "INSERT INTO edge_workload_revisions (project, name, revision, spec, created_at) VALUES (?, ?, ?, ?, ?)",
			project, name, prev+1, string(body), now.UnixMilli()); err != nil {
			return s.failf(t, "revise edge workload: %w", err)
		}
		t.addEvent(project, eim.KindEdgeWorkload, name, eim.OpUpdated)
		t.addAudit(ctx, project, eim.KindEdgeWorkload, name, eim.OpUpdated, revisionChange(prev, prev+1))
		ws, err := s.edgeWorkloadsWhere(ctx, t, "project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		out = ws[0]
		return nil
	})
	return out, err
}

func (s *Store) edgeWorkloadsWhere(ctx context.Context, t *tx, where string, args ...any) ([]*eim.EdgeWorkload, error) {
	rows, err := t.query(ctx, "SELECT project, name, revision, spec, created_at, updated_at FROM edge_workloads WHERE "+where+" ORDER BY project, name", args...)
	if err != nil {
		return nil, s.failf(t, "read edge workloads: %w", err)
	}
	defer rows.Close()
	var out []*eim.EdgeWorkload
	for rows.Next() {
		var (
			w                eim.EdgeWorkload
			spec             string
			created, updated int64
		)
		if err := rows.Scan(&w.Project, &w.Name, &w.Revision, &spec, &created, &updated); err != nil {
			return nil, t.fail(err)
		}
		if err := json.Unmarshal([]byte(spec), &w.Spec); err != nil {
			return nil, t.fail(fmt.Errorf("edge workload %s: spec: %w", w.Name, err))
		}
		w.CreatedAt, w.UpdatedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated)
		out = append(out, &w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failf(t, "read edge workloads: %w", err)
	}
	return out, nil
}

// revisionChange is the audit record's change of a workload's revision
// (0: none).
func revisionChange(old, rev int64) map[string]eim.Change {
	o := jsonNull
	if old > 0 {
		o = mustJSON(old)
	}
	return map[string]eim.Change{"revision": {Old: o, New: mustJSON(rev)}}
}

// FindEdgeWorkload implements eim.EdgeWorkloadStore.
func (s *Store) FindEdgeWorkload(ctx context.Context, project, name string) (*eim.EdgeWorkload, error) {
	var out *eim.EdgeWorkload
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		ws, err := s.edgeWorkloadsWhere(ctx, etx.(*tx), "project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
		}
		out = ws[0]
		return nil
	})
	return out, err
}

// ListEdgeWorkloads implements eim.EdgeWorkloadStore.
func (s *Store) ListEdgeWorkloads(ctx context.Context, project string) ([]*eim.EdgeWorkload, error) {
	var out []*eim.EdgeWorkload
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		if project == "" {
			out, err = s.edgeWorkloadsWhere(ctx, etx.(*tx), "1 = 1")
		} else {
			out, err = s.edgeWorkloadsWhere(ctx, etx.(*tx), "project = ?", project)
		}
		return err
	})
	return out, err
}

// EdgeWorkloadRevisions implements eim.EdgeWorkloadStore.
func (s *Store) EdgeWorkloadRevisions(ctx context.Context, project, name string) ([]*eim.EdgeWorkloadRevision, error) {
	var out []*eim.EdgeWorkloadRevision
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		if !t.exists(ctx, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?", project, name) {
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
		}
		rows, err := t.query(ctx, "SELECT revision, spec, created_at FROM edge_workload_revisions WHERE project = ? AND name = ? ORDER BY revision", project, name)
		if err != nil {
			return s.failf(t, "read edge workload revisions: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r := &eim.EdgeWorkloadRevision{Project: project, Name: name}
			var (
				spec    string
				created int64
			)
			if err := rows.Scan(&r.Revision, &spec, &created); err != nil {
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(spec), &r.Spec); err != nil {
				return t.fail(fmt.Errorf("edge workload %s revision %d: %w", name, r.Revision, err))
			}
			r.CreatedAt = eim.TimeFromUnixMilli(created)
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "read edge workload revisions: %w", err)
		}
		return nil
	})
	return out, err
}

// bumpDevices gives each host of hosts a new version; a host deleted
// meanwhile (by a concurrent transaction) has none.
func (s *Store) bumpDevices(ctx context.Context, t *tx, project string, hosts []string) error {
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	now := s.now().UnixMilli()
	for _, h := range hosts {
		if _, err := t.exec(ctx, "INSERT INTO edge_devices (project, host_id, version, version_at) SELECT project, id, 1, CAST(? AS BIGINT) FROM hosts WHERE project = ? AND id = ?"+s.keyShare("")+
			" ON CONFLICT (project, host_id) DO UPDATE SET version = edge_devices.version + 1, version_at = excluded.version_at",
			now, project, h); err != nil {
			return s.failf(t, "bump device version: %w", err)
		}
	}
	if len(hosts) > 0 {
		t.addEvent(project, eim.KindEdgeDevices, project, eim.OpUpdated)
	}
	return nil
}

func (s *Store) column(ctx context.Context, t *tx, q string, args ...any) ([]string, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, s.failf(t, "read: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, t.fail(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failf(t, "read: %w", err)
	}
	return out, nil
}

// DeleteEdgeWorkload implements eim.EdgeWorkloadStore.
func (s *Store) DeleteEdgeWorkload(ctx context.Context, project, name string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		hosts, err := s.column(ctx, t, "SELECT host_id FROM edge_workload_targets WHERE project = ? AND name = ?", project, name)
		if err != nil {
			return err
		}
		res, err := t.exec(ctx, "DELETE FROM edge_workloads WHERE project = ? AND name = ?", project, name)
		if err != nil {
			return s.failf(t, "delete edge workload: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
		}
		t.addEvent(project, eim.KindEdgeWorkload, name, eim.OpDeleted)
		t.addAudit(ctx, project, eim.KindEdgeWorkload, name, eim.OpDeleted, nil)
		return s.bumpDevices(ctx, t, project, hosts)
	})
}

// EdgeWorkloadTargets implements eim.EdgeWorkloadStore.
func (s *Store) EdgeWorkloadTargets(ctx context.Context, project, hostID string) ([]eim.EdgeWorkloadTarget, error) {
	var out []eim.EdgeWorkloadTarget
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		q, args := "SELECT name, host_id, revision FROM edge_workload_targets WHERE project = ?", []any{project}
		if hostID != "" {
			q, args = q+" AND host_id = ?", append(args, hostID)
		}
		rows, err := t.query(ctx, q+" ORDER BY name, host_id", args...)
		if err != nil {
			return s.failf(t, "read edge workload targets: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var tg eim.EdgeWorkloadTarget
			if err := rows.Scan(&tg.Workload, &tg.HostID, &tg.Revision); err != nil {
				return t.fail(err)
			}
			out = append(out, tg)
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "read edge workload targets: %w", err)
		}
		return nil
	})
	return out, err
}

// SetEdgeWorkloadTargets implements eim.EdgeWorkloadStore.
func (s *Store) SetEdgeWorkloadTargets(ctx context.Context, project string, changes []eim.EdgeWorkloadTarget) error {
	if len(changes) == 0 {
		return nil
	}
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		var bumped []string
		for _, c := range changes {
			if c.Revision <= 0 {
				res, err := t.exec(ctx, "DELETE FROM edge_workload_targets WHERE project = ? AND name = ? AND host_id = ?", project, c.Workload, c.HostID)
				if err != nil {
					return s.failf(t, "remove edge workload target: %w", err)
				}
				if n, _ := res.RowsAffected(); n > 0 {
					bumped = append(bumped, c.HostID)
				}
				continue
			}
			// The host and the workload, locked (keyShare): either
			// deleted meanwhile, the target is not set.
			if ok, err := s.locked(ctx, t, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+s.keyShare(""), project, c.HostID); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := s.locked(ctx, t, "SELECT 1 FROM edge_workload_revisions r JOIN edge_workloads w ON w.project = r.project AND w.name = r.name"+
				" WHERE r.project = ? AND r.name = ? AND r.revision = ?"+s.keyShare("w"), project, c.Workload, c.Revision); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			res, err := t.exec(ctx, "INSERT INTO edge_workload_targets (project, name, host_id, revision) VALUES (?, ?, ?, ?)"+
				" ON CONFLICT (project, name, host_id) DO UPDATE SET revision = excluded.revision WHERE edge_workload_targets.revision <> excluded.revision",
				project, c.Workload, c.HostID, c.Revision)
			if err != nil {
				return s.failf(t, "set edge workload target: %w", err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				bumped = append(bumped, c.HostID)
			}
		}
		return s.bumpDevices(ctx, t, project, bumped)
	})
}

// DeviceWorkloadVersions implements eim.EdgeWorkloadStore.
func (s *Store) DeviceWorkloadVersions(ctx context.Context, project string) (map[string]map[string]eim.DeviceVersion, error) {
	out := map[string]map[string]eim.DeviceVersion{}
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		clear(out)
		q, args := "SELECT project, host_id, version, status_wanted FROM edge_devices", []any(nil)
		if project != "" {
			q, args = q+" WHERE project = ?", []any{project}
		}
		rows, err := t.query(ctx, q, args...)
		if err != nil {
			return s.failf(t, "read device versions: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				p, h string
				v    eim.DeviceVersion
			)
			if err := rows.Scan(&p, &h, &v.Version, &v.StatusWanted); err != nil {
				return t.fail(err)
			}
			if out[p] == nil {
				out[p] = map[string]eim.DeviceVersion{}
			}
			out[p][h] = v
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "read device versions: %w", err)
		}
		return nil
	})
	return out, err
}

// DeviceWorkloads implements eim.EdgeWorkloadStore.
func (s *Store) DeviceWorkloads(ctx context.Context, project, hostID string) (*eim.DeviceWorkloads, error) {
	var out *eim.DeviceWorkloads
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = &eim.DeviceWorkloads{}
		if err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT version, status_version, status_wanted FROM edge_devices WHERE project = ? AND host_id = ?"),
			project, hostID).Scan(&out.Version, &out.StatusVersion, &out.StatusWanted); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return s.failf(t, "read device version: %w", err)
		}
		rows, err := t.query(ctx, "SELECT t.name, t.revision, r.spec FROM edge_workload_targets t JOIN edge_workload_revisions r"+
			" ON r.project = t.project AND r.name = t.name AND r.revision = t.revision WHERE t.project = ? AND t.host_id = ? ORDER BY t.name", project, hostID)
		if err != nil {
			return s.failf(t, "read device workloads: %w", err)
		}
		for rows.Next() {
			var (
				dw   eim.DeviceWorkload
				spec string
			)
			if err := rows.Scan(&dw.Name, &dw.Revision, &spec); err != nil {
				rows.Close()
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(spec), &dw.Spec); err != nil {
				rows.Close()
				return t.fail(fmt.Errorf("edge workload %s revision %d: %w", dw.Name, dw.Revision, err))
			}
			out.Targets = append(out.Targets, dw)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return s.failf(t, "read device workloads: %w", err)
		}
		out.Logs, err = s.logRequestsWhere(ctx, t, "project = ? AND host_id = ? AND answered = ?", project, hostID, false)
		return err
	})
	return out, err
}

// RecordEdgeWorkloadStatus implements eim.EdgeWorkloadStore.
func (s *Store) RecordEdgeWorkloadStatus(ctx context.Context, project, hostID string, version int64, statuses []eim.EdgeWorkloadStatus) error {
	now := s.now().UnixMilli()
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+s.keyShare(""), project, hostID); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", hostID)
		}
		// The reported workloads that exist, locked (keyShare): the
		// status of one deleted meanwhile is dropped, the rest recorded.
		var known []string
		if names := reportedNames(statuses); len(names) > 0 {
			args := []any{project}
			for _, n := range names {
				args = append(args, n)
			}
			var err error
			known, err = s.column(ctx, t, "SELECT name FROM edge_workloads WHERE project = ? AND name IN (?"+strings.Repeat(", ?", len(names)-1)+") ORDER BY name"+s.keyShare(""), args...)
			if err != nil {
				return err
			}
		}
		had, err := s.column(ctx, t, "SELECT name FROM edge_workload_status WHERE project = ? AND host_id = ?", project, hostID)
		if err != nil {
			return err
		}
		reported := map[string]bool{}
		for _, st := range statuses {
			if !slices.Contains(known, st.Workload) || reported[st.Workload] {
				continue
			}
			reported[st.Workload] = true
			ctrs, err := json.Marshal(st.Containers)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, "INSERT INTO edge_workload_status (project, name, host_id, revision, phase, last_error, transition_at, containers, reported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"+
				" ON CONFLICT (project, name, host_id) DO UPDATE SET revision = excluded.revision, phase = excluded.phase, last_error = excluded.last_error,"+
				" transition_at = excluded.transition_at, containers = excluded.containers, reported_at = excluded.reported_at",
				project, st.Workload, hostID, st.Revision, st.Phase, st.LastError, st.TransitionTime.UnixMilli(), string(ctrs), now); err != nil {
				return s.failf(t, "record edge workload status: %w", err)
			}
		}
		for _, name := range had {
			if !reported[name] {
				if _, err := t.exec(ctx, "DELETE FROM edge_workload_status WHERE project = ? AND name = ? AND host_id = ?", project, name, hostID); err != nil {
					return s.failf(t, "record edge workload status: %w", err)
				}
			}
		}
		return s.statusReported(ctx, t, project, hostID, version)
	})
}

// statusReported notes that the device's status of version was stored:
// its full status is no longer wanted. The event that tells the
// heartbeats' caches so is written only when it was wanted, so an
// ordinary report adds none.
// A report that names no version (0) is taken as of the device's
// current one: otherwise a client that never names one would be asked
// again after every grace.
func (s *Store) statusReported(ctx context.Context, t *tx, project, hostID string, version int64) error {
	var (
		cur, had int64
		wanted   bool
	)
	err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT version, status_version, status_wanted FROM edge_devices WHERE project = ? AND host_id = ?"),
		project, hostID).Scan(&cur, &had, &wanted)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no version yet: nothing to compare a report with
	}
	if err != nil {
		return s.failf(t, "read device status version: %w", err)
	}
	if version <= 0 {
		version = cur
	}
	if had == version && !wanted {
		return nil
	}
	if _, err := t.exec(ctx, "UPDATE edge_devices SET status_version = ?, status_wanted = FALSE WHERE project = ? AND host_id = ?", version, project, hostID); err != nil {
		return s.failf(t, "record device status version: %w", err)
	}
	if wanted {
		t.addEvent(project, eim.KindEdgeDeviceStatus, hostID, eim.OpUpdated)
	}
	return nil
}

// WantEdgeDeviceStatus implements eim.EdgeWorkloadStore. A host that is
// gone is skipped.
func (s *Store) WantEdgeDeviceStatus(ctx context.Context, project, hostID string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "INSERT INTO edge_devices (project, host_id, version, status_wanted) SELECT project, id, 0, TRUE FROM hosts WHERE project = ? AND id = ?"+s.keyShare("")+
			" ON CONFLICT (project, host_id) DO UPDATE SET status_wanted = TRUE WHERE NOT edge_devices.status_wanted", project, hostID)
		if err != nil {
			return s.failf(t, "want device status: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			t.addEvent(project, eim.KindEdgeDeviceStatus, hostID, eim.OpUpdated)
		}
		return nil
	})
}

// DeviceWorkloadVersion implements eim.EdgeWorkloadStore.
func (s *Store) DeviceWorkloadVersion(ctx context.Context, project, hostID string) (eim.DeviceVersion, error) {
	var out eim.DeviceVersion
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = eim.DeviceVersion{}
		err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT version, status_wanted FROM edge_devices WHERE project = ? AND host_id = ?"),
			project, hostID).Scan(&out.Version, &out.StatusWanted)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.failf(t, "read device version: %w", err)
		}
		return nil
	})
	return out, err
}

// WantStaleEdgeDeviceStatus implements eim.EdgeWorkloadStore: one
// statement over every project's devices.
func (s *Store) WantStaleEdgeDeviceStatus(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		projects, err := s.column(ctx, t, "UPDATE edge_devices SET status_wanted = TRUE WHERE NOT status_wanted AND status_version < version AND version_at < ? RETURNING project",
			before.UnixMilli())
		if err != nil {
			return err
		}
		n = len(projects)
		slices.Sort(projects)
		for _, p := range slices.Compact(projects) {
			t.addEvent(p, eim.KindEdgeDevices, p, eim.OpUpdated)
		}
		return nil
	})
	return n, err
}

// reportedNames is the distinct workloads of a report, sorted (the order
// their rows are locked in).
func reportedNames(statuses []eim.EdgeWorkloadStatus) []string {
	var names []string
	for _, st := range statuses {
		names = append(names, st.Workload)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// EdgeWorkloadStatuses implements eim.EdgeWorkloadStore.
func (s *Store) EdgeWorkloadStatuses(ctx context.Context, project, name string) ([]eim.EdgeWorkloadStatus, error) {
	var out []eim.EdgeWorkloadStatus
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, "SELECT host_id, revision, phase, last_error, transition_at, containers, reported_at, last_data_upload, upload_errors, last_data_download, download_errors"+
			" FROM edge_workload_status WHERE project = ? AND name = ? ORDER BY host_id", project, name)
		if err != nil {
			return s.failf(t, "read edge workload status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			st := eim.EdgeWorkloadStatus{Workload: name}
			var (
				ctrs, errs, derrs                      string
				transition, reported, upload, download int64
			)
			if err := rows.Scan(&st.HostID, &st.Revision, &st.Phase, &st.LastError, &transition, &ctrs, &reported, &upload, &errs, &download, &derrs); err != nil {
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(ctrs), &st.Containers); err != nil {
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(errs), &st.UploadErrors); err != nil {
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(derrs), &st.DownloadErrors); err != nil {
				return t.fail(err)
			}
			st.TransitionTime, st.ReportedAt, st.LastDataUpload, st.LastDataDownload = milli(transition), milli(reported), milli(upload), milli(download)
			out = append(out, st)
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "read edge workload status: %w", err)
		}
		return nil
	})
	return out, err
}

// milli is a time of the tables, 0 being none.
func milli(ms int64) eim.Time {
	if ms == 0 {
		return eim.Time{}
	}
	return eim.TimeFromUnixMilli(ms)
}

// RecordEdgeWorkloadUploads implements eim.EdgeWorkloadStore.
func (s *Store) RecordEdgeWorkloadUploads(ctx context.Context, project, hostID, name string, at time.Time, errs []string) error {
	return s.recordDataSync(ctx, "last_data_upload", "upload_errors", project, hostID, name, at, errs)
}

// RecordEdgeWorkloadDownloads implements eim.EdgeWorkloadStore.
func (s *Store) RecordEdgeWorkloadDownloads(ctx context.Context, project, hostID, name string, at time.Time, errs []string) error {
	return s.recordDataSync(ctx, "last_data_download", "download_errors", project, hostID, name, at, errs)
}

// recordDataSync records a round of a device's data paths of one
// direction in its columns (timeCol, errsCol: constants of the callers).
func (s *Store) recordDataSync(ctx context.Context, timeCol, errsCol, project, hostID, name string, at time.Time, errs []string) error {
	if errs == nil {
		errs = []string{}
	}
	body, err := json.Marshal(errs)
	if err != nil {
		return err
	}
	var atMS int64
	if !at.IsZero() {
		atMS = at.UnixMilli()
	}
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?"+s.keyShare(""), project, name); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", name)
		}
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+s.keyShare(""), project, hostID); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", hostID)
		}
		q := "INSERT INTO edge_workload_status (project, name, host_id, " + timeCol + ", " + errsCol + ") VALUES (?, ?, ?, ?, ?)" +
			" ON CONFLICT (project, name, host_id) DO UPDATE SET " + errsCol + " = excluded." + errsCol
		if atMS != 0 {
			q += ", " + timeCol + " = excluded." + timeCol
		}
		if _, err := t.exec(ctx, q, project, name, hostID, atMS, string(body)); err != nil {
			return s.failf(t, "record edge workload "+errsCol+": %w", err)
		}
		return nil
	})
}

// CreateEdgeWorkloadLogRequest implements eim.EdgeWorkloadStore.
func (s *Store) CreateEdgeWorkloadLogRequest(ctx context.Context, r *eim.EdgeWorkloadLogRequest) error {
	now := eim.NewTime(s.now())
	return s.run(ctx, r.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM edge_workloads WHERE project = ? AND name = ?"+s.keyShare(""), r.Project, r.Workload); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "edge workload %s not found", r.Workload)
		}
		if ok, err := s.locked(ctx, t, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+s.keyShare(""), r.Project, r.HostID); err != nil || !ok {
			if err != nil {
				return err
			}
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", r.HostID)
		}
		if _, err := t.exec(ctx, "INSERT INTO edge_workload_logs (project, id, name, host_id, container, tail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
			r.Project, r.ID, r.Workload, r.HostID, r.Container, int64(r.Tail), now.UnixMilli()); err != nil {
			return s.failf(t, "create log request: %w", err)
		}
		r.CreatedAt = now
		return s.bumpDevices(ctx, t, r.Project, []string{r.HostID})
	})
}

func (s *Store) logRequestsWhere(ctx context.Context, t *tx, where string, args ...any) ([]eim.EdgeWorkloadLogRequest, error) {
	rows, err := t.query(ctx, "SELECT project, id, name, host_id, container, tail, created_at, answered, logs, error FROM edge_workload_logs WHERE "+where+" ORDER BY created_at, id", args...)
	if err != nil {
		return nil, s.failf(t, "read log requests: %w", err)
	}
	defer rows.Close()
	var out []eim.EdgeWorkloadLogRequest
	for rows.Next() {
		var (
			r       eim.EdgeWorkloadLogRequest
			tail    int64
			created int64
			logs    string
		)
		if err := rows.Scan(&r.Project, &r.ID, &r.Workload, &r.HostID, &r.Container, &tail, &created, &r.Answered, &logs, &r.Error); err != nil {
			return nil, t.fail(err)
		}
		if err := json.Unmarshal([]byte(logs), &r.Logs); err != nil {
			return nil, t.fail(err)
		}
		r.Tail, r.CreatedAt = uint32(tail), eim.TimeFromUnixMilli(created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failf(t, "read log requests: %w", err)
	}
	return out, nil
}

// AnswerEdgeWorkloadLogRequest implements eim.EdgeWorkloadStore.
func (s *Store) AnswerEdgeWorkloadLogRequest(ctx context.Context, project, hostID, id string, logs []eim.ContainerLog, errText string) error {
	if logs == nil {
		logs = []eim.ContainerLog{}
	}
	body, err := json.Marshal(logs)
	if err != nil {
		return err
	}
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "UPDATE edge_workload_logs SET answered = ?, logs = ?, error = ? WHERE project = ? AND host_id = ? AND id = ? AND answered = ?",
			true, string(body), errText, project, hostID, id, false)
		if err != nil {
			return s.failf(t, "answer log request: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if t.exists(ctx, "SELECT 1 FROM edge_workload_logs WHERE project = ? AND host_id = ? AND id = ?", project, hostID, id) {
				return nil // answered already: a repeat is harmless
			}
			return eim.Errorf(eim.ENOTFOUND, "log request %s not found", id)
		}
		return nil
	})
}

// FindEdgeWorkloadLogRequest implements eim.EdgeWorkloadStore.
func (s *Store) FindEdgeWorkloadLogRequest(ctx context.Context, project, id string) (*eim.EdgeWorkloadLogRequest, error) {
	var out *eim.EdgeWorkloadLogRequest
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		rs, err := s.logRequestsWhere(ctx, etx.(*tx), "project = ? AND id = ?", project, id)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "log request %s not found", id)
		}
		out = &rs[0]
		return nil
	})
	return out, err
}

// EdgeWorkloadDeviceCounts implements eim.EdgeWorkloadStore.
func (s *Store) EdgeWorkloadDeviceCounts(ctx context.Context) ([]eim.EdgeWorkloadDeviceCount, error) {
	return s.deviceCounts(ctx, "", "")
}

// EdgeWorkloadDeviceCountsOf implements eim.EdgeWorkloadStore.
func (s *Store) EdgeWorkloadDeviceCountsOf(ctx context.Context, project, name string) ([]eim.EdgeWorkloadDeviceCount, error) {
	return s.deviceCounts(ctx, project, name)
}

// deviceCounts counts the devices of every workload, or of one workload
// of a project (name set): one grouped read of the targets and statuses,
// which their primary keys (project, name, host_id) serve. The two are
// matched by a FULL JOIN (a device with a target and no status, with both,
// or with a status and no target), which PostgreSQL can only run as a hash
// or merge join: a pass over each side whatever the planner's statistics
// say. The LEFT JOIN and NOT EXISTS it replaces were planned, on tables
// filled since their last ANALYZE (a workload just given to 10,000
// devices), as nested loops of one side's rows by the other's, minutes for
// one status read, holding a connection of the pool the devices' reports
// need. (Those tables are analyzed as they grow now, as the resource
// tables are: analyze.go; the FULL JOIN stays, as it needs no statistics.)
// deviceCountsQuery is deviceCounts' statement: of one workload (its
// arguments project, name, project, name), or of all. On SQLite the FULL
// JOIN of two subqueries is run as a scan of one materialized side per
// row of the other (no index on it): quadratic, a status read of a
// workload on 100,000 devices did not answer in 20 minutes
// (bench/workloads.sh). There the same counts are the targets LEFT JOIN
// their statuses plus the statuses without a target, each row's match
// found through the other table's primary key.
func deviceCountsQuery(one, pg bool) string {
	if !pg {
		tw, sw := "", ""
		if one {
			tw, sw = " WHERE t.project = ? AND t.name = ?", " s.project = ? AND s.name = ? AND"
		}
		return "SELECT project, name, target, revision, phase, COUNT(*) FROM (" +
			"SELECT t.project AS project, t.name AS name, t.revision AS target, COALESCE(s.revision, 0) AS revision, COALESCE(s.phase, '') AS phase" +
			" FROM edge_workload_targets t LEFT JOIN edge_workload_status s ON s.project = t.project AND s.name = t.name AND s.host_id = t.host_id" + tw +
			" UNION ALL SELECT s.project, s.name, 0, s.revision, s.phase FROM edge_workload_status s WHERE" + sw +
			" NOT EXISTS (SELECT 1 FROM edge_workload_targets t WHERE t.project = s.project AND t.name = s.name AND t.host_id = s.host_id)" +
			") GROUP BY project, name, target, revision, phase"
	}
	where := ""
	if one {
		where = " WHERE project = ? AND name = ?"
	}
	return "SELECT COALESCE(t.project, s.project), COALESCE(t.name, s.name), COALESCE(t.revision, 0)," +
		" COALESCE(s.revision, 0), COALESCE(s.phase, ''), COUNT(*)" +
		" FROM (SELECT project, name, host_id, revision FROM edge_workload_targets" + where + ") t" +
		" FULL JOIN (SELECT project, name, host_id, revision, phase FROM edge_workload_status" + where + ") s" +
		" ON s.project = t.project AND s.name = t.name AND s.host_id = t.host_id" +
		" GROUP BY COALESCE(t.project, s.project), COALESCE(t.name, s.name), COALESCE(t.revision, 0), COALESCE(s.revision, 0), COALESCE(s.phase, '')"
}

func (s *Store) deviceCounts(ctx context.Context, project, name string) ([]eim.EdgeWorkloadDeviceCount, error) {
	var out []eim.EdgeWorkloadDeviceCount
	var args []any
	if name != "" {
		args = []any{project, name, project, name}
	}
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, deviceCountsQuery(name != "", s.d.pg), args...)
		if err != nil {
			return s.failf(t, "count edge workload devices: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var c eim.EdgeWorkloadDeviceCount
			if err := rows.Scan(&c.Project, &c.Workload, &c.Target, &c.Revision, &c.Phase, &c.Devices); err != nil {
				return t.fail(err)
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return s.failf(t, "count edge workload devices: %w", err)
		}
		return nil
	})
	return out, err
}
