package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eimhq/eim"
)

// The tenant module's records of each project (migration 0015; see
// eim.TenantStore). Each goes with its project (ON DELETE CASCADE). They
// are read and written on the unscoped connections.

var _ eim.TenantStore = (*Store)(nil)

// projectMissing returns ENOTFOUND for a project that does not exist.
func projectMissing(ctx context.Context, t *tx, project string) error {
	if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", project) {
		return eim.Errorf(eim.ENOTFOUND, "project %s not found", project)
	}
	return nil
}

// AppliedDefaults implements eim.TenantStore.
func (s *Store) AppliedDefaults(ctx context.Context, project string) (int, []eim.AppliedDefault, error) {
	var version int
	err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT version FROM project_defaults WHERE project = ?"), project).Scan(&version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, s.d.translate(fmt.Errorf("read the defaults of project %s: %w", project, err), nil)
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT key, resource_id, digest FROM project_default_items WHERE project = ? ORDER BY key"), project)
	if err != nil {
		return 0, nil, s.d.translate(fmt.Errorf("read the defaults of project %s: %w", project, err), nil)
	}
	defer rows.Close()
	var out []eim.AppliedDefault
	for rows.Next() {
		var a eim.AppliedDefault
		if err := rows.Scan(&a.Key, &a.ResourceID, &a.Digest); err != nil {
			return 0, nil, s.d.translate(fmt.Errorf("read the defaults of project %s: %w", project, err), nil)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, s.d.translate(fmt.Errorf("read the defaults of project %s: %w", project, err), nil)
	}
	return version, out, nil
}

// SaveAppliedDefaults implements eim.TenantStore, in one transaction.
func (s *Store) SaveAppliedDefaults(ctx context.Context, project string, version int, applied []eim.AppliedDefault) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if err := projectMissing(ctx, t, project); err != nil {
			return err
		}
		fail := func(err error) error {
			return t.fail(s.d.translate(fmt.Errorf("save the defaults of project %s: %w", project, err), nil))
		}
		if _, err := t.exec(ctx, "INSERT INTO project_defaults (project, version, applied_at) VALUES (?, ?, ?)"+
			" ON CONFLICT (project) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at",
			project, version, s.now().UnixMilli()); err != nil {
			return fail(err)
		}
		if _, err := t.exec(ctx, "DELETE FROM project_default_items WHERE project = ?", project); err != nil {
			return fail(err)
		}
		for _, a := range applied {
			if _, err := t.exec(ctx, "INSERT INTO project_default_items (project, key, resource_id, digest) VALUES (?, ?, ?, ?)",
				project, a.Key, a.ResourceID, a.Digest); err != nil {
				return fail(err)
			}
		}
		return nil
	})
}

// setConditionSQL records a condition; its since changes only with ready.
const setConditionSQL = "INSERT INTO project_conditions (project, module, ready, message, since) VALUES (?, ?, ?, ?, ?)" +
	" ON CONFLICT (project, module) DO UPDATE SET message = excluded.message, ready = excluded.ready," +
	" since = CASE WHEN project_conditions.ready = excluded.ready THEN project_conditions.since ELSE excluded.since END"

// SetCondition implements eim.TenantStore.
func (s *Store) SetCondition(ctx context.Context, project string, c eim.Condition) error {
	if c.Module == "" {
		return eim.Errorf(eim.EINVALID, "condition: module is required")
	}
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if err := projectMissing(ctx, t, project); err != nil {
			return err
		}
		if _, err := t.exec(ctx, setConditionSQL, project, c.Module, c.Ready, c.Message, s.now().UnixMilli()); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("set condition %s of project %s: %w", c.Module, project, err), nil))
		}
		return nil
	})
}

// Conditions implements eim.TenantStore.
func (s *Store) Conditions(ctx context.Context, project string) ([]eim.Condition, error) {
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT module, ready, message, since FROM project_conditions WHERE project = ? ORDER BY module"), project)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read the conditions of project %s: %w", project, err), nil)
	}
	defer rows.Close()
	var out []eim.Condition
	for rows.Next() {
		var (
			c     eim.Condition
			since int64
		)
		if err := rows.Scan(&c.Module, &c.Ready, &c.Message, &since); err != nil {
			return nil, s.d.translate(fmt.Errorf("read the conditions of project %s: %w", project, err), nil)
		}
		c.Since = eim.TimeFromUnixMilli(since)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("read the conditions of project %s: %w", project, err), nil)
	}
	return out, nil
}

const deletionCols = "project, phase, remaining, started_at, updated_at, error"

func scanDeletion(sc interface{ Scan(...any) error }) (*eim.ProjectDeletion, error) {
	var (
		d                eim.ProjectDeletion
		started, updated int64
	)
	if err := sc.Scan(&d.Project, &d.Phase, &d.Remaining, &started, &updated, &d.Error); err != nil {
		return nil, err
	}
	d.Started, d.Updated = eim.TimeFromUnixMilli(started), eim.TimeFromUnixMilli(updated)
	return &d, nil
}

// StartProjectDeletion implements eim.TenantStore. The project takes no
// new resources from then on: the cached projects are forgotten.
func (s *Store) StartProjectDeletion(ctx context.Context, project, first string) (*eim.ProjectDeletion, error) {
	if first == "" {
		return nil, eim.Errorf(eim.EINVALID, "project deletion: the first phase is required")
	}
	s.projects.forget()
	defer s.projects.forget()
	err := s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if err := projectMissing(ctx, t, project); err != nil {
			return err
		}
		now := s.now().UnixMilli()
		if _, err := t.exec(ctx, "INSERT INTO project_deletions ("+deletionCols+") VALUES (?, ?, -1, ?, ?, '') ON CONFLICT (project) DO NOTHING",
			project, first, now, now); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("start deleting project %s: %w", project, err), nil))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.FindProjectDeletion(ctx, project)
}

// FindProjectDeletion implements eim.TenantStore.
func (s *Store) FindProjectDeletion(ctx context.Context, project string) (*eim.ProjectDeletion, error) {
	d, err := scanDeletion(s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT "+deletionCols+" FROM project_deletions WHERE project = ?"), project))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "project %s is not being deleted", project)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read the deletion of project %s: %w", project, err), nil)
	}
	return d, nil
}

// ProjectDeletions implements eim.TenantStore.
func (s *Store) ProjectDeletions(ctx context.Context) ([]*eim.ProjectDeletion, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+deletionCols+" FROM project_deletions ORDER BY started_at, project")
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("list project deletions: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.ProjectDeletion
	for rows.Next() {
		d, err := scanDeletion(rows)
		if err != nil {
			return nil, s.d.translate(fmt.Errorf("list project deletions: %w", err), nil)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("list project deletions: %w", err), nil)
	}
	return out, nil
}

// SaveProjectDeletion implements eim.TenantStore; ENOTFOUND when the
// project is gone (or not being deleted).
func (s *Store) SaveProjectDeletion(ctx context.Context, d *eim.ProjectDeletion) error {
	res, err := s.db.ExecContext(ctx, s.d.rebind("UPDATE project_deletions SET phase = ?, remaining = ?, error = ?, updated_at = ? WHERE project = ?"),
		d.Phase, d.Remaining, d.Error, s.now().UnixMilli(), d.Project)
	if err != nil {
		return s.d.translate(fmt.Errorf("save the deletion of project %s: %w", d.Project, err), nil)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.d.translate(fmt.Errorf("save the deletion of project %s: %w", d.Project, err), nil)
	} else if n == 0 {
		return eim.Errorf(eim.ENOTFOUND, "project %s is not being deleted", d.Project)
	}
	return nil
}

// FinishProjectDeletion implements eim.TenantStore: the deletion's row,
// read in the transaction that deletes, is what tells this project from
// one that took its name since.
func (s *Store) FinishProjectDeletion(ctx context.Context, project string, started eim.Time) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM project_deletions WHERE project = ? AND started_at = ?", project, started.UnixMilli()) {
			return eim.Errorf(eim.ENOTFOUND, "project %s is not being deleted by the deletion started at %s", project, started.Format(time.RFC3339Nano))
		}
		return s.deleteProject(ctx, t, project)
	})
}
