package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

// The audit log (eim.Store.Audit). A transaction collects a record per
// write as it goes — who (the actor of the write's context, else of the
// transaction's), what, and the fields old → new — and inserts them with
// its events, before its commit: a write that rolls back leaves none.
//
// A write of some fields (UpdateFields) gets the old values of its columns
// from the UPDATE itself on PostgreSQL (a CTE that reads them FOR UPDATE,
// so that they are those the write replaces even when a concurrent writer
// of the row commits in between) and from a narrow read of those columns
// just before it on SQLite (one writer); a whole-row Update reads the row
// first, locked on PostgreSQL.

type pendingAudit struct {
	project, actor, id string
	kind               eim.Kind
	op                 eim.Op
	changes            map[string]eim.Change
	// raw, when not "", is changes encoded already (a create's: see
	// createChangesJSON), and changes is nil.
	raw string
}

// changesJSON is the record's changes as stored.
func (a *pendingAudit) changesJSON() (string, error) {
	if a.raw != "" {
		return a.raw, nil
	}
	ch := a.changes
	if ch == nil {
		ch = map[string]eim.Change{}
	}
	b, err := json.Marshal(ch)
	if err != nil {
		return "", fmt.Errorf("record audit: %w", err)
	}
	return string(b), nil
}

// audited reports whether writes of kind k are recorded: everything but
// the provisioning workflows' step-by-step progress (internal, and
// summarised by the instance's own fields, which are recorded).
func audited(k eim.Kind) bool { return k != eim.KindWorkflow }

func (t *tx) actorOf(ctx context.Context) string {
	if a := eim.ActorOf(ctx); a != "system" {
		return a
	}
	return t.actor
}

func (t *tx) addAudit(ctx context.Context, project string, k eim.Kind, id string, op eim.Op, changes map[string]eim.Change) {
	if !audited(k) {
		return
	}
	t.audits = append(t.audits, pendingAudit{project: project, actor: t.actorOf(ctx), id: id, kind: k, op: op, changes: changes})
}

// addCreateAudit records the create of r (of codec c, its columns'
// values vals) with the fields it sets, encoded at once.
func (t *tx) addCreateAudit(ctx context.Context, c *codec, project, id string, r eim.Resource, vals []any) {
	if !audited(c.kind) {
		return
	}
	t.audits = append(t.audits, pendingAudit{project: project, actor: t.actorOf(ctx), id: id, kind: c.kind, op: eim.OpCreated, raw: createChangesJSON(c, r, vals)})
}

// auditedField reports whether col is one of the fields an audit record
// shows: not the store's own (id, project, timestamps).
func auditedField(col *column) bool {
	switch col.name {
	case "id", "project", "created_at", "updated_at":
		return false
	}
	return col.field != nil
}

// fieldName is how an audit record names col: its JSON name, or its
// column for a field hidden from the API.
func fieldName(col *column) string {
	if col.field.Name != "" {
		return col.field.Name
	}
	return col.name
}

var jsonNull = json.RawMessage("null")

// fieldJSON is the value of col in r as an audit record shows it: JSON,
// null for none (r nil), and a secret redacted unless it is empty.
func fieldJSON(col *column, r eim.Resource) json.RawMessage {
	if r == nil {
		return jsonNull
	}
	v := col.field.Value(r)
	if eim.Secret(col.field) {
		if v.IsZero() {
			return jsonNull
		}
		return json.RawMessage(eim.Redacted)
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return json.RawMessage(`"[unencodable]"`)
	}
	return b
}

// auditedColumn is a column an audit record shows, and the start of its
// entry in a create's record.
type auditedColumn struct {
	col    *column
	idx    int    // its place in the codec's cols, and in a row's values
	prefix []byte // "name":{"old":null,"new":
	secret bool   // shown redacted (eim.Secret)
	// plain: its type has no JSON or text marshaler of its own, so the
	// JSON of its value follows from its SQL value (set, writeNew).
	plain bool
}

// auditedColumns are the columns of cols an audit record shows, in the
// order of their names (json.Marshal's order for a map, as the other
// records have it).
func auditedColumns(cols []*column) []auditedColumn {
	var out []auditedColumn
	for i, col := range cols {
		if !auditedField(col) {
			continue
		}
		name, _ := json.Marshal(fieldName(col)) // a string encodes
		out = append(out, auditedColumn{col: col, idx: i, prefix: append(name, `:{"old":null,"new":`...),
			secret: eim.Secret(col.field), plain: !marshals(col.field.Type)})
	}
	slices.SortFunc(out, func(a, b auditedColumn) int { return strings.Compare(fieldName(a.col), fieldName(b.col)) })
	return out
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// marshals reports whether encoding/json encodes values of t by a method
// of t's (or of *t's, to be safe).
func marshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || p.Implements(jsonMarshaler) || t.Implements(textMarshaler) || p.Implements(textMarshaler)
}

// createChangesJSON is the changes of a create's record, encoded: the
// fields it sets (those not at their zero), each from null. It is what
// json.Marshal of the map of those changes gives, written in one pass
// from the row's values vals (values(r, c.cols)), which the create has
// made already: a create is the most frequent write, and reading each
// field again by reflection and encoding it through encoding/json cost
// it a twentieth of its CPU. It is written into a buffer the size of
// the kind's largest record yet, so that a host's (two kilobytes of
// defaults) is one allocation.
func createChangesJSON(c *codec, r eim.Resource, vals []any) string {
	var b strings.Builder
	b.Grow(int(c.auditSize.Load()))
	b.WriteByte('{')
	for i := range c.audited {
		ac := &c.audited[i]
		if !ac.set(r, vals[ac.idx]) {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(ac.prefix)
		ac.writeNew(&b, r, vals[ac.idx])
		b.WriteByte('}')
	}
	b.WriteByte('}')
	if n := int64(b.Len()); n > c.auditSize.Load() && n <= maxAuditHint {
		c.auditSize.Store(n)
	}
	return b.String()
}

// maxAuditHint bounds the buffer createChangesJSON starts with: a record
// larger than that (long lists) does not make every later one pay.
const maxAuditHint = 16 << 10

// set reports whether ac's field of r, v its SQL value, is set (not at
// its zero): whether a create's record shows it.
func (ac *auditedColumn) set(r eim.Resource, v any) bool {
	if !ac.plain {
		return !ac.col.field.Value(r).IsZero()
	}
	switch ac.col.kind {
	case colString, colEdge:
		s, _ := v.(string) // an edge's "" is nil
		return s != ""
	case colInt, colUint:
		return v.(int64) != 0
	case colBool:
		return v.(bool)
	}
	// JSON (whose SQL value is "[]" or "{}" for both a nil and an empty
	// slice or map), and any other kind.
	return !ac.col.field.Value(r).IsZero()
}

// writeNew writes the JSON of ac's field of r, v its SQL value, as
// fieldJSON gives it.
func (ac *auditedColumn) writeNew(b *strings.Builder, r eim.Resource, v any) {
	switch {
	case !ac.plain:
		b.Write(fieldJSON(ac.col, r))
		return
	case ac.secret:
		b.WriteString(eim.Redacted)
		return
	}
	var num [24]byte
	switch ac.col.kind {
	case colString, colEdge:
		writeJSONString(b, v.(string))
	case colInt:
		b.Write(strconv.AppendInt(num[:0], v.(int64), 10))
	case colUint:
		b.Write(strconv.AppendUint(num[:0], uint64(v.(int64)), 10))
	case colBool:
		b.WriteString("true")
	case colJSON:
		// A set value's SQL value is json.Marshal's text of it.
		b.WriteString(v.(string))
	default:
		b.Write(fieldJSON(ac.col, r))
	}
}

// writeJSONString writes s as encoding/json encodes a string: as is
// between quotes when it holds only printable ASCII that needs no
// escaping (names, IDs, states), else through encoding/json itself.
func writeJSONString(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			enc, err := json.Marshal(s)
			if err != nil {
				b.WriteString(`"[unencodable]"`)
				return
			}
			b.Write(enc)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// diffChanges are the fields of cols whose value differs between old (nil:
// unknown) and r.
func diffChanges(cols []*column, old, r eim.Resource) map[string]eim.Change {
	out := map[string]eim.Change{}
	for _, col := range cols {
		if !auditedField(col) {
			continue
		}
		o, n := fieldJSON(col, old), fieldJSON(col, r)
		if old != nil {
			if eim.Secret(col.field) {
				// Redacted both: compare the values themselves.
				if col.field.Value(old).Equal(col.field.Value(r)) {
					continue
				}
			} else if bytes.Equal(o, n) {
				continue
			}
		}
		out[fieldName(col)] = eim.Change{Old: o, New: n}
	}
	return out
}

// current reads the stored row of c with id as the write about to replace
// it sees it (FOR UPDATE on PostgreSQL); nil when there is none (the
// write then fails with ENOTFOUND itself).
func (t *tx) current(ctx context.Context, c *codec, id string) (eim.Resource, error) {
	q, vals := c.get, []any{id}
	if t.project != "" {
		q, vals = c.getScoped, append(vals, t.project)
	}
	if t.s.d.pg {
		q += " FOR UPDATE"
	}
	rows, err := t.query(ctx, q, vals...)
	if err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read %s %s before its update: %w", c.kind, id, err), nil))
	}
	items, err := t.scanAll(c, rows, "")
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}

// currentCols reads into sc (a scanner of some columns of c) the stored
// values of the row with id; false when there is none.
func (t *tx) currentCols(ctx context.Context, c *codec, sc *scanner, id string) (bool, error) {
	names := make([]string, len(sc.c.cols))
	for i, col := range sc.c.cols {
		names[i] = col.name
	}
	q, vals := "SELECT "+strings.Join(names, ", ")+" FROM "+c.table+" WHERE id = ?", []any{id}
	if t.project != "" {
		q, vals = q+" AND project = ?", append(vals, t.project)
	}
	rows, err := t.query(ctx, q, vals...)
	if err != nil {
		return false, t.fail(t.s.d.translate(fmt.Errorf("read %s %s before its update: %w", c.kind, id, err), nil))
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(sc.dest...); err != nil {
			return false, t.fail(fmt.Errorf("read %s %s before its update: %w", c.kind, id, err))
		}
	}
	if err := rows.Err(); err != nil {
		return false, t.fail(t.s.d.translate(fmt.Errorf("read %s %s before its update: %w", c.kind, id, err), nil))
	}
	return found, nil
}

const auditInsert1 = "INSERT INTO audit_log (project, seq, at, principal, action, kind, resource_id, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

// auditBatch bounds the rows of one INSERT (SQLite's parameter limit).
const auditBatch = 400

// A record's seq is its project's (audit_seqs): 1, 2, 3… On SQLite the
// writer takes the next numbers of each project it records in, as part of
// its transaction (one writer: they commit in order). On PostgreSQL it
// inserts its records without a seq (NULL, not shown by the readers), and
// the change feed's sequencer numbers the committed ones per project in
// the round that numbers its events (see sequencer.go): rounds are
// serialized, each commits before the next begins, so a project's numbers
// become visible in order — a reader that has seen seq n of a project will
// never later find a lower one appear, and a cursor over seq skips
// nothing — while writers commit without waiting for each other. A writer
// returns once a round after its commit has run, so its records are
// numbered by then.

// auditInsertPG inserts t.auditArgs's records in one statement, its
// parameters numbered from first: a statement of its own, or the body of
// a common table expression beside the events' (flushPostgres) or a
// batch's rows and events (insertGroup).
func auditInsertPG(first int) string {
	return fmt.Sprintf(`INSERT INTO audit_log (project, at, principal, action, kind, resource_id, changes)
SELECT a.project, $%d, a.principal, a.action, a.kind, a.resource_id, a.changes::jsonb
FROM unnest($%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::text[], $%d::text[]) WITH ORDINALITY AS a(project, principal, action, kind, resource_id, changes, n)
ORDER BY a.n`, first+6, first, first+1, first+2, first+3, first+4, first+5)
}

// auditArgs are the parameters of auditInsertPG.
func (t *tx) auditArgs(at int64) ([]any, error) {
	n := len(t.audits)
	projects, principals, actions, kinds, ids, changes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i := range t.audits {
		a := &t.audits[i]
		b, err := a.changesJSON()
		if err != nil {
			return nil, err
		}
		projects[i], principals[i], actions[i], kinds[i], ids[i], changes[i] = a.project, a.actor, string(a.op), string(a.kind), a.id, b
	}
	return []any{projects, principals, actions, kinds, ids, changes, at}, nil
}

const auditSeqTake = "INSERT INTO audit_seqs (project, seq) VALUES (?, ?) ON CONFLICT (project) DO UPDATE SET seq = seq + excluded.seq RETURNING seq"

// takeSeqs hands out the seqs of t's records (SQLite): the next numbers
// of each project, in the order of the records.
func (t *tx) takeSeqs(ctx context.Context) ([]int64, error) {
	count := map[string]int64{}
	for _, a := range t.audits {
		count[a.project]++
	}
	next := make(map[string]int64, len(count))
	for _, p := range slices.Sorted(maps.Keys(count)) {
		var last int64
		rows, err := t.query(ctx, auditSeqTake, p, count[p])
		if err == nil {
			for rows.Next() {
				err = rows.Scan(&last)
			}
			if err == nil {
				err = rows.Err()
			}
			rows.Close()
		}
		if err != nil {
			return nil, t.s.d.translate(fmt.Errorf("record audit: number %s's records: %w", p, err), nil)
		}
		next[p] = last - count[p] + 1
	}
	out := make([]int64, len(t.audits))
	for i, a := range t.audits {
		out[i] = next[a.project]
		next[a.project]++
	}
	return out, nil
}

// flushAudit inserts t's audit records, dated at.
func (t *tx) flushAudit(ctx context.Context, at int64) error {
	if len(t.audits) == 0 {
		return nil
	}
	if err := t.ensureBegun(ctx); err != nil {
		return err
	}
	if t.s.d.pg {
		args, err := t.auditArgs(at)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, auditInsertPG(1), args...); err != nil {
			return t.s.d.translate(fmt.Errorf("record audit: %w", err), nil)
		}
		t.audits, t.audited = nil, true
		return nil
	}
	seqs, err := t.takeSeqs(ctx)
	if err != nil {
		return err
	}
	for start := 0; start < len(t.audits); start += auditBatch {
		batch := t.audits[start:min(start+auditBatch, len(t.audits))]
		q := auditInsert1 + strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?)", len(batch)-1)
		vals := make([]any, 0, 8*len(batch))
		for i := range batch {
			a := &batch[i]
			b, err := a.changesJSON()
			if err != nil {
				return err
			}
			vals = append(vals, a.project, seqs[start+i], at, a.actor, string(a.op), string(a.kind), a.id, b)
		}
		if _, err := t.exec(ctx, q, vals...); err != nil {
			return t.s.d.translate(fmt.Errorf("record audit: %w", err), nil)
		}
	}
	return nil
}

// AppendAudit implements eim.Store.
func (s *Store) AppendAudit(ctx context.Context, recs []eim.AuditRecord) error {
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		if r.Project == "" || r.Principal == "" || r.Action == "" || r.Kind == "" || r.ResourceID == "" {
			return eim.Errorf(eim.EINVALID, "audit record: project, principal, action, kind and resourceId are required (got %q, %q, %q, %q, %q)",
				r.Project, r.Principal, r.Action, r.Kind, r.ResourceID)
		}
	}
	return s.Update(ctx, "", func(x eim.Tx) error {
		t := x.(*tx)
		for _, r := range recs {
			t.audits = append(t.audits, pendingAudit{project: r.Project, actor: r.Principal, id: r.ResourceID, kind: r.Kind, op: eim.Op(r.Action), changes: r.Changes})
		}
		return nil
	})
}

// Audit implements eim.Store: one page of a project's records, newest
// first. It runs in the project's scope (on PostgreSQL as the tenant
// role, whose row-level security shows the project's rows only).
func (s *Store) Audit(ctx context.Context, project string, q eim.AuditQuery) ([]eim.AuditRecord, int, error) {
	if project == "" {
		return nil, 0, eim.Errorf(eim.EINVALID, "project: required")
	}
	a := &args{pg: s.d.pg}
	// Not yet numbered (PostgreSQL): not shown yet.
	cond := "audit_log.project = " + a.add(project) + " AND audit_log.seq IS NOT NULL"
	where, fargs, err := filter.WhereSchema(s.d.filter, eim.AuditSchema(), q.Filter, len(a.list))
	if err != nil {
		return nil, 0, err
	}
	if where != "" {
		a.list = append(a.list, fargs...)
		cond += " AND (" + where + ")"
	}
	var (
		out   []eim.AuditRecord
		total = -1
	)
	err = s.View(ctx, project, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !q.NoTotal {
			row := t.queryRowBuilt(ctx, "SELECT COUNT(*) FROM audit_log WHERE "+cond, a.list)
			if err := row.Scan(&total); err != nil {
				return t.fail(s.d.translate(fmt.Errorf("count audit records: %w", err), nil))
			}
		}
		sql := "SELECT seq, project, at, principal, action, kind, resource_id, changes FROM audit_log WHERE " + cond + " ORDER BY seq DESC"
		if q.Limit > 0 {
			sql += " LIMIT " + strconv.Itoa(q.Limit) + " OFFSET " + strconv.Itoa(max(q.Offset, 0))
		}
		rows, err := t.queryBuilt(ctx, sql, a.list)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("audit records: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanAudit(rows)
			if err != nil {
				return t.fail(err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("audit records: %w", err), nil))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

func scanAudit(rows *sql.Rows) (eim.AuditRecord, error) {
	var (
		r       eim.AuditRecord
		at      int64
		kind    string
		changes []byte
	)
	if err := rows.Scan(&r.Seq, &r.Project, &at, &r.Principal, &r.Action, &kind, &r.ResourceID, &changes); err != nil {
		return r, fmt.Errorf("audit records: %w", err)
	}
	r.Time, r.Kind = eim.TimeFromUnixMilli(at), eim.Kind(kind)
	if err := json.Unmarshal(changes, &r.Changes); err != nil {
		return r, fmt.Errorf("audit record %d: changes: %w", r.Seq, err)
	}
	return r, nil
}

// PruneAudit implements eim.Store.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.d.rebind("DELETE FROM audit_log WHERE at < ?"), eim.NewTime(before).UnixMilli())
	if err != nil {
		return 0, s.d.translate(fmt.Errorf("prune audit log: %w", err), nil)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
