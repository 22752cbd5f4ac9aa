package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// lastSeenChunk bounds the rows of one statement (3 parameters each; far
// below both engines' parameter limits).
const lastSeenChunk = 500

// SaveLastSeen implements eim.Store: one transaction, an upsert per chunk.
// The join with hosts skips hosts deleted since they were last seen, where
// a plain insert would fail the whole batch on the foreign key.
func (s *Store) SaveLastSeen(ctx context.Context, seen []eim.LastSeen) error {
	seen = newestPerHost(seen)
	if len(seen) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.d.translate(fmt.Errorf("save last seen: begin: %w", err), nil)
	}
	defer tx.Rollback()
	for len(seen) > 0 {
		n := min(len(seen), lastSeenChunk)
		q, args := lastSeenUpsert(seen[:n])
		if _, err := tx.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
			return s.d.translate(fmt.Errorf("save last seen: %w", err), nil)
		}
		seen = seen[n:]
	}
	if err := tx.Commit(); err != nil {
		return s.d.translate(fmt.Errorf("save last seen: commit: %w", err), nil)
	}
	return nil
}

// newestPerHost keeps each host's newest time: PostgreSQL refuses an upsert
// that touches a row twice.
func newestPerHost(seen []eim.LastSeen) []eim.LastSeen {
	at := make(map[string]int, len(seen))
	out := make([]eim.LastSeen, 0, len(seen))
	for _, ls := range seen {
		if i, ok := at[ls.HostID]; ok {
			if ls.At.After(out[i].At) {
				out[i] = ls
			}
			continue
		}
		at[ls.HostID] = len(out)
		out = append(out, ls)
	}
	return out
}

// lastSeenUpsert writes a chunk of times. The host's existence is checked
// in the (project, id) index, which holds both columns: joining the hosts
// table for the project read a wide row per host, the most of a flush's
// cost with a fleet larger than the page cache.
func lastSeenUpsert(seen []eim.LastSeen) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(seen))
	b.WriteString("WITH v (id, p, t) AS (VALUES ")
	for i, ls := range seen {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT))")
		args = append(args, ls.HostID, ls.Project, ls.At.UnixMilli())
	}
	// "WHERE … AND true" tells SQLite's parser that ON CONFLICT belongs to
	// the upsert, not to the select.
	b.WriteString(") INSERT INTO host_liveness (host_id, project, last_seen) SELECT v.id, v.p, v.t FROM v" +
		" WHERE EXISTS (SELECT 1 FROM hosts h WHERE h.project = v.p AND h.id = v.id) AND true" +
		" ON CONFLICT (host_id) DO UPDATE SET last_seen = excluded.last_seen WHERE host_liveness.last_seen < excluded.last_seen")
	return b.String(), args
}

// LastSeen implements eim.Store.
func (s *Store) LastSeen(ctx context.Context) ([]eim.LastSeen, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT project, host_id, last_seen FROM host_liveness")
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read last seen: %w", err), nil)
	}
	return s.scanLastSeen(rows)
}

func (s *Store) scanLastSeen(rows *sql.Rows) ([]eim.LastSeen, error) {
	defer rows.Close()
	var out []eim.LastSeen
	for rows.Next() {
		var ls eim.LastSeen
		var ms int64
		if err := rows.Scan(&ls.Project, &ls.HostID, &ms); err != nil {
			return nil, s.d.translate(fmt.Errorf("read last seen: %w", err), nil)
		}
		ls.At = time.UnixMilli(ms)
		out = append(out, ls)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("read last seen: %w", err), nil)
	}
	return out, nil
}

// LastSeenOf implements eim.Store: one statement for the whole list.
func (s *Store) LastSeenOf(ctx context.Context, hostIDs []string) ([]eim.LastSeen, error) {
	if len(hostIDs) == 0 {
		return nil, nil
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT project, host_id, last_seen FROM host_liveness WHERE "+s.d.inList("host_id", "?")), s.d.listArg(hostIDs))
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read last seen: %w", err), nil)
	}
	return s.scanLastSeen(rows)
}
