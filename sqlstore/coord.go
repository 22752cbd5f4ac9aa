package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/eimhq/eim"
)

// Leases and members (migration 0013) coordinate the server processes that
// share a database. Each call is one statement on the unscoped pool (the
// single writer on SQLite).
//
// "Now" is the database's clock on PostgreSQL, so that processes whose
// clocks disagree still agree on who holds a lease; SQLite serves one
// process, whose clock (Options.Now) it uses.

// pgNow is PostgreSQL's now in unix milliseconds.
const pgNow = "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)"

// nowSQL returns the expression of now for a statement, and appends its
// argument, if any, to args.
func (s *Store) nowSQL(args []any) (string, []any) {
	if s.d.pg {
		return pgNow, args
	}
	return "CAST(? AS BIGINT)", append(args, s.now().UnixMilli())
}

// claimSQL takes or renews a lease in one statement: the insert takes a
// free lease; on a conflict the update renews holder's own lease or takes
// over an expired one (excluded.renewed_at is now), and otherwise leaves
// the row alone and returns nothing. "WHERE true" tells SQLite's parser
// that ON CONFLICT belongs to the insert.
const claimSQL = "INSERT INTO eim_leases (name, holder, since, renewed_at, expires_at)" +
	" SELECT CAST(? AS TEXT), CAST(? AS TEXT), n.t, n.t, n.t + CAST(? AS BIGINT) FROM (SELECT %s AS t) n WHERE true" +
	" ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at," +
	" since = CASE WHEN eim_leases.holder = excluded.holder THEN eim_leases.since ELSE excluded.since END" +
	" WHERE eim_leases.holder = excluded.holder OR eim_leases.expires_at < excluded.renewed_at" +
	" RETURNING holder"

// Claim implements eim.Store.
func (s *Store) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if name == "" || holder == "" {
		return false, eim.Errorf(eim.EINVALID, "claim: lease name and holder are required")
	}
	if ttl < time.Millisecond {
		return false, eim.Errorf(eim.EINVALID, "claim %s: ttl %v is shorter than a millisecond", name, ttl)
	}
	now, args := s.nowSQL([]any{name, holder, ttl.Milliseconds()})
	rows, err := s.db.QueryContext(ctx, s.d.rebind(fmt.Sprintf(claimSQL, now)), args...)
	if err != nil {
		return false, s.d.translate(fmt.Errorf("claim lease %s: %w", name, err), nil)
	}
	defer rows.Close()
	held := false
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return false, s.d.translate(fmt.Errorf("claim lease %s: %w", name, err), nil)
		}
		held = h == holder
	}
	if err := rows.Err(); err != nil {
		return false, s.d.translate(fmt.Errorf("claim lease %s: %w", name, err), nil)
	}
	if err := rows.Close(); err != nil {
		return false, s.d.translate(fmt.Errorf("claim lease %s: %w", name, err), nil)
	}
	return held, nil
}

// Release implements eim.Store.
func (s *Store) Release(ctx context.Context, name, holder string) error {
	_, err := s.db.ExecContext(ctx, s.d.rebind("DELETE FROM eim_leases WHERE name = ? AND holder = ?"), name, holder)
	if err != nil {
		return s.d.translate(fmt.Errorf("release lease %s: %w", name, err), nil)
	}
	return nil
}

// announceSQL records or renews a member; a renewal keeps the start time
// of the first announcement unless the caller names one.
const announceSQL = "INSERT INTO eim_members (id, modules, started, expires_at)" +
	" SELECT CAST(? AS TEXT), CAST(? AS TEXT), COALESCE(CAST(? AS BIGINT), n.t), n.t + CAST(? AS BIGINT) FROM (SELECT %s AS t) n WHERE true" +
	" ON CONFLICT (id) DO UPDATE SET modules = excluded.modules, expires_at = excluded.expires_at," +
	" started = COALESCE(CAST(? AS BIGINT), eim_members.started)"

// memberGone is how long after its expiry a member's row is removed by
// the announcements of the others (a process that did not leave cleanly
// and is not coming back under its ID).
const memberGone = time.Hour

// Announce implements eim.Store.
func (s *Store) Announce(ctx context.Context, m eim.Member, ttl time.Duration) error {
	if m.ID == "" {
		return eim.Errorf(eim.EINVALID, "announce: member ID is required")
	}
	if ttl < time.Millisecond {
		return eim.Errorf(eim.EINVALID, "announce %s: ttl %v is shorter than a millisecond", m.ID, ttl)
	}
	var started any // NULL: the first announcement's now
	if !m.Started.IsZero() {
		started = m.Started.UnixMilli()
	}
	modules := m.Modules
	if modules == nil {
		modules = []string{}
	}
	now, args := s.nowSQL([]any{m.ID, jsonText(modules), started, ttl.Milliseconds()})
	args = append(args, started)
	if _, err := s.db.ExecContext(ctx, s.d.rebind(fmt.Sprintf(announceSQL, now)), args...); err != nil {
		return s.d.translate(fmt.Errorf("announce %s: %w", m.ID, err), nil)
	}
	now, args = s.nowSQL(nil)
	args = append(args, memberGone.Milliseconds())
	if _, err := s.db.ExecContext(ctx, s.d.rebind("DELETE FROM eim_members WHERE expires_at < "+now+" - CAST(? AS BIGINT)"), args...); err != nil {
		return s.d.translate(fmt.Errorf("announce %s: remove members long gone: %w", m.ID, err), nil)
	}
	return nil
}

// Members implements eim.Store.
func (s *Store) Members(ctx context.Context) ([]eim.Member, error) {
	now, args := s.nowSQL(nil)
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT id, modules, started, expires_at FROM eim_members WHERE expires_at >= "+now+" ORDER BY id"), args...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read members: %w", err), nil)
	}
	defer rows.Close()
	var out []eim.Member
	for rows.Next() {
		var m eim.Member
		var modules string
		var started, expires int64
		if err := rows.Scan(&m.ID, &modules, &started, &expires); err != nil {
			return nil, s.d.translate(fmt.Errorf("read members: %w", err), nil)
		}
		if err := json.Unmarshal([]byte(modules), &m.Modules); err != nil {
			return nil, fmt.Errorf("read members: %s: modules %q: %w", m.ID, modules, err)
		}
		m.Started, m.Expires = eim.TimeFromUnixMilli(started), eim.TimeFromUnixMilli(expires)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("read members: %w", err), nil)
	}
	return out, nil
}

// Leave implements eim.Store.
func (s *Store) Leave(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind("DELETE FROM eim_members WHERE id = ?"), id); err != nil {
		return s.d.translate(fmt.Errorf("leave %s: %w", id, err), nil)
	}
	return nil
}
