package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/eimhq/eim"
)

// tx is an eim.Tx. A non-empty project scopes every statement.
type tx struct {
	s *Store
	// q runs the statements: sqlTx, or on PostgreSQL for reads, which run
	// outside a transaction (see beginPostgres), the connection or pool.
	q       querier
	cq      countedQuerier // q's counter (see use)
	sqlTx   *sql.Tx        // nil for a PostgreSQL read
	conn    *sql.Conn      // PostgreSQL, scoped: the tenant connection
	project string
	write   bool
	events  []pendingEvent
	audits  []pendingAudit
	audited bool   // PostgreSQL: t inserted audit records, numbered by the sequencer
	actor   string // who acts, from the context of Store.Update (see audit.go)
	err     error  // sticky: the first failed statement aborts the transaction
	// refs holds the rows of reference kinds read in this transaction
	// (see cachedKinds).
	refs map[refKey]*scanner
	// private: t has written a cached kind or a project, so its reads may
	// see its own uncommitted rows: it neither reads nor fills the Store's
	// refCache.
	private bool
	refGen  uint64 // the refCache's generation when t began (see refCache.put)
	// group: creates are held back in held and written together before
	// the next statement (see UpdateGrouped; PostgreSQL only).
	group bool
	held  []heldCreate
	// lazy: a write whose transaction begins at its first statement
	// (PostgreSQL, grouped); until then q is the connection or the pool.
	lazy bool
	// inserted counts, on PostgreSQL, the rows t's own INSERT statements
	// added to tables that no event names (the module tables: edge
	// workload targets, statuses…), for the growth tracking (analyze.go).
	inserted map[string]int64
	// bound holds the cached statements bound to sqlTx (SQLite), one per
	// statement however often t runs it (see bind).
	bound map[*sql.Stmt]*sql.Stmt
}

// bind returns st bound to t's transaction. Each Tx.StmtContext makes a
// statement that lives, with the pool's record of it, until the
// transaction ends: a transaction that ran one statement 100,000 times
// (a batch of last-seen times) kept 100,000 of them, and the pool's map
// of them kept its size afterwards.
func (t *tx) bind(ctx context.Context, st *sql.Stmt) *sql.Stmt {
	if b, ok := t.bound[st]; ok {
		return b
	}
	b := t.sqlTx.StmtContext(ctx, st)
	if t.bound == nil {
		t.bound = map[*sql.Stmt]*sql.Stmt{}
	}
	t.bound[st] = b
	return b
}

// cachedKinds are the kinds whose rows a transaction keeps once read: what
// writes refer to and answers are expanded with (regions, sites, OS
// profiles…), read again and again by a batch of calls (a batch of 32
// host creates over a few sites read each site twice and their region
// once per create) and written rarely. A transaction's own update or
// delete of such a row drops what it kept. Within one transaction the
// reads so see the row as of their first read: at READ COMMITTED, as if
// the later reads had run then (a reference that went away meanwhile still
// fails the write on its foreign key).
var cachedKinds = map[eim.Kind]bool{
	eim.KindRegion: true, eim.KindSite: true, eim.KindOS: true, eim.KindProvider: true,
	eim.KindLocalAccount: true, eim.KindCustomConfig: true, eim.KindOSUpdatePolicy: true,
}

type refKey struct {
	kind eim.Kind
	id   string
}

// cached returns a fresh copy of the kept row of kind k with the id: kept
// by t, or else by the Store's refCache (and from then on by t, so that t
// sees it as of that first read).
func (t *tx) cached(c *codec, k eim.Kind, id string) (eim.Resource, bool, error) {
	sc := t.refs[refKey{k, id}]
	if sc == nil {
		if !cachedKinds[k] || t.private {
			return nil, false, nil
		}
		var ok bool
		if sc, ok = t.s.refs.get(k, id, t.project); !ok {
			return nil, false, nil
		}
		if t.refs == nil {
			t.refs = map[refKey]*scanner{}
		}
		t.refs[refKey{k, id}] = sc
	}
	r, err := sc.decode()
	return r, err == nil, err
}

// share offers the rows of kind k that t has just read and kept to the
// Store's refCache, unless something was dropped from it since t began:
// on SQLite t reads one snapshot, which may predate that change.
func (t *tx) share(k eim.Kind, items []eim.Resource) {
	if !cachedKinds[k] || t.private {
		return
	}
	for _, r := range items {
		m := r.Base()
		if sc := t.refs[refKey{k, m.ResourceID}]; sc != nil {
			t.s.refs.put(t.refGen, k, m.ResourceID, m.Project, sc)
		}
	}
}

// keep records the row sc scanned last, when k is cached.
func (t *tx) keep(k eim.Kind, id string, sc *scanner) {
	if !cachedKinds[k] {
		return
	}
	if t.refs == nil {
		t.refs = map[refKey]*scanner{}
	}
	t.refs[refKey{k, id}] = sc.snapshot()
}

// forget drops what t kept of a row it writes; a delete drops every row,
// as the database's cascades may change others.
func (t *tx) forget(k eim.Kind, id string, deleted bool) {
	if !cachedKinds[k] || t.refs == nil {
		return
	}
	if deleted {
		clear(t.refs)
		return
	}
	delete(t.refs, refKey{k, id})
}

var _ eim.Tx = (*tx)(nil)

// querier is what *sql.Tx, *sql.Conn and *sql.DB have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// countedQuerier is a querier that counts its statements (Store.Work).
type countedQuerier struct {
	q querier
	n *atomic.Int64
}

func (c *countedQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.q.ExecContext(ctx, query, args...)
}

func (c *countedQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.q.QueryContext(ctx, query, args...)
}

func (c *countedQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.n.Add(1)
	return c.q.QueryRowContext(ctx, query, args...)
}

// use makes q t's querier, counted (in t itself: no allocation).
func (t *tx) use(q querier) {
	t.cq = countedQuerier{q: q, n: &t.s.work.stmts}
	t.q = &t.cq
}

// release ends t: it rolls back what was not committed and returns the
// connection to its pool.
func (t *tx) release() {
	if t.sqlTx != nil {
		t.sqlTx.Rollback()
	}
	if t.conn != nil {
		t.conn.Close()
	}
}

// maxIDAttempts bounds retries of generated IDs: 8 hex digits collide now
// and then in fleets of hundreds of thousands, never ten times in a row.
const maxIDAttempts = 10

func (t *tx) codec(k eim.Kind) (*codec, error) {
	if c := codecOf(k); c != nil {
		return c, nil
	}
	return nil, eim.Errorf(eim.EINVALID, "unknown resource kind %q", k)
}

// exec runs q (with "?" placeholders) in t: rebound for PostgreSQL,
// prepared once and reused for SQLite when it is one of the cached ones.
func (t *tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return nil, err
	}
	if err := t.flushHeld(ctx); err != nil {
		return nil, err
	}
	if t.s.stmts != nil {
		db := t.db()
		if st := t.s.stmts.get(db, q); st != nil {
			t.s.work.stmts.Add(1)
			res, err := t.bind(ctx, st).ExecContext(ctx, args...)
			if err == nil && t.s.growth != nil {
				t.countInserted(q, res)
			}
			return res, err
		}
		t.s.stmts.learn(db, q)
	}
	res, err := t.q.ExecContext(ctx, t.s.d.rebind(q), args...)
	if err == nil && t.s.growth != nil {
		t.countInserted(q, res)
	}
	return res, err
}

func (t *tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return nil, err
	}
	if err := t.flushHeld(ctx); err != nil {
		return nil, err
	}
	if t.s.stmts != nil {
		db := t.db()
		if st := t.s.stmts.get(db, q); st != nil {
			t.s.work.stmts.Add(1)
			return t.bind(ctx, st).QueryContext(ctx, args...)
		}
		t.s.stmts.learn(db, q)
	}
	return t.q.QueryContext(ctx, t.s.d.rebind(q), args...)
}

// queryBuilt runs a statement whose placeholders are already in the
// dialect's form (built with args). On SQLite it is prepared once it has
// been seen (see stmtCache).
func (t *tx) queryBuilt(ctx context.Context, q string, args []any) (*sql.Rows, error) {
	if err := t.ensureBegun(ctx); err != nil {
		return nil, err
	}
	if err := t.flushHeld(ctx); err != nil {
		return nil, err
	}
	if t.s.stmts != nil {
		db := t.db()
		if st := t.s.stmts.get(db, q); st != nil {
			t.s.work.stmts.Add(1)
			return t.bind(ctx, st).QueryContext(ctx, args...)
		}
		t.s.stmts.learn(db, q)
	}
	return t.q.QueryContext(ctx, q, args...)
}

// queryRowBuilt is queryBuilt for a single row.
func (t *tx) queryRowBuilt(ctx context.Context, q string, args []any) *sql.Row {
	// A failure here is sticky (t.err): the transaction fails at its end
	// whatever this row says.
	if t.ensureBegun(ctx) == nil {
		_ = t.flushHeld(ctx)
	}
	if t.s.stmts != nil {
		db := t.db()
		if st := t.s.stmts.get(db, q); st != nil {
			t.s.work.stmts.Add(1)
			return t.bind(ctx, st).QueryRowContext(ctx, args...)
		}
		t.s.stmts.learn(db, q)
	}
	return t.q.QueryRowContext(ctx, q, args...)
}

// ensureBegun begins a lazy t's transaction, before its first statement.
func (t *tx) ensureBegun(ctx context.Context) error {
	if !t.lazy || t.sqlTx != nil {
		return nil
	}
	var (
		sqlTx *sql.Tx
		err   error
	)
	if t.conn != nil {
		sqlTx, err = t.conn.BeginTx(ctx, pgWriteTx)
	} else {
		sqlTx, err = t.s.db.BeginTx(ctx, pgWriteTx)
	}
	if err != nil {
		return t.fail(t.s.d.translate(fmt.Errorf("begin: %w", err), nil))
	}
	t.sqlTx = sqlTx
	t.use(sqlTx)
	return nil
}

func (t *tx) db() *sql.DB {
	if t.write {
		return t.s.db
	}
	return t.s.rdb
}

// fail records the first error of the transaction.
func (t *tx) fail(err error) error {
	if t.err == nil {
		t.err = err
	}
	return err
}

func (t *tx) check() error {
	if t.err != nil {
		return errAborted(t.err)
	}
	return nil
}

func (t *tx) writable() error {
	if !t.write {
		return eim.Errorf(eim.EINTERNAL, "write in a read-only transaction")
	}
	return nil
}

// Get returns the resource of kind k with the id, or ENOTFOUND.
func (t *tx) Get(ctx context.Context, k eim.Kind, id string) (eim.Resource, error) {
	c, err := t.codec(k)
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	if r, ok, err := t.cached(c, k, id); ok || err != nil {
		return r, err
	}
	var rows *sql.Rows
	if t.project != "" {
		rows, err = t.query(ctx, c.getScoped, id, t.project)
	} else {
		rows, err = t.query(ctx, c.get, id)
	}
	if err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("get %s: %w", k, err), nil))
	}
	items, err := t.scanAll(c, rows, k)
	if err != nil {
		return nil, err
	}
	t.share(k, items)
	if len(items) == 0 {
		return nil, eim.Errorf(eim.ENOTFOUND, "%s %s not found", k, id)
	}
	return items[0], nil
}

// GetMany returns the resources of kind k with the ids that exist.
func (t *tx) GetMany(ctx context.Context, k eim.Kind, ids []string) ([]eim.Resource, error) {
	c, err := t.codec(k)
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, nil
	case 1:
		// The common case when expanding one resource: the prepared
		// single-row statement, rather than an IN list SQLite parses anew.
		r, err := t.Get(ctx, k, ids[0])
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []eim.Resource{r}, nil
	}
	var out []eim.Resource
	if cachedKinds[k] && t.refs != nil {
		var missing []string
		for _, id := range ids {
			r, ok, err := t.cached(c, k, id)
			switch {
			case err != nil:
				return nil, err
			case ok:
				out = append(out, r)
			default:
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return out, nil
		}
		ids = missing
	}
	a := &args{pg: t.s.d.pg}
	where := t.s.d.inList(c.table+".id", a.add(t.s.d.listArg(ids)))
	if t.project != "" {
		where += " AND " + c.table + ".project = " + a.add(t.project)
	}
	rows, err := t.queryBuilt(ctx, "SELECT "+c.selectList+" FROM "+c.table+" WHERE "+where, a.list)
	if err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("get %s: %w", k, err), nil))
	}
	items, err := t.scanAll(c, rows, k)
	if err != nil {
		return nil, err
	}
	t.share(k, items)
	return append(out, items...), nil
}

// scanAll decodes rows of c; rows of a cached kind (keep, when not "") are
// kept for the transaction's later reads.
func (t *tx) scanAll(c *codec, rows *sql.Rows, keep eim.Kind) ([]eim.Resource, error) {
	defer rows.Close()
	sc := c.newScanner()
	var out []eim.Resource
	for rows.Next() {
		if err := rows.Scan(sc.dest...); err != nil {
			return nil, t.fail(fmt.Errorf("scan %s: %w", c.table, err))
		}
		r, err := sc.decode()
		if err != nil {
			return nil, t.fail(err)
		}
		if keep != "" {
			t.keep(keep, r.Base().ResourceID, sc)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read %s: %w", c.table, err), nil))
	}
	return out, nil
}

// Create stores a new resource, generating its ID when empty.
func (t *tx) Create(ctx context.Context, r eim.Resource) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := r.ResourceKind()
	c, err := t.codec(k)
	if err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	m := r.Base()
	switch {
	case t.project != "":
		if m.Project != "" && m.Project != t.project {
			return eim.Errorf(eim.EINVALID, "project: %q is not the transaction's project", m.Project)
		}
		m.Project = t.project
	case m.Project == "":
		return eim.Errorf(eim.EINVALID, "project: required outside a project-scoped transaction")
	}
	generated := m.ResourceID == ""
	if !generated {
		if err := eim.CheckID(k, "resourceId", m.ResourceID); err != nil {
			return err
		}
	}
	now := eim.NewTime(t.s.now())
	m.Timestamps.CreatedAt, m.Timestamps.UpdatedAt = now, now
	if t.group {
		if generated {
			m.ResourceID = eim.NewID(k)
		}
		vals, err := values(r, c.cols)
		if err != nil {
			if generated {
				m.ResourceID = ""
			}
			return err
		}
		t.held = append(t.held, heldCreate{c: c, r: r, vals: vals, generated: generated})
		t.addEvent(m.Project, k, m.ResourceID, eim.OpCreated)
		t.addCreateAudit(ctx, c, m.Project, m.ResourceID, r, vals)
		return nil
	}
	var vals []any
	for attempt := 0; ; attempt++ {
		if generated {
			m.ResourceID = eim.NewID(k)
		}
		vals, err = values(r, c.cols)
		if err != nil {
			return err
		}
		res, err := t.exec(ctx, c.insert, vals...)
		if err != nil {
			if generated {
				m.ResourceID = ""
			}
			return t.fail(t.writeError(ctx, c, r, fmt.Errorf("create %s: %w", k, err)))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return t.fail(fmt.Errorf("create %s: %w", k, err))
		}
		if n == 1 {
			break
		}
		if !generated {
			return eim.Errorf(eim.ECONFLICT, "resourceId: %s %s already exists", k, m.ResourceID)
		}
		if attempt+1 == maxIDAttempts {
			m.ResourceID = ""
			return eim.Errorf(eim.EUNAVAILABLE, "could not generate a free %s ID", k)
		}
	}
	t.addEvent(m.Project, k, m.ResourceID, eim.OpCreated)
	t.addCreateAudit(ctx, c, m.Project, m.ResourceID, r, vals)
	return nil
}

// Update replaces every stored field of an existing resource.
func (t *tx) Update(ctx context.Context, r eim.Resource) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := r.ResourceKind()
	c, err := t.codec(k)
	if err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	m := r.Base()
	t.forget(k, m.ResourceID, false)
	var old eim.Resource
	if audited(k) {
		if old, err = t.current(ctx, c, m.ResourceID); err != nil {
			return err
		}
	}
	vals, err := values(r, c.updCols)
	if err != nil {
		return err
	}
	now := eim.NewTime(t.s.now()).UnixMilli()
	vals = append(vals, now, now)
	// The write names the version it replaces (a row never read has none,
	// and is written as is): a change committed since the row was read —
	// on PostgreSQL by a concurrent writer (writes run at READ COMMITTED,
	// see pgWriteTx), on either engine by another process before a cached
	// kind's row was read from the refCache — fails it, and the
	// transaction runs again on the row as it is now.
	prev := m.Timestamps.UpdatedAt
	guarded := !prev.IsZero()
	q := c.update
	vals = append(vals, m.ResourceID)
	if t.project != "" {
		q = c.updateScoped
		vals = append(vals, t.project)
	}
	if guarded {
		q = c.updateIf
		if t.project != "" {
			q = c.updateIfScoped
		}
		vals = append(vals, prev.UnixMilli())
	}
	rows, err := t.query(ctx, q, vals...)
	if err != nil {
		return t.fail(t.writeError(ctx, c, r, fmt.Errorf("update %s: %w", k, err)))
	}
	if err := t.updated(ctx, c, r, rows, guarded); err != nil {
		return err
	}
	if old != nil {
		t.addAudit(ctx, m.Project, k, m.ResourceID, eim.OpUpdated, diffChanges(c.updCols, old, r))
	}
	return nil
}

// updated reads what an UPDATE of r returned (updateReturning): r's
// project and timestamps as stored, and its event; or, when no row was
// written, ENOTFOUND, or errRaced when the row exists but its version or
// the conditions did not match (guarded).
func (t *tx) updated(ctx context.Context, c *codec, r eim.Resource, rows *sql.Rows, guarded bool) error {
	return t.updatedWith(ctx, c, r, rows, guarded, nil)
}

// updatedWith is updated for an UPDATE that returns extra columns after
// updateReturning's, scanned into extra.
func (t *tx) updatedWith(ctx context.Context, c *codec, r eim.Resource, rows *sql.Rows, guarded bool, extra []any) error {
	m := r.Base()
	var (
		project          string
		created, updated int64
		found            bool
		err              error
	)
	dest := append([]any{&project, &created, &updated}, extra...)
	for rows.Next() {
		found = true
		err = rows.Scan(dest...)
	}
	if err == nil {
		err = rows.Err()
	}
	rows.Close()
	if err != nil {
		return t.fail(t.writeError(ctx, c, r, fmt.Errorf("update %s: %w", c.kind, err)))
	}
	if !found {
		if guarded && t.exists(ctx, c.existsQuery(t.project), existsArgs(m.ResourceID, t.project)...) {
			// Changed since it was read: the transaction runs again
			// (runTx), reading the row afresh.
			if cachedKinds[c.kind] {
				t.s.refs.clearAll()
			}
			return t.fail(errRaced)
		}
		return eim.Errorf(eim.ENOTFOUND, "%s %s not found", c.kind, m.ResourceID)
	}
	m.Project = project
	if created != 0 {
		m.Timestamps.CreatedAt = eim.TimeFromUnixMilli(created)
	}
	m.Timestamps.UpdatedAt = eim.TimeFromUnixMilli(updated)
	t.addEvent(project, c.kind, m.ResourceID, eim.OpUpdated)
	return nil
}

// Delete removes a resource. Resources whose reference to it cascades
// (schedules targeting a host) go first, each with its own event.
func (t *tx) Delete(ctx context.Context, k eim.Kind, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	c, err := t.codec(k)
	if err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	t.forget(k, id, true)
	for _, ref := range c.referrers {
		if ref.cascade {
			if err := t.deleteReferrers(ctx, ref, id); err != nil {
				return err
			}
		}
	}
	q, vals := c.del, []any{id}
	if t.project != "" {
		q, vals = c.delScoped, append(vals, t.project)
	}
	rows, err := t.query(ctx, q, vals...)
	if err != nil {
		return t.fail(t.deleteError(ctx, c, id, fmt.Errorf("delete %s: %w", k, err)))
	}
	var project string
	found := false
	for rows.Next() {
		found = true
		err = rows.Scan(&project)
	}
	if err == nil {
		err = rows.Err()
	}
	rows.Close()
	if err != nil {
		return t.fail(t.deleteError(ctx, c, id, fmt.Errorf("delete %s: %w", k, err)))
	}
	if !found {
		return eim.Errorf(eim.ENOTFOUND, "%s %s not found", k, id)
	}
	t.addEvent(project, k, id, eim.OpDeleted)
	t.addAudit(ctx, project, k, id, eim.OpDeleted, nil)
	return nil
}

func (t *tx) deleteReferrers(ctx context.Context, ref *referrer, id string) error {
	q := "DELETE FROM " + ref.table + " WHERE " + ref.column.name + " = ?"
	vals := []any{id}
	if t.project != "" {
		q += " AND project = ?"
		vals = append(vals, t.project)
	}
	rows, err := t.query(ctx, q+" RETURNING project, id", vals...)
	if err != nil {
		return t.fail(t.s.d.translate(fmt.Errorf("delete %s referring to %s: %w", ref.kind, id, err), nil))
	}
	defer rows.Close()
	for rows.Next() {
		var project, rid string
		if err := rows.Scan(&project, &rid); err != nil {
			return t.fail(err)
		}
		t.addEvent(project, ref.kind, rid, eim.OpDeleted)
		t.addAudit(ctx, project, ref.kind, rid, eim.OpDeleted, nil)
	}
	if err := rows.Err(); err != nil {
		return t.fail(t.s.d.translate(fmt.Errorf("delete %s referring to %s: %w", ref.kind, id, err), nil))
	}
	return nil
}

// writeError translates a failed INSERT or UPDATE. A foreign-key failure
// names the reference that points nowhere (PostgreSQL says which; SQLite
// does not, so the references are checked — its transaction is still
// usable after a failed statement).
func (t *tx) writeError(ctx context.Context, c *codec, r eim.Resource, err error) error {
	e, ok := t.s.d.classify(err)
	if !ok || !e.foreignKey {
		return t.s.d.translate(err, r)
	}
	project := r.Base().Project
	for _, col := range c.cols {
		if col.kind != colEdge && col.name != "project" {
			continue
		}
		v := col.field.Value(r).String()
		if v == "" {
			continue
		}
		if e.constraint != "" && e.constraint != c.table+"_"+col.name+"_fkey" && !(col.name == "project" && e.constraint == c.table+"_project_fkey") {
			continue
		}
		if col.name == "project" {
			if e.constraint != "" || !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", v) {
				return eim.Errorf(eim.ENOTFOUND, "project %s not found", v)
			}
			continue
		}
		target := codecOf(col.field.Edge.Kind)
		if e.constraint != "" || !t.exists(ctx, "SELECT 1 FROM "+target.table+" WHERE id = ? AND project = ?", v, project) {
			return eim.Errorf(eim.EINVALID, "%s: %s %s does not exist", col.field.Name, target.kind, v)
		}
	}
	return eim.Errorf(eim.EINVALID, "%s: a referenced resource does not exist", c.kind)
}

// deleteError translates a failed DELETE: a resource still referenced by
// another is EPRECONDITION naming one referrer.
func (t *tx) deleteError(ctx context.Context, c *codec, id string, err error) error {
	e, ok := t.s.d.classify(err)
	if !ok || !e.foreignKey {
		return t.s.d.translate(err, nil)
	}
	for _, ref := range c.referrers {
		if e.constraint != "" && e.constraint != ref.table+"_"+ref.column.name+"_fkey" {
			continue
		}
		if e.constraint != "" {
			return eim.Errorf(eim.EPRECONDITION, "%s %s is still referenced by a %s (%s)", c.kind, id, ref.kind, ref.column.field.Name)
		}
		var rid string
		q := "SELECT id FROM " + ref.table + " WHERE " + ref.column.name + " = ? LIMIT 1"
		if qerr := t.q.QueryRowContext(ctx, q, id).Scan(&rid); qerr == nil {
			return eim.Errorf(eim.EPRECONDITION, "%s %s is still referenced by %s (%s)", c.kind, id, rid, ref.column.field.Name)
		}
	}
	return eim.Errorf(eim.EPRECONDITION, "%s %s is still referenced by other resources", c.kind, id)
}

// existsQuery selects 1 when the row with an id (and, for a scoped
// transaction, the project) exists.
func (c *codec) existsQuery(project string) string {
	if project != "" {
		return "SELECT 1 FROM " + c.table + " WHERE id = ? AND project = ?"
	}
	return "SELECT 1 FROM " + c.table + " WHERE id = ?"
}

func existsArgs(id, project string) []any {
	if project != "" {
		return []any{id, project}
	}
	return []any{id}
}

func (t *tx) exists(ctx context.Context, q string, args ...any) bool {
	var one int
	err := t.q.QueryRowContext(ctx, t.s.d.rebind(q), args...).Scan(&one)
	return !errors.Is(err, sql.ErrNoRows) && err == nil
}

// countInserted adds the rows an INSERT added (or, for an upsert, wrote)
// to t.inserted, for a table whose growth the events do not tell.
func (t *tx) countInserted(q string, res sql.Result) {
	table, ok := insertTable(q)
	if !ok || eventTables()[table] {
		return
	}
	n, err := res.RowsAffected()
	if err != nil || n <= 0 {
		return
	}
	if t.inserted == nil {
		t.inserted = map[string]int64{}
	}
	t.inserted[table] += n
}
