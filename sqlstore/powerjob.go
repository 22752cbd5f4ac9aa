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

const powerJobCols = "seq, id, project, host_id, desired, reason, state, steps, step, attempts, last_error, deadline, holder, lease_until, created_at, updated_at, ended_at, queued_for, queued_since"

func scanPowerJob(sc interface{ Scan(...any) error }) (*eim.PowerJob, error) {
	var (
		j                                     eim.PowerJob
		desired, state, steps                 string
		deadline, lease, created, updated, ed int64
		queuedSince                           int64
	)
	if err := sc.Scan(&j.Seq, &j.ID, &j.Project, &j.HostID, &desired, &j.Reason, &state, &steps, &j.Step, &j.Attempts, &j.LastError,
		&deadline, &j.Holder, &lease, &created, &updated, &ed, &j.QueuedFor, &queuedSince); err != nil {
		return nil, err
	}
	j.Desired, j.State = eim.PowerState(desired), eim.PowerJobState(state)
	if err := json.Unmarshal([]byte(steps), &j.Steps); err != nil {
		return nil, fmt.Errorf("power job %s: steps: %w", j.ID, err)
	}
	j.Deadline, j.LeaseUntil = eim.TimeFromUnixMilli(deadline), ms(lease)
	j.CreatedAt, j.UpdatedAt, j.EndedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated), ms(ed)
	j.QueuedSince = ms(queuedSince)
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
	_, err := s.RequestPowerJob(ctx, eim.PowerJobRequest{Job: j})
	return err
}

// RequestPowerJob implements eim.PowerJobStore.
func (s *Store) RequestPowerJob(ctx context.Context, r eim.PowerJobRequest) (bool, error) {
	j := r.Job
	if j == nil || j.Project == "" || j.HostID == "" {
		return false, eim.Errorf(eim.EINVALID, "power job: project and host required")
	}
	if j.Deadline.IsZero() {
		return false, eim.Errorf(eim.EINVALID, "power job: deadline required")
	}
	var created bool
	var made eim.PowerJob
	err := s.run(ctx, j.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		created = false
		// The host's row locked on PostgreSQL: one request of a host at a
		// time (UnlessLatest reads what the one before wrote).
		lock := ""
		if s.d.pg {
			lock = " FOR UPDATE"
		}
		if !t.exists(ctx, "SELECT 1 FROM hosts WHERE project = ? AND id = ?"+lock, j.Project, j.HostID) {
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", j.HostID)
		}
		if r.UnlessLatest {
			var latest string
			err := t.queryRow(ctx, "SELECT desired FROM power_jobs WHERE project = ? AND host_id = ? ORDER BY seq DESC LIMIT 1", j.Project, j.HostID).Scan(&latest)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return t.fail(s.d.translate(fmt.Errorf("read latest power job: %w", err), nil))
			}
			if err == nil && latest == string(j.Desired) {
				return nil
			}
		}
		now := eim.NewTime(s.now())
		if r.CancelReason != "" {
			if err := s.cancelOpen(ctx, t, j.Project, j.HostID, "", r.CancelReason, now); err != nil {
				return err
			}
		}
		if r.Before != nil {
			if err := r.Before(etx); err != nil {
				return err
			}
		}
		made = *j
		made.ID = eim.NewID(eim.KindPowerJob)
		err := t.queryRow(ctx, "INSERT INTO power_jobs (id, project, host_id, desired, reason, state, steps, step, attempts, last_error, deadline, created_at, updated_at)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, '', ?, ?, ?) RETURNING seq",
			made.ID, j.Project, j.HostID, string(j.Desired), j.Reason, string(eim.PowerJobPending), stepsJSON(j.Steps), j.Deadline.UnixMilli(),
			now.UnixMilli(), now.UnixMilli()).Scan(&made.Seq)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("create power job: %w", err), nil))
		}
		made.State, made.Step, made.Attempts, made.LastError = eim.PowerJobPending, 0, 0, ""
		made.Holder, made.LeaseUntil, made.CreatedAt, made.UpdatedAt, made.EndedAt = "", eim.Time{}, now, now, eim.Time{}
		ch := map[string]eim.Change{
			"hostId":            {Old: jsonNull, New: mustJSON(made.HostID)},
			"desiredPowerState": {Old: jsonNull, New: mustJSON(made.Desired)},
			"state":             {Old: jsonNull, New: mustJSON(made.State)},
		}
		if made.Reason != "" {
			ch["reason"] = eim.Change{Old: jsonNull, New: mustJSON(made.Reason)}
		}
		t.addAudit(ctx, j.Project, eim.KindPowerJob, made.ID, eim.OpCreated, ch)
		t.addEvent(j.Project, eim.KindPowerJob, made.ID, eim.OpCreated)
		created = true
		return nil
	})
	if err != nil || !created {
		return false, err
	}
	*j = made
	return true, nil
}

// queryRow runs q (with "?" placeholders) in t for a single row.
func (t *tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if t.ensureBegun(ctx) == nil {
		_ = t.flushHeld(ctx) // a failure is sticky (t.err)
	}
	if t.s.stmts != nil && t.sqlTx != nil {
		db := t.db()
		if st := t.s.stmts.get(db, q); st != nil {
			t.s.work.stmts.Add(1)
			return t.bind(ctx, st).QueryRowContext(ctx, args...)
		}
		t.s.stmts.learn(db, q)
	}
	return t.q.QueryRowContext(ctx, t.s.d.rebind(q), args...)
}

// ended audits the end of a job (its state now st, its last error why)
// and puts its event in the feed, in t.
func ended(ctx context.Context, t *tx, project, id string, old eim.PowerJobState, st eim.PowerJobState, why string) {
	ch := map[string]eim.Change{"state": {Old: mustJSON(old), New: mustJSON(st)}}
	if why != "" {
		ch["lastError"] = eim.Change{Old: mustJSON(""), New: mustJSON(why)}
	}
	t.addAudit(ctx, project, eim.KindPowerJob, id, eim.OpUpdated, ch)
	t.addEvent(project, eim.KindPowerJob, id, eim.OpUpdated)
}

// cancelOpen cancels the host's jobs still to end (only the one of the
// id, when not ""), with the reason, in t; ECONFLICT when id names a job
// that has ended.
func (s *Store) cancelOpen(ctx context.Context, t *tx, project, hostID, id, reason string, now eim.Time) error {
	q := "SELECT id, state FROM power_jobs WHERE project = ? AND host_id = ? AND state IN ('PENDING', 'RUNNING')"
	args := []any{project, hostID}
	if id != "" {
		q += " AND id = ?"
		args = append(args, id)
	}
	if s.d.pg {
		q += " FOR UPDATE"
	}
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return t.fail(s.d.translate(fmt.Errorf("cancel power jobs: %w", err), nil))
	}
	type open struct {
		id    string
		state eim.PowerJobState
	}
	var jobs []open
	for rows.Next() {
		var o open
		var st string
		if err := rows.Scan(&o.id, &st); err != nil {
			rows.Close()
			return t.fail(s.d.translate(fmt.Errorf("cancel power jobs: %w", err), nil))
		}
		o.state = eim.PowerJobState(st)
		jobs = append(jobs, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t.fail(s.d.translate(fmt.Errorf("cancel power jobs: %w", err), nil))
	}
	for _, o := range jobs {
		_, err := t.exec(ctx, "UPDATE power_jobs SET state = ?, last_error = ?, ended_at = ?, updated_at = ?, holder = '', lease_until = 0"+
			" WHERE project = ? AND id = ?", string(eim.PowerJobCancelled), reason, now.UnixMilli(), now.UnixMilli(), project, o.id)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("cancel power job %s: %w", o.id, err), nil))
		}
		ended(ctx, t, project, o.id, o.state, eim.PowerJobCancelled, reason)
	}
	if id != "" && len(jobs) == 0 {
		var st string
		err := t.queryRow(ctx, "SELECT state FROM power_jobs WHERE project = ? AND host_id = ? AND id = ?", project, hostID, id).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return eim.Errorf(eim.ENOTFOUND, "host %s has no power job %s", hostID, id)
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read power job: %w", err), nil))
		}
		return eim.Errorf(eim.ECONFLICT, "power job %s has ended (%s)", id, st)
	}
	return nil
}

// GetPowerJob implements eim.PowerJobStore.
func (s *Store) GetPowerJob(ctx context.Context, project, hostID, id string) (*eim.PowerJob, error) {
	q, args := "SELECT "+powerJobCols+" FROM power_jobs WHERE project = ? AND id = ?", []any{project, id}
	if hostID != "" {
		q, args = q+" AND host_id = ?", append(args, hostID)
	}
	j, err := scanPowerJob(s.rdb.QueryRowContext(ctx, s.d.rebind(q), args...))
	if errors.Is(err, sql.ErrNoRows) && hostID == "" {
		return nil, eim.Errorf(eim.ENOTFOUND, "project %s has no power job %s", project, id)
	}
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
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		return s.cancelOpen(ctx, etx.(*tx), project, hostID, id, reason, eim.NewTime(s.now()))
	})
	if err != nil && eim.ErrorCode(err) != eim.ECONFLICT {
		return nil, err
	}
	j, gerr := s.GetPowerJob(ctx, project, hostID, id)
	if gerr != nil {
		return nil, gerr
	}
	return j, err
}

// claimPowerJobSQL takes the oldest job that no live lease holds and
// that is its host's oldest job still to end. %[1]s is now, %[2]s the
// row lock of PostgreSQL. The outer condition repeats the lease's, which
// PostgreSQL checks again on the row it locked.
const claimPowerJobSQL = "UPDATE power_jobs SET state = 'RUNNING', holder = ?, lease_until = %[1]s + CAST(? AS BIGINT), attempts = attempts + 1, updated_at = %[1]s," +
	" queued_for = '', queued_since = 0" + // its new holder queues it again if it must
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
	queuedFor, queuedSince := j.QueuedFor, unixMs(j.QueuedSince)
	if j.State.Ended() || queuedFor == "" {
		queuedFor, queuedSince = "", 0
	}
	q := "UPDATE power_jobs SET lease_until = " + lease + ", state = ?, steps = ?, step = ?, last_error = ?, deadline = ?, ended_at = ?, updated_at = ?," +
		" queued_for = ?, queued_since = ?" +
		" WHERE project = ? AND id = ? AND holder = ? AND state IN ('PENDING', 'RUNNING') RETURNING lease_until"
	args = append(args, string(j.State), stepsJSON(j.Steps), j.Step, j.LastError, j.Deadline.UnixMilli(), unixMs(j.EndedAt), now.UnixMilli(),
		queuedFor, queuedSince, j.Project, j.ID, j.Holder)
	if !j.State.Ended() {
		// Progress: one statement, no audit record (only the end is one).
		var until int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&until)
		if errors.Is(err, sql.ErrNoRows) {
			return lost(j)
		}
		if err != nil {
			return s.d.translate(fmt.Errorf("save power job %s: %w", j.ID, err), nil)
		}
		j.LeaseUntil, j.UpdatedAt = ms(until), now
		return nil
	}
	var until int64
	err := s.run(ctx, j.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		var was string
		lock := ""
		if s.d.pg {
			lock = " FOR UPDATE"
		}
		err := t.queryRow(ctx, "SELECT state FROM power_jobs WHERE project = ? AND id = ? AND holder = ? AND state IN ('PENDING', 'RUNNING')"+lock,
			j.Project, j.ID, j.Holder).Scan(&was)
		if errors.Is(err, sql.ErrNoRows) {
			return lost(j)
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("save power job %s: %w", j.ID, err), nil))
		}
		if err := t.queryRow(ctx, q, args...).Scan(&until); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return lost(j)
			}
			return t.fail(s.d.translate(fmt.Errorf("save power job %s: %w", j.ID, err), nil))
		}
		why := ""
		if j.State != eim.PowerJobSucceeded {
			why = j.LastError
		}
		ended(ctx, t, j.Project, j.ID, eim.PowerJobState(was), j.State, why)
		return nil
	})
	if err != nil {
		return err
	}
	j.LeaseUntil, j.UpdatedAt = ms(until), now
	return nil
}

// CountQueuedPowerJobs implements eim.PowerJobStore: a read of the
// queued index, the leases judged on the database's clock on PostgreSQL.
func (s *Store) CountQueuedPowerJobs(ctx context.Context, project, key string, since eim.Time, id string) (int, error) {
	if key == "" {
		return 0, eim.Errorf(eim.EINVALID, "count queued power jobs: key required")
	}
	live, args := "CAST(? AS BIGINT)", []any{s.now().UnixMilli()}
	if s.d.pg {
		live, args = pgNow, nil
	}
	q := "SELECT count(*) FROM power_jobs WHERE project = ? AND queued_for = ? AND queued_since > 0 AND queued_since <= ?" +
		" AND (queued_since < ? OR id < ?) AND state = 'RUNNING' AND lease_until >= " + live
	ms := since.UnixMilli()
	args = append([]any{project, key, ms, ms, id}, args...)
	var n int
	if err := s.rdb.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&n); err != nil {
		return 0, s.d.translate(fmt.Errorf("count queued power jobs: %w", err), nil)
	}
	return n, nil
}

func lost(j *eim.PowerJob) error {
	return eim.Errorf(eim.ECONFLICT, "power job %s is no longer held by %s (taken over, cancelled or ended)", j.ID, j.Holder)
}
