package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/eimhq/eim"
)

// Grouped creates (PostgreSQL).
//
// A transaction that runs the calls of many callers together — a batch of
// the inventory's Batcher, e.g. 30 host creates of the API's clients — pays
// a round trip to PostgreSQL for each of their INSERTs, answered by a
// backend on the same few cores: for 32 API clients' host creates those
// round trips were nearly half of the statements. UpdateGrouped lets such a
// transaction hold its creates back and write them together: one
// INSERT … SELECT FROM unnest(…) per kind, before the transaction's next
// statement or at its end.
//
// The price is that an insert that fails (a duplicate UUID, a generated ID
// that collides) fails the transaction at that later statement or at its
// commit, not at the Create call: whose create it was is not known. The
// Batcher, the one user, is built for that: a batch that fails as a whole
// is run again one call at a time, each in a plain Update whose errors are
// its own. The generated IDs of the held creates are cleared when their
// write fails, so that a re-run generates new ones.

// UpdateGrouped implements eim.Store: on PostgreSQL a transaction's
// creates are held back and written together (see above), so Create does
// not report the failure of the insert itself; the transaction does. fn
// must not depend on Create's error beyond returning it. On SQLite, where
// a statement is a function call and not a round trip, creates are written
// at once and it is Update.
//
// It returns once the transaction has committed, before its events are
// numbered in the change feed (PostgreSQL): they are once sequenced has
// returned, and only then may the calls' callers be told they are done.
// Meanwhile the caller may run its next transaction: a batcher's next
// batch is not held up by the previous one's sequencer round.
func (s *Store) UpdateGrouped(ctx context.Context, project string, fn func(eim.Tx) error) (sequenced func(), err error) {
	return s.runTx(ctx, project, true, true, fn)
}

// heldCreate is a create waiting for the transaction's next statement.
type heldCreate struct {
	c         *codec
	r         eim.Resource
	vals      []any
	generated bool
}

// maxGroupRows bounds the rows of one grouped INSERT. Each column is one
// array parameter whatever the rows, so PostgreSQL's parameter limit does
// not apply; this keeps one statement's message moderate.
const maxGroupRows = 1000

// flushHeld writes the held creates, in their order, one statement per run
// of the same kind (a later create may refer to an earlier one of another
// kind).
func (t *tx) flushHeld(ctx context.Context) error {
	return t.flushHeldThen(ctx, -1)
}

// flushHeldWithEvents is flushHeld followed by the insert of t's events
// and audit records (flushPostgres), in the same statement as the last
// run of creates: the commit of a batch of creates is then one round trip
// fewer, or, on its own (commitHeld), its only one.
func (t *tx) flushHeldWithEvents(ctx context.Context, at int64) error {
	return t.flushHeldThen(ctx, at)
}

// flushHeldThen writes the held creates; with eventsAt >= 0, also t's
// events and audit records, dated eventsAt, with the last run.
func (t *tx) flushHeldThen(ctx context.Context, eventsAt int64) error {
	if len(t.held) == 0 {
		return nil
	}
	held := t.held
	t.held = nil
	for start := 0; start < len(held); {
		end := start + 1
		for end < len(held) && held[end].c == held[start].c && end-start < maxGroupRows {
			end++
		}
		withEvents := eventsAt >= 0 && end == len(held)
		if err := t.insertGroup(ctx, held[start:end], withEvents, eventsAt); err != nil {
			for _, h := range held {
				if h.generated {
					h.r.Base().ResourceID = ""
				}
			}
			return t.fail(err)
		}
		start = end
	}
	return nil
}

// heldOneStatement reports whether t's held creates are written in one
// statement (one run of a kind, within maxGroupRows): only then may they
// be written outside a transaction (commitHeld).
func (t *tx) heldOneStatement() bool {
	if len(t.held) > maxGroupRows {
		return false
	}
	for _, h := range t.held[1:] {
		if h.c != t.held[0].c {
			return false
		}
	}
	return true
}

// insertGroup inserts rows of one kind in one statement, and with
// withEvents t's events too (dated at).
func (t *tx) insertGroup(ctx context.Context, rows []heldCreate, withEvents bool, at int64) error {
	c := rows[0].c
	q, err := t.s.groupInsert(ctx, c)
	if err != nil {
		return err
	}
	args := make([]any, len(c.cols), len(c.cols)+5)
	for i, col := range c.cols {
		switch col.kind {
		case colInt, colUint, colTime:
			a := make([]int64, len(rows))
			for j, r := range rows {
				a[j] = r.vals[i].(int64)
			}
			args[i] = a
		case colBool:
			a := make([]bool, len(rows))
			for j, r := range rows {
				a[j] = r.vals[i].(bool)
			}
			args[i] = a
		case colEdge:
			a := make([]*string, len(rows))
			for j, r := range rows {
				if v, ok := r.vals[i].(string); ok {
					a[j] = &v
				}
			}
			args[i] = a
		default: // text, and JSON as its text
			a := make([]string, len(rows))
			for j, r := range rows {
				a[j] = r.vals[i].(string)
			}
			args[i] = a
		}
	}
	var n int64
	if withEvents {
		q = "WITH created AS (" + q + " RETURNING 1), recorded AS (" + eventsInsertPG(len(args)+1) + " RETURNING 1)"
		args = append(args, t.eventArgs(at)...)
		audits := len(t.audits) > 0
		if audits {
			// The audit records too (the creates' own, and any other of
			// the transaction's not yet inserted): a batch of creates is
			// then one statement, its commit with no BEGIN or COMMIT
			// around it (commitHeld).
			aargs, err := t.auditArgs(at)
			if err != nil {
				return err
			}
			q += ", audited AS (" + auditInsertPG(len(args)+1) + " RETURNING 1)"
			args = append(args, aargs...)
		}
		q += "\nSELECT count(*) FROM created"
		if err := t.q.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return t.s.d.translate(fmt.Errorf("create %d %ss and record events: %w", len(rows), c.kind, err), nil)
		}
		if audits {
			t.audits, t.audited = nil, true
		}
	} else {
		res, err := t.q.ExecContext(ctx, q, args...)
		if err != nil {
			return t.s.d.translate(fmt.Errorf("create %d %ss: %w", len(rows), c.kind, err), nil)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("create %d %ss: %w", len(rows), c.kind, err)
		}
	}
	if int(n) != len(rows) {
		return eim.Errorf(eim.EINTERNAL, "create %d %ss: %d rows written", len(rows), c.kind, n)
	}
	return nil
}

// groupInserts holds each table's grouped INSERT, built from the column
// types PostgreSQL reports (the arrays must be of the columns' types).
type groupInserts struct {
	mu sync.Mutex
	q  map[string]string
}

func (s *Store) groupInsert(ctx context.Context, c *codec) (string, error) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if q, ok := s.groups.q[c.table]; ok {
		return q, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, c.table)
	if err != nil {
		return "", fmt.Errorf("column types of %s: %w", c.table, err)
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return "", fmt.Errorf("column types of %s: %w", c.table, err)
		}
		types[name] = typ
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("column types of %s: %w", c.table, err)
	}
	names := make([]string, len(c.cols))
	arrays := make([]string, len(c.cols))
	for i, col := range c.cols {
		typ, ok := types[col.name]
		if !ok {
			return "", fmt.Errorf("column types of %s: no column %s", c.table, col.name)
		}
		names[i] = col.name
		arrays[i] = fmt.Sprintf("$%d::%s[]", i+1, typ)
	}
	// No ON CONFLICT (id) DO NOTHING, unlike a lone create: an ID taken
	// already (a generated one that collided) must fail the statement, for
	// a statement that is its own transaction (commitHeld) would otherwise
	// commit the other rows; the creates are then run again one by one,
	// with new IDs.
	q := fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM unnest(%s)",
		c.table, strings.Join(names, ", "), strings.Join(arrays, ", "))
	if s.groups.q == nil {
		s.groups.q = map[string]string{}
	}
	s.groups.q[c.table] = q
	return q, nil
}
