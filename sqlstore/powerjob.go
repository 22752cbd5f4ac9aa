package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eimhq/eim"
)

// Power jobs (eim.PowerJobStore): the table power_jobs (migration 0022),
// the store's own role, every statement naming the project. A job is
// claimed by one process at a time under a lease kept in its row (holder,
// lease_until), on the database's clock on PostgreSQL (see coord.go), the
// candidate row locked with FOR UPDATE SKIP LOCKED there so that workers
// of several processes do not queue on one row; SQLite has one writer.

var _ eim.PowerJobStore = (*Store)(nil)

const powerJobCols = "seq, id, project, host_id, desired, state, steps, step, attempts, last_error, deadline, holder, lease_until, created_at, updated_at, ended_at"

func scanPowerJob(sc interface{ Scan(...any) error }) (*eim.PowerJob, error) {
	var (
		j                                     eim.PowerJob
		desired, state, steps                 string
		deadline, lease, created, updated, ed int64
	)
	if err := sc.Scan(&j.Seq, &j.ID, &j.Project, &j.HostID, &desired, &state, &steps, &j.Step, &j.Attempts, &j.LastError,
		&deadline, &j.Holder, &lease, &created, &updated, &ed); err != nil {
		return nil, err
	}
	j.Desired, j.State = eim.PowerState(desired), eim.PowerJobState(state)
	if err := json.Unmarshal([]byte(steps), &j.Steps); err != nil {
		return nil, fmt.Errorf("power job %s: steps: %w", j.ID, err)
	}
	j.Deadline, j.LeaseUntil = eim.TimeFromUnixMilli(deadline), ms(lease)
	j.CreatedAt, j.UpdatedAt, j.EndedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated), ms(ed)
	return &j, nil
}

// ms is a time kept in unix milliseconds, 0 the zero time.
func ms(v int64) eim.Time {
	if v == 0 {
		return eim.Time{}
	}
	return eim.TimeFromUnixMilli(v)
}

func unixMs(t eim.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func stepsJSON(steps []eim.PowerStep) string {
	if steps == nil {
		steps = []eim.PowerStep{}
	}
	return string(mustJSON(steps))
}

// CreatePowerJob implements eim.PowerJobStore.
func (s *Store) CreatePowerJob(ctx context.Context, j *eim.PowerJob) error {
	if j.Project == "" || j.HostID == "" {
		return eim.Errorf(eim.EINVALID, "power job: project and host required")
	}
	if j.Deadline.IsZero() {
		return eim.Errorf(eim.EINVALID, "power job: deadline required")
	}
	now := eim.NewTime(s.now())
	id := eim.NewID(eim.KindPowerJob)
	var seq int64
	err := s.db.QueryRowContext(ctx, s.d.rebind("INSERT INTO power_jobs (id, project, host_id, desired, state, steps, step, attempts, last_error, deadline, created_at, updated_at)"+
		" SELECT ?, ?, ?, ?, ?, ?, 0, 0, '', ?, ?, ? WHERE EXISTS (SELECT 1 FROM hosts WHERE project = ? AND id = ?) RETURNING seq"),
		id, j.Project, j.HostID, string(j.Desired), string(eim.PowerJobPending), stepsJSON(j.Steps), j.Deadline.UnixMilli(),
		now.UnixMilli(), now.UnixMilli(), j.Project, j.HostID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return eim.Errorf(eim.ENOTFOUND, "host %s not found", j.HostID)
	}
	if err != nil {
		return s.d.translate(fmt.Errorf("create power job: %w", err), nil)
	}
	j.ID, j.Seq, j.State, j.Step, j.Attempts, j.LastError = id, seq, eim.PowerJobPending, 0, 0, ""
	j.Holder, j.LeaseUntil, j.CreatedAt, j.UpdatedAt, j.EndedAt = "", eim.Time{}, now, now, eim.Time{}
	return nil
}

// GetPowerJob implements eim.PowerJobStore.
func (s *Store) GetPowerJob(ctx context.Context, project, hostID, id string) (*eim.PowerJob, error) {
	j, err := scanPowerJob(s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT "+powerJobCols+" FROM power_jobs WHERE project = ? AND host_id = ? AND id = ?"),
		project, hostID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "host %s has no power job %s", hostID, id)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read power job: %w", err), nil)
	}
	return j, nil
}

// ListPowerJobs implements eim.PowerJobStore.
func (s *Store) ListPowerJobs(ctx context.Context, project, hostID string, limit, offset int) ([]*eim.PowerJob, int, error) {
	if limit <= 0 || offset < 0 {
		return nil, 0, eim.Errorf(eim.EINVALID, "list power jobs: limit must be positive and offset not negative")
	}
	var total int
	if err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT COUNT(*) FROM power_jobs WHERE project = ? AND host_id = ?"), project, hostID).Scan(&total); err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("count power jobs: %w", err), nil)
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT "+powerJobCols+" FROM power_jobs WHERE project = ? AND host_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?"),
		project, hostID, limit, offset)
	if err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("list power jobs: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.PowerJob
	for rows.Next() {
		j, err := scanPowerJob(rows)
		if err != nil {
			return nil, 0, s.d.translate(fmt.Errorf("list power jobs: %w", err), nil)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("list power jobs: %w", err), nil)
	}
	return out, total, nil
}

// CancelPowerJob implements eim.PowerJobStore.
func (s *Store) CancelPowerJob(ctx context.Context, project, hostID, id, reason string) (*eim.PowerJob, error) {
	now := eim.NewTime(s.now()).UnixMilli()
	res, err := s.db.ExecContext(ctx, s.d.rebind("UPDATE power_jobs SET state = ?, last_error = ?, ended_at = ?, updated_at = ?, holder = '', lease_until = 0"+
		" WHERE project = ? AND host_id = ? AND id = ? AND state IN (?, ?)"),
		string(eim.PowerJobCancelled), reason, now, now, project, hostID, id, string(eim.PowerJobPending), string(eim.PowerJobRunning))
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("cancel power job: %w", err), nil)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("cancel power job: %w", err), nil)
	}
	j, err := s.GetPowerJob(ctx, project, hostID, id)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return j, eim.Errorf(eim.ECONFLICT, "power job %s has ended (%s)", id, j.State)
	}
	return j, nil
}

// claimPowerJobSQL takes the oldest job that no live lease holds and
// that is its host's oldest job still to end. %[1]s is now, %[2]s the
// row lock of PostgreSQL. The outer condition repeats the lease's, which
// PostgreSQL checks again on the row it locked.
const claimPowerJobSQL = "UPDATE power_jobs SET state = 'RUNNING', holder = ?, lease_until = %[1]s + CAST(? AS BIGINT), attempts = attempts + 1, updated_at = %[1]s" +
	" WHERE seq = (SELECT j.seq FROM power_jobs j WHERE j.state IN ('PENDING', 'RUNNING') AND j.lease_until < %[1]s" +
	" AND NOT EXISTS (SELECT 1 FROM power_jobs o WHERE o.project = j.project AND o.host_id = j.host_id AND o.state IN ('PENDING', 'RUNNING') AND o.seq < j.seq)" +
	" ORDER BY j.seq LIMIT 1%[2]s)" +
	" AND state IN ('PENDING', 'RUNNING') AND lease_until < %[1]s RETURNING " + powerJobCols

// ClaimPowerJob implements eim.PowerJobStore.
func (s *Store) ClaimPowerJob(ctx context.Context, holder string, ttl time.Duration) (*eim.PowerJob, error) {
	if holder == "" {
		return nil, eim.Errorf(eim.EINVALID, "claim power job: holder required")
	}
	if ttl < time.Millisecond {
		return nil, eim.Errorf(eim.EINVALID, "claim power job: ttl %v is shorter than a millisecond", ttl)
	}
	var q string
	var args []any
	if s.d.pg {
		q = fmt.Sprintf(claimPowerJobSQL, pgNow, " FOR UPDATE SKIP LOCKED")
		args = []any{holder, ttl.Milliseconds()}
	} else {
		now := s.now().UnixMilli()
		q = fmt.Sprintf(claimPowerJobSQL, "CAST(? AS BIGINT)", "")
		// The placeholders in order: the SET's now twice, the sub-query's
		// now, the outer now.
		args = []any{holder, now, ttl.Milliseconds(), now, now, now}
	}
	j, err := scanPowerJob(s.db.QueryRowContext(ctx, s.d.rebind(q), args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("claim power job: %w", err), nil)
	}
	return j, nil
}

// SavePowerJob implements eim.PowerJobStore.
func (s *Store) SavePowerJob(ctx context.Context, j *eim.PowerJob, ttl time.Duration) error {
	if j.Holder == "" {
		return eim.Errorf(eim.EINVALID, "save power job %s: holder required", j.ID)
	}
	var q string
	var args []any
	lease := "CAST(? AS BIGINT)"
	if s.d.pg {
		lease = pgNow + " + CAST(? AS BIGINT)"
		args = []any{ttl.Milliseconds()}
	} else {
		args = []any{s.now().UnixMilli() + ttl.Milliseconds()}
	}
	if j.State.Ended() {
		lease, args = "CAST(? AS BIGINT)", []any{int64(0)}
	}
	now := eim.NewTime(s.now())
	q = "UPDATE power_jobs SET lease_until = " + lease + ", state = ?, steps = ?, step = ?, last_error = ?, ended_at = ?, updated_at = ?" +
		" WHERE project = ? AND id = ? AND holder = ? AND state IN ('PENDING', 'RUNNING') RETURNING lease_until"
	args = append(args, string(j.State), stepsJSON(j.Steps), j.Step, j.LastError, unixMs(j.EndedAt), now.UnixMilli(), j.Project, j.ID, j.Holder)
	var until int64
	err := s.db.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&until)
	if errors.Is(err, sql.ErrNoRows) {
		return eim.Errorf(eim.ECONFLICT, "power job %s is no longer held by %s (taken over, cancelled or ended)", j.ID, j.Holder)
	}
	if err != nil {
		return s.d.translate(fmt.Errorf("save power job %s: %w", j.ID, err), nil)
	}
	j.LeaseUntil, j.UpdatedAt = ms(until), now
	return nil
}
