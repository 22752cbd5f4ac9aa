// Package sqlstore implements eim.Store on SQLite (modernc.org/sqlite, pure
// Go) and PostgreSQL (pgx through database/sql): one implementation with a
// small dialect shim, embedded versioned migrations per engine, a durable
// change feed committed in revision order, and tenant isolation enforced by
// a project predicate on every statement and, on PostgreSQL, also by
// row-level security.
//
// Storage conventions (shared with package filter): one table per kind named
// Schema.Table, one column per stored field named Field.Column, `id` primary
// key, `project` tenant column; strings and enums TEXT (” when empty),
// references NULL when absent, integers BIGINT, booleans BOOLEAN (PostgreSQL)
// or INTEGER 0/1 (SQLite), eim.Time as unix milliseconds, other slices and
// structs as JSON (JSONB on PostgreSQL).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"
	_ "modernc.org/sqlite"           // registers driver "sqlite"
)

// Options configure a Store. Zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// MaxConns bounds PostgreSQL connections: the store's two pools share
	// it evenly (unscoped work, and project-scoped work under the tenant
	// role), and one more connection listens for the feed's
	// notifications. Default DefaultMaxConns; at least 2. Every process
	// of a scaled-out deployment opens its own, within the server's
	// max_connections (100 by default). SQLite ignores it.
	MaxConns int
	// Metrics, when set, gets the transactions' series
	// (eim_store_transaction_*).
	Metrics prometheus.Registerer
}

// DefaultMaxConns is the default of Options.MaxConns: three server
// processes fit PostgreSQL's default max_connections.
const DefaultMaxConns = 32

// Store is an eim.Store on SQLite or PostgreSQL.
type Store struct {
	d   *dialect
	db  *sql.DB // writes (SQLite: one connection); PostgreSQL: unscoped work
	rdb *sql.DB // reads (SQLite: a pool of read-only connections)
	// tdb is PostgreSQL's pool for project-scoped work. Its connections keep
	// the tenant role and their project as session settings (see scope), so
	// a scoped read is one round trip, not four (BEGIN, scope, query,
	// COMMIT). Nothing else uses it: the unscoped pool never carries a scope.
	tdb *sql.DB
	dsn string

	log *slog.Logger
	now func() time.Time

	stmts    *stmtCache // SQLite only: prepared statements (pgx caches its own)
	wake     *hub
	tail     *tail         // the feed's newest events, shared by the watchers
	growth   *growth       // PostgreSQL only: triggers VACUUM (ANALYZE) as tables grow
	seq      *sequencer    // PostgreSQL only: numbers the change feed's events
	counts   *countCache   // list totals by revision
	covered  sync.Map      // SQLite: count statement → whether an index alone answers it
	projects *projectCache // FindProject's answers
	refs     *refCache     // reference rows (sites, regions…) across transactions
	groups   groupInserts  // PostgreSQL: the grouped INSERT of each table
	raced    atomic.Int64  // transactions run again after losing a race (see runTx)
	work     workCounts    // transactions and statements run (Work)
	metrics  *txMetrics

	// committed are called after every commit that recorded events (see
	// OnCommit); copy on write.
	hooksMu   sync.Mutex
	committed atomic.Pointer[[]func([]eim.Event)]

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closed    chan struct{}
}

var _ eim.Store = (*Store)(nil)

// Open opens (and migrates) a store. dsn: "postgres://…" or "postgresql://…"
// for PostgreSQL; anything else is a SQLite file path (or "sqlite:PATH";
// ":memory:" for a private in-memory database).
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s := &Store{log: opts.Logger, now: opts.Now, wake: newHub(), tail: newTail(), closed: make(chan struct{}), dsn: dsn, counts: newCountCache(), projects: newProjectCache(), refs: newRefCache(),
		metrics: newTxMetrics(opts.Metrics)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	var err error
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		err = s.openPostgres(dsn, opts.MaxConns)
	} else {
		err = s.openSQLite(strings.TrimPrefix(dsn, "sqlite:"))
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if s.stmts != nil {
		err := s.stmts.prepare(ctx, s.db, preparedWrites())
		if err == nil {
			err = s.stmts.prepare(ctx, s.rdb, preparedReads())
		}
		if err != nil {
			s.closeDBs()
			return nil, err
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { s.followRefs(lctx) })
	if s.d.pg {
		s.growth = newGrowth()
		s.seq = newSequencer()
		s.wg.Go(func() { s.listen(lctx) })
		s.wg.Go(func() { s.sequenceLoop(lctx) })
		s.wg.Go(func() { s.analyzeLoop(lctx) })
	} else {
		s.wg.Go(func() { s.optimizeLoop(lctx) })
	}
	return s, nil
}

func (s *Store) openPostgres(dsn string, maxConns int) error {
	s.d = postgresDialect
	if maxConns == 0 {
		maxConns = DefaultMaxConns
	}
	if maxConns < 2 {
		return eim.Errorf(eim.EINVALID, "at least 2 database connections are needed (one per pool), not %d", maxConns)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	unscoped := maxConns / 2
	db.SetMaxOpenConns(unscoped)
	db.SetMaxIdleConns(unscoped)
	db.SetConnMaxIdleTime(5 * time.Minute)
	tdb, err := sql.Open("pgx", dsn)
	if err != nil {
		db.Close()
		return fmt.Errorf("open postgres: %w", err)
	}
	tdb.SetMaxOpenConns(maxConns - unscoped)
	tdb.SetMaxIdleConns(maxConns - unscoped)
	tdb.SetConnMaxIdleTime(5 * time.Minute)
	s.db, s.rdb, s.tdb = db, db, tdb
	return nil
}

// openSQLite opens one write connection (SQLite has one writer: writers
// queue in database/sql instead of failing with SQLITE_BUSY) and a pool of
// read-only connections (WAL lets them read while the writer writes).
func (s *Store) openSQLite(path string) error {
	s.d = sqliteDialect
	s.stmts = newStmtCache()
	pragmas := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32000)&_pragma=mmap_size(268435456)"
	if path == ":memory:" {
		// A private in-memory database exists once per connection: use a
		// single connection for everything.
		db, err := sql.Open("sqlite", "file::memory:?"+pragmas+"&_txlock=immediate")
		if err != nil {
			return fmt.Errorf("open sqlite: %w", err)
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
		s.db, s.rdb = db, db
		return nil
	}
	u := "file:" + (&url.URL{Path: path}).EscapedPath() + "?"
	wdb, err := sql.Open("sqlite", u+pragmas+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	// Create the file and switch it to WAL before the readers open it.
	if err := wdb.Ping(); err != nil {
		wdb.Close()
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", u+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return fmt.Errorf("open sqlite: %w", err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s.db, s.rdb = wdb, rdb
	return nil
}

// Close stops the store's goroutines and closes its connections. Watchers
// end with an EUNAVAILABLE error.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		if !s.d.pg {
			s.optimize(context.Background())
		}
		err = s.closeDBs()
	})
	return err
}

func (s *Store) closeDBs() error {
	if s.stmts != nil {
		s.stmts.close()
	}
	err := s.db.Close()
	if s.rdb != s.db {
		err = errors.Join(err, s.rdb.Close())
	}
	if s.tdb != nil {
		err = errors.Join(err, s.tdb.Close())
	}
	return err
}

// Capabilities implements eim.Store: PostgreSQL takes concurrent writers,
// groups creates and serves replicas; SQLite has one writer, in one
// process, and a statement is a function call, not a round trip.
func (s *Store) Capabilities() eim.Capabilities {
	return eim.Capabilities{ConcurrentWriters: s.d.pg, GroupedCreates: s.d.pg, Replicas: s.d.pg}
}

// View runs fn in a read-only transaction scoped to project ("" = all).
func (s *Store) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return s.run(ctx, project, false, fn)
}

// Update runs fn in a read-write transaction scoped to project ("" = all);
// it commits when fn returns nil.
func (s *Store) Update(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return s.run(ctx, project, true, fn)
}

func (s *Store) run(ctx context.Context, project string, write bool, fn func(eim.Tx) error) error {
	sequenced, err := s.runTx(ctx, project, write, false, fn)
	if err != nil {
		return err
	}
	sequenced()
	return nil
}

// runTx runs fn in a transaction and commits it. On PostgreSQL the events
// it committed are in the feed once the returned function has returned
// (it waits for a sequencer round); group also holds the creates back (see
// UpdateGrouped).
//
// A write that lost a race (errRaced: a row it read was changed by
// another transaction before it wrote the whole row back, a condition it
// wrote under no longer held, or PostgreSQL found a deadlock) is not
// written: fn is run again in a new transaction, after a short random
// pause, up to maxRuns times in all.
//
// A read that failed because the database went away (a dropped pooled
// connection after a restart, say) is run again, up to readRetries times
// after a short pause: it changed nothing. A write is not, since its
// commit may have happened; its caller hears "unavailable" and may retry.
func (s *Store) runTx(ctx context.Context, project string, write, group bool, fn func(eim.Tx) error) (sequenced func(), err error) {
	m := s.metrics.of(write)
	start := time.Now()
	defer func() {
		m.duration.Observe(time.Since(start).Seconds())
		if err != nil && ctx.Err() == nil && eim.ErrorCode(err) == eim.EUNAVAILABLE {
			m.unavailable.Inc()
		}
	}()
	reads := 0
	for run := 1; ; run++ {
		sequenced, err = s.runTxOnce(ctx, project, write, group, fn)
		if err != nil && ctx.Err() == nil && isUnreachable(err) {
			err = unreachable(err)
			if !write && reads < len(readRetries) {
				pause := readRetries[reads]
				reads++
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(pause):
				}
				run--
				m.retryUnreachable.Inc()
				continue
			}
		}
		if !errors.Is(err, errRaced) {
			return sequenced, err
		}
		m.conflicts.Inc()
		if run == maxRuns {
			s.log.Warn("a write transaction lost a race with concurrent writers each time it ran; given up", "runs", run)
			return nil, err
		}
		s.raced.Add(1)
		m.retryConflict.Inc()
		s.log.Debug("a write transaction lost a race with a concurrent writer; running it again", "run", run)
		// Jittered and growing, so that the writers that raced do not meet
		// again at once: up to 2, 4, 8… ms.
		pause := time.Duration(rand.Int64N(int64(time.Millisecond) << run))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// Races returns how many times a write transaction was run again because
// another transaction had changed a row it was writing.
func (s *Store) Races() int64 { return s.raced.Load() }

// workCounts count what the store asked of its database.
type workCounts struct{ txs, stmts atomic.Int64 }

// Work returns how many transactions the store has run (each run of one
// that lost a race counts) and how many statements they ran: a
// benchmark's measure of what an operation costs the database, which,
// unlike its time, does not move with the machine's load.
func (s *Store) Work() (transactions, statements int64) {
	return s.work.txs.Load(), s.work.stmts.Load()
}

// readRetries are the pauses before a read that found the database away
// runs again: enough to ride out a pool of connections broken by a
// restart, short enough that a real outage is answered "unavailable"
// within a fraction of a second.
var readRetries = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond}

// maxRuns is how many times runTx runs a transaction that keeps losing
// its rows to concurrent writers before it gives up with errRaced.
const maxRuns = 8

func (s *Store) runTxOnce(ctx context.Context, project string, write, group bool, fn func(eim.Tx) error) (sequenced func(), err error) {
	group = group && s.d.pg
	s.work.txs.Add(1)
	t, err := s.begin(ctx, project, write, group)
	if err != nil {
		return nil, err
	}
	defer t.release()
	t.group = group
	t.actor = eim.ActorOf(ctx)
	if err := fn(t); err != nil {
		if errors.Is(t.err, errRaced) || errors.Is(err, errRaced) {
			// Whatever fn made of it, the transaction lost a race.
			return nil, errRaced
		}
		return nil, err
	}
	if t.err != nil {
		// fn ignored a failed statement; PostgreSQL has aborted the
		// transaction and SQLite must not commit half of it either.
		return nil, t.err
	}
	if t.lazy && t.sqlTx == nil && len(t.held) > 0 && t.heldOneStatement() {
		// Nothing but held creates of one kind: one statement writes
		// them, their events and their audit records, atomic on its own,
		// with no BEGIN and COMMIT around it.
		if err := s.commitHeld(ctx, t); err != nil {
			return nil, err
		}
	} else {
		if err := t.flushEvents(ctx); err != nil {
			return nil, err
		}
		if err := t.flushAudit(ctx, eim.NewTime(s.now()).UnixMilli()); err != nil {
			return nil, err
		}
		if err := s.commit(t); err != nil {
			return nil, err
		}
	}
	if len(t.events) > 0 {
		for _, e := range t.events {
			if e.kind == eim.KindProject {
				s.projects.forget()
				break
			}
		}
		if hooks := s.committed.Load(); hooks != nil {
			evs := make([]eim.Event, len(t.events))
			for i, e := range t.events {
				evs[i] = eim.Event{Project: e.project, Kind: e.kind, ID: e.id, Op: e.op}
			}
			for _, fn := range *hooks {
				fn(evs)
			}
		}
		if s.d.pg {
			events, inserted := t.events, t.inserted
			return func() {
				// The data is committed whatever happens here: a failed
				// round is retried by the next writer or by sequenceLoop.
				if err := s.sequenced(ctx); err != nil {
					s.log.Warn("sequence events", "err", err)
				}
				s.growth.note(events, inserted)
			}, nil
		}
		s.wake.broadcast()
	} else if t.inserted != nil {
		s.growth.note(nil, t.inserted)
	}
	if len(t.events) == 0 && t.audited {
		// Records but no events (AppendAudit): numbered by a round too.
		return func() {
			if err := s.sequenced(ctx); err != nil {
				s.log.Warn("sequence audit records", "err", err)
			}
		}, nil
	}
	return func() {}, nil
}

// commitHeld writes t's held creates with their events and audit
// records in one statement outside a transaction (t.lazy, none begun):
// its success is the commit. The refCache is dropped around it as around
// a commit.
func (s *Store) commitHeld(ctx context.Context, t *tx) error {
	if t.private && touchesRefs(t.events) {
		s.refs.committing(t.events)
		defer s.refs.committed(t.events)
	}
	return t.flushHeldWithEvents(ctx, eim.NewTime(s.now()).UnixMilli())
}

// commit commits t. When t changed rows the refCache may keep, it drops
// them before the commit, so that no read after it takes the old row from
// the cache, and after it again, for the reads that raced it.
func (s *Store) commit(t *tx) error {
	if t.sqlTx == nil {
		return nil
	}
	if t.private && touchesRefs(t.events) {
		s.refs.committing(t.events)
		defer s.refs.committed(t.events)
	}
	if err := t.sqlTx.Commit(); err != nil {
		return s.d.translate(fmt.Errorf("commit: %w", err), nil)
	}
	return nil
}

// OnCommit implements eim.Store. The events' revisions are not assigned
// yet on PostgreSQL (see sequencer.go).
func (s *Store) OnCommit(fn func([]eim.Event)) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	var hooks []func([]eim.Event)
	if old := s.committed.Load(); old != nil {
		hooks = append(hooks, *old...)
	}
	hooks = append(hooks, fn)
	s.committed.Store(&hooks)
}

func (s *Store) begin(ctx context.Context, project string, write, lazy bool) (*tx, error) {
	// Taken before the transaction's snapshot (SQLite keeps one through a
	// transaction): a row it reads may be as old as its start.
	gen := s.refs.generation()
	t, err := s.beginEngine(ctx, project, write, lazy)
	if err != nil {
		return nil, err
	}
	t.refGen = gen
	return t, nil
}

func (s *Store) beginEngine(ctx context.Context, project string, write, lazy bool) (*tx, error) {
	if s.d.pg {
		return s.beginPostgres(ctx, project, write, lazy)
	}
	db := s.rdb
	if write {
		db = s.db
	}
	sqlTx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: !write})
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("begin: %w", err), nil)
	}
	t := &tx{s: s, sqlTx: sqlTx, project: project, write: write}
	t.use(sqlTx)
	return t, nil
}

// pgWriteTx are the options of a PostgreSQL write transaction: READ
// COMMITTED, where a statement that finds a row locked by a concurrent
// writer waits for its commit and then works on the row as that writer
// left it. (At REPEATABLE READ it would fail with a serialization failure
// instead, whichever columns the two wrote: a host module recording a
// host's status and the API renaming it would make one of them run its
// whole transaction again.) What keeps a read-modify-write from being
// lost is the store's: Tx.Update writes only over the version it read
// (updated_at), Tx.UpdateFields writes only its columns, and
// Tx.UpdateFieldsIf checks what its writer decided on, each failing with
// errRaced, which runs the transaction again, when the row moved on.
var pgWriteTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// beginPostgres starts t on PostgreSQL. Writes run in a transaction. Reads
// do not: at READ COMMITTED, PostgreSQL's level, every statement of a
// transaction takes its own snapshot anyway, so BEGIN and COMMIT would add
// two round trips and no consistency. A scoped t runs on a connection of
// the tenant pool, whose session is switched to project first if it is not
// already in it. A lazy write begins its transaction at its first
// statement (see tx.ensureBegun).
func (s *Store) beginPostgres(ctx context.Context, project string, write, lazy bool) (*tx, error) {
	t := &tx{s: s, project: project, write: write, lazy: write && lazy}
	if project == "" {
		if !write || lazy {
			t.use(s.rdb)
			return t, nil
		}
		sqlTx, err := s.db.BeginTx(ctx, pgWriteTx)
		if err != nil {
			return nil, s.d.translate(fmt.Errorf("begin: %w", err), nil)
		}
		t.sqlTx = sqlTx
		t.use(sqlTx)
		return t, nil
	}
	conn, err := s.tdb.Conn(ctx)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("begin: %w", err), nil)
	}
	if err := scope(ctx, conn, project); err != nil {
		conn.Close()
		return nil, s.d.translate(fmt.Errorf("scope connection: %w", err), nil)
	}
	t.conn = conn
	t.use(conn)
	if write && !lazy {
		sqlTx, err := conn.BeginTx(ctx, pgWriteTx)
		if err != nil {
			conn.Close()
			return nil, s.d.translate(fmt.Errorf("begin: %w", err), nil)
		}
		t.sqlTx = sqlTx
		t.use(sqlTx)
	}
	return t, nil
}

// scopeKey names, in a pgx connection's custom data, the project its
// session is scoped to.
const scopeKey = "eim.scope"

// scope puts the session of conn, a connection of the tenant pool, in
// project: row-level security then shows it that project's rows only, as
// the tenant role. The connection remembers its project, so a connection
// that served the same project last time costs nothing here.
func scope(ctx context.Context, conn *sql.Conn, project string) error {
	var data map[string]any
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		data = c.Conn().PgConn().CustomData()
		return nil
	}); err != nil {
		return err
	}
	if cur, _ := data[scopeKey].(string); cur == project {
		return nil
	}
	// Forget the old scope first: if the statement fails, the next use
	// sets the scope again rather than trusting a half-switched session.
	delete(data, scopeKey)
	if _, err := conn.ExecContext(ctx, "SELECT set_config('role', 'eim_tenant', false), set_config('eim.project', $1, false)", project); err != nil {
		return err
	}
	data[scopeKey] = project
	return nil
}

// optimizeInterval is how often SQLite refreshes its planner statistics.
const optimizeInterval = time.Hour

// optimizeLoop keeps SQLite's planner statistics current, as its authors
// recommend for long-lived connections (PostgreSQL's autovacuum does this
// there).
func (s *Store) optimizeLoop(ctx context.Context) {
	t := time.NewTicker(optimizeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.optimize(ctx)
		}
	}
}

func (s *Store) optimize(ctx context.Context) {
	if _, err := s.db.ExecContext(ctx, "PRAGMA analysis_limit = 1000; PRAGMA optimize"); err != nil {
		s.log.Warn("sqlite optimize", "err", err)
	}
	// New statistics may plan counts differently.
	s.covered.Clear()
}
