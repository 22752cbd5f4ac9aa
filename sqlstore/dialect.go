package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between the engines. Everything else is shared.
type dialect struct {
	name   string
	pg     bool
	filter filter.Dialect
}

var (
	sqliteDialect   = &dialect{name: "sqlite", filter: filter.SQLite}
	postgresDialect = &dialect{name: "postgres", pg: true, filter: filter.Postgres}
)

// rebind turns the "?" placeholders of a statement written for SQLite into
// PostgreSQL's "$N". Our statements contain no other question marks.
func (d *dialect) rebind(q string) string {
	if !d.pg {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// inList returns a predicate "col IN (the values)" with a single parameter,
// so the statement text does not depend on the number of values.
func (d *dialect) inList(col, placeholder string) string {
	if d.pg {
		return col + " = ANY(" + placeholder + "::text[])"
	}
	return col + " IN (SELECT value FROM json_each(" + placeholder + "))"
}

// listArg encodes the value bound to an inList placeholder.
func (d *dialect) listArg(vs []string) any {
	if d.pg {
		return vs
	}
	return jsonText(vs)
}

// args collects statement arguments and renders their placeholders.
type args struct {
	pg   bool
	list []any
}

func (a *args) add(v any) string {
	a.list = append(a.list, v)
	if a.pg {
		return "$" + strconv.Itoa(len(a.list))
	}
	return "?"
}

// stmtCache keeps prepared statements for SQLite, where preparing costs
// more than running most statements (a select of a wide table's columns is
// mostly parsing, and the parser's allocations contend on one lock across
// connections); pgx caches prepared statements per connection itself.
//
// The fixed statements are prepared at Open. Built statements (lists,
// lookups, counts: their values are always parameters, so their texts are
// few) are learnt: the first run of a text is unprepared and prepares it on
// the side, outside any transaction, since a transaction holding the
// single write connection cannot prepare on the pool without waiting for
// itself; later runs use it. Reads of the cache take no lock.
type stmtCache struct {
	stmts atomic.Pointer[map[stmtKey]*sql.Stmt] // replaced whole, never changed

	mu      sync.Mutex // serializes changes of stmts and pending
	pending map[stmtKey]bool
	learnt  int
	// seen counts the sightings of texts not learnt yet (see learn), so
	// that a text built once (an IN list of a rare length) does not take
	// one of the maxLearnt places; cleared when it grows past maxSeen.
	seen map[stmtKey]int

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // learning goroutines
}

type stmtKey struct {
	db *sql.DB
	q  string
}

// maxLearnt bounds the statements learnt per store: beyond it, new texts
// run unprepared. A text is learnt at its learnAfter-th sighting, and at
// most maxSeen texts are counted at once.
const (
	maxLearnt  = 512
	learnAfter = 3
	maxSeen    = 4096
)

func newStmtCache() *stmtCache {
	c := &stmtCache{pending: map[stmtKey]bool{}, seen: map[stmtKey]int{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.stmts.Store(&map[stmtKey]*sql.Stmt{})
	return c
}

// add stores st under k; c.mu must be held.
func (c *stmtCache) add(k stmtKey, st *sql.Stmt) {
	old := *c.stmts.Load()
	m := make(map[stmtKey]*sql.Stmt, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = st
	c.stmts.Store(&m)
}

// prepare adds the statements for db.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, qs []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range qs {
		k := stmtKey{db, q}
		if (*c.stmts.Load())[k] != nil {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		c.add(k, st)
	}
	return nil
}

func (c *stmtCache) get(db *sql.DB, q string) *sql.Stmt { return (*c.stmts.Load())[stmtKey{db, q}] }

// learn prepares q for db in the background, unless it is known, being
// prepared, or the cache is full.
func (c *stmtCache) learn(db *sql.DB, q string) {
	k := stmtKey{db, q}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil || c.pending[k] || c.learnt >= maxLearnt || (*c.stmts.Load())[k] != nil {
		return
	}
	if n := c.seen[k] + 1; n < learnAfter {
		if len(c.seen) >= maxSeen {
			clear(c.seen)
		}
		c.seen[k] = n
		return
	}
	delete(c.seen, k)
	c.pending[k] = true
	c.learnt++ // a text that fails to prepare is not tried again
	c.wg.Go(func() {
		st, err := db.PrepareContext(c.ctx, q)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.pending, k)
		if err != nil {
			return
		}
		if c.ctx.Err() != nil {
			st.Close()
			return
		}
		c.add(k, st)
	})
}

// close stops learning and closes the statements.
func (c *stmtCache) close() {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range *c.stmts.Load() {
		st.Close()
	}
	c.stmts.Store(&map[stmtKey]*sql.Stmt{})
}

// preparedWrites and preparedReads are the statements worth preparing.
func preparedWrites() []string {
	qs := []string{revisionUpdate, eventInsert1, auditSeqTake}
	for _, k := range eim.Kinds() {
		c := codecOf(k)
		qs = append(qs, c.insert, c.update, c.updateScoped, c.updateIf, c.updateIfScoped, c.del, c.delScoped, c.get, c.getScoped)
	}
	return qs
}

func preparedReads() []string {
	var qs []string
	for _, k := range eim.Kinds() {
		c := codecOf(k)
		qs = append(qs, c.get, c.getScoped)
	}
	return qs
}

// dbError is what the engines tell about a failed statement, reduced to
// what the store translates.
type dbError struct {
	unique, foreignKey, notNull bool
	constraint                  string // PostgreSQL: the constraint or index name
	table, detail               string
	columns                     []string // SQLite: "t.a, t.b" of a unique failure
}

func (d *dialect) classify(err error) (dbError, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		e := dbError{constraint: pe.ConstraintName, table: pe.TableName, detail: pe.Detail}
		switch pe.Code {
		case "23505":
			e.unique = true
		case "23503":
			e.foreignKey = true
		case "23502":
			e.notNull = true
		default:
			return e, false
		}
		return e, true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		var e dbError
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			e.unique = true
			// "UNIQUE constraint failed: hosts.project, hosts.serial_number",
			// or for an index on an expression "…: index 'hosts_uuid_key'".
			if _, cols, ok := strings.Cut(se.Error(), "constraint failed: index '"); ok {
				e.constraint, _, _ = strings.Cut(cols, "'")
			} else if _, cols, ok := strings.Cut(se.Error(), "constraint failed: "); ok {
				for c := range strings.SplitSeq(cols, ",") {
					c = strings.TrimSpace(c)
					if t, col, ok := strings.Cut(c, "."); ok {
						e.table = t
						e.columns = append(e.columns, strings.Fields(col)[0])
					}
				}
			}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			e.foreignKey = true
		case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
			// ON DELETE RESTRICT reports through a trigger code.
			if !strings.Contains(se.Error(), "FOREIGN KEY") {
				return e, false
			}
			e.foreignKey = true
		case sqlite3.SQLITE_CONSTRAINT_NOTNULL:
			e.notNull = true
		default:
			return e, false
		}
		return e, true
	}
	return dbError{}, false
}

// translate turns engine errors into *eim.Error where they have a meaning
// for callers; r, when known, names the value in conflict messages.
func (d *dialect) translate(err error, r eim.Resource) error {
	if err == nil {
		return nil
	}
	var ee *eim.Error
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isRace(err) {
		return errRaced
	}
	if isBusy(err) {
		return eim.Errorf(eim.EUNAVAILABLE, "the database is busy, try again")
	}
	if isUnreachable(err) {
		return unreachable(err)
	}
	e, ok := d.classify(err)
	if !ok {
		return err
	}
	switch {
	case e.unique:
		return conflictError(e, r)
	case e.notNull:
		return eim.Errorf(eim.EINVALID, "a required value is missing (%s)", e.detail)
	}
	return err // foreign keys are translated by the caller, who knows the row
}

// errRaced is the error of a write that lost a race with another
// transaction: the row it writes changed since it was read (tx.Update,
// tx.UpdateFieldsIf), or PostgreSQL reported a serialization failure or a
// deadlock. runTx runs the transaction again; callers see it only when it
// kept losing.
var errRaced = &eim.Error{Code: eim.EUNAVAILABLE, Message: "the write conflicted with concurrent writes of the same data; try again"}

func isRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "55P03"
	}
	return false
}

// errUnreachable is the user-facing face of a database that cannot be
// reached or went away mid-statement: a restart, a failover, a dropped
// connection, a full disk. Callers answer it as retryable (503,
// Unavailable) and the process goes on; database/sql reconnects on the
// next use.
var errUnreachable = &eim.Error{Code: eim.EUNAVAILABLE, Message: "the database is unavailable; try again"}

// unreachable marks err, a connection-level failure, as errUnreachable
// while keeping its cause in the chain for the logs.
func unreachable(err error) error {
	if errors.Is(err, errUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", errUnreachable, err)
}

// isUnreachable reports whether err is the database being away rather
// than a statement's fault: the connection refused, reset or closed
// under the statement, the server shutting down or refusing connections,
// or out of disk. Such errors are transient from a caller's view: the
// same call can succeed once the database is back.
func isUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", // admin_shutdown: the server is stopping
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: starting up or shutting down
			"53300", // too_many_connections
			"53100": // disk_full
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception class
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.As(err, &ne)
}

// conflictError names the field and value of a uniqueness violation. Unique
// indexes are named <table>_<column>_key (the primary key <table>_pkey).
func conflictError(e dbError, r eim.Resource) error {
	col := ""
	switch {
	case len(e.columns) > 0:
		for _, c := range e.columns {
			if c != "project" {
				col = c
			}
		}
	case strings.HasSuffix(e.constraint, "_pkey"):
		col = "id"
	case strings.HasSuffix(e.constraint, "_key") && e.table != "":
		col = strings.TrimSuffix(strings.TrimPrefix(e.constraint, e.table+"_"), "_key")
	}
	if col == "" && r != nil && strings.HasSuffix(e.constraint, "_key") {
		// An index on an expression (SQLite names no table): the resource's.
		t := codecOf(r.ResourceKind()).table
		col = strings.TrimSuffix(strings.TrimPrefix(e.constraint, t+"_"), "_key")
	}
	if r == nil {
		if col == "" {
			return eim.Errorf(eim.ECONFLICT, "already exists")
		}
		return eim.Errorf(eim.ECONFLICT, "%s: already exists", col)
	}
	c := codecOf(r.ResourceKind())
	if f := c.byColumn[col]; f != nil {
		return eim.Errorf(eim.ECONFLICT, "%s: %s %v already exists", f.field.Name, r.ResourceKind(), f.field.Value(r).Interface())
	}
	return eim.Errorf(eim.ECONFLICT, "%s: a %s with this value already exists", col, r.ResourceKind())
}

// errAborted is returned by every statement after one failed.
func errAborted(cause error) error {
	return fmt.Errorf("transaction aborted by an earlier error: %w", cause)
}
