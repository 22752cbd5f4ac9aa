package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/jackc/pgx/v5"
)

// The change feed.
//
// Revisions must be committed in revision order, or a reader that has seen
// revision 8 could later miss a 7 that committed after it. A sequence does
// not give that on PostgreSQL (nextval is not transactional). On SQLite a
// write transaction collects its events in memory and, as its last
// statement before COMMIT, increments the single row of eim_revision and
// inserts its events numbered from it; there is one writer anyway. On
// PostgreSQL a writer inserts its events unnumbered and the sequencer
// numbers them after the commit (see sequencer.go).

type pendingEvent struct {
	project, id string
	kind        eim.Kind
	op          eim.Op
}

func (t *tx) addEvent(project string, k eim.Kind, id string, op eim.Op) {
	t.events = append(t.events, pendingEvent{project: project, id: id, kind: k, op: op})
	if k == eim.KindProject || cachedKinds[k] {
		t.private = true
	}
}

const (
	revisionUpdate = "UPDATE eim_revision SET revision = revision + ? WHERE id = 1 RETURNING revision"
	eventInsert1   = "INSERT INTO events (revision, project, kind, resource_id, op, at) VALUES (?, ?, ?, ?, ?, ?)"
)

// eventBatch bounds the rows of one INSERT (SQLite's parameter limit).
const eventBatch = 500

func (t *tx) flushEvents(ctx context.Context) error {
	if len(t.events) > 0 || len(t.held) > 0 {
		if err := t.ensureBegun(ctx); err != nil {
			return err
		}
	}
	at := eim.NewTime(t.s.now()).UnixMilli()
	if t.s.d.pg && len(t.held) > 0 && len(t.events) > 0 {
		return t.flushHeldWithEvents(ctx, at)
	}
	if err := t.flushHeld(ctx); err != nil {
		return err
	}
	if len(t.events) == 0 {
		return nil
	}
	if t.s.d.pg {
		return t.flushPostgres(ctx, at)
	}
	var last int64
	rows, err := t.query(ctx, revisionUpdate, len(t.events))
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
		return t.s.d.translate(fmt.Errorf("assign revisions: %w", err), nil)
	}
	rev := last - int64(len(t.events))
	for start := 0; start < len(t.events); start += eventBatch {
		batch := t.events[start:min(start+eventBatch, len(t.events))]
		q := eventInsert1 + strings.Repeat(", (?, ?, ?, ?, ?, ?)", len(batch)-1)
		vals := make([]any, 0, 6*len(batch))
		for _, e := range batch {
			rev++
			vals = append(vals, rev, e.project, string(e.kind), e.id, string(e.op), at)
		}
		if _, err := t.exec(ctx, q, vals...); err != nil {
			return t.s.d.translate(fmt.Errorf("record events: %w", err), nil)
		}
	}
	return nil
}

// flushPostgres inserts the events unnumbered, in one round trip; the
// sequencer numbers them once the transaction has committed.
func (t *tx) flushPostgres(ctx context.Context, at int64) error {
	if len(t.audits) > 0 {
		// The audit records in the same round trip (audit.go).
		args := t.eventArgs(at)
		q := "WITH ev AS (" + eventsInsertPG(1) + ")\n" + auditInsertPG(len(args)+1)
		aargs, err := t.auditArgs(at)
		if err != nil {
			return err
		}
		if _, err := t.q.ExecContext(ctx, q, append(args, aargs...)...); err != nil {
			return t.s.d.translate(fmt.Errorf("record events and audit: %w", err), nil)
		}
		t.audits, t.audited = nil, true
		return nil
	}
	if _, err := t.q.ExecContext(ctx, eventsInsertPG(1), t.eventArgs(at)...); err != nil {
		return t.s.d.translate(fmt.Errorf("record events: %w", err), nil)
	}
	return nil
}

// eventsInsertPG inserts t.eventArgs's events, its parameters numbered
// from first.
func eventsInsertPG(first int) string {
	return fmt.Sprintf(`INSERT INTO events (project, kind, resource_id, op, at)
SELECT e.project, e.kind, e.resource_id, e.op, $%d
FROM unnest($%d::text[], $%d::text[], $%d::text[], $%d::text[]) WITH ORDINALITY AS e(project, kind, resource_id, op, n)
ORDER BY e.n`, first+4, first, first+1, first+2, first+3)
}

// eventArgs are the parameters of eventsInsertPG: the events' columns as
// arrays, and their time.
func (t *tx) eventArgs(at int64) []any {
	n := len(t.events)
	projects, kinds, ids, ops := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range t.events {
		projects[i], kinds[i], ids[i], ops[i] = e.project, string(e.kind), e.id, string(e.op)
	}
	return []any{projects, kinds, ids, ops, at}
}

// Revision returns the newest committed revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	var rev int64
	if err := s.rdb.QueryRowContext(ctx, "SELECT revision FROM eim_revision WHERE id = 1").Scan(&rev); err != nil {
		return 0, s.d.translate(fmt.Errorf("revision: %w", err), nil)
	}
	return rev, nil
}

// Events returns up to limit events after the revision, oldest first, of
// the given kinds (all when none).
func (s *Store) Events(ctx context.Context, after int64, limit int, kinds ...eim.Kind) ([]eim.Event, error) {
	evs, _, err := s.events(ctx, after, limit, kinds)
	return evs, err
}

// events also returns the revision up to which the feed has been read: the
// last event returned, or — when fewer than limit matched — the committed
// revision at the time of the read, so a watcher of a few kinds does not
// rescan other kinds' events.
func (s *Store) events(ctx context.Context, after int64, limit int, kinds []eim.Kind) ([]eim.Event, int64, error) {
	if limit <= 0 {
		limit = 1000
	}
	// Everything at or below the committed revision is visible (commit order
	// is revision order), so reading the bound first and the events second
	// needs no common snapshot.
	upto, err := s.Revision(ctx)
	if err != nil {
		return nil, 0, err
	}
	if upto <= after {
		return nil, after, nil
	}
	a := &args{pg: s.d.pg}
	q := "SELECT revision, project, kind, resource_id, op, at FROM events WHERE revision > " + a.add(after) + " AND revision <= " + a.add(upto)
	if len(kinds) > 0 {
		ks := make([]string, len(kinds))
		for i, k := range kinds {
			ks[i] = string(k)
		}
		q += " AND " + s.d.inList("kind", a.add(s.d.listArg(ks)))
	}
	q += " ORDER BY revision LIMIT " + a.add(limit)
	rows, err := s.rdb.QueryContext(ctx, q, a.list...)
	if err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("events: %w", err), nil)
	}
	defer rows.Close()
	var out []eim.Event
	for rows.Next() {
		var (
			e        eim.Event
			kind, op string
			at       int64
		)
		if err := rows.Scan(&e.Revision, &e.Project, &kind, &e.ID, &op, &at); err != nil {
			return nil, 0, fmt.Errorf("events: %w", err)
		}
		e.Kind, e.Op, e.Time = eim.Kind(kind), eim.Op(op), eim.TimeFromUnixMilli(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("events: %w", err), nil)
	}
	if len(out) == limit {
		upto = out[len(out)-1].Revision
	}
	return out, upto, nil
}

// pollInterval is the fallback: watchers re-read the feed this often even
// when no notification arrives.
const pollInterval = 2 * time.Second

// watchBatch is how many events a watcher reads at once.
const watchBatch = 500

// Watch yields every event after the revision, in order, waiting for new
// ones until ctx is done (then it yields ctx's error once) or the store is
// closed (EUNAVAILABLE).
func (s *Store) Watch(ctx context.Context, after int64, kinds ...eim.Kind) iter.Seq2[eim.Event, error] {
	kinds = append([]eim.Kind(nil), kinds...)
	return func(yield func(eim.Event, error) bool) {
		poll := time.NewTimer(pollInterval)
		defer poll.Stop()
		gather := time.NewTimer(0)
		defer gather.Stop()
		force := false
		for {
			// Take the wake-up channel before reading, so a commit after
			// the read is never missed.
			wake, epoch := s.wake.wait()
			evs, upto, more, err := s.tail.read(ctx, s, after, kinds, epoch, force)
			force = false
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				select {
				case <-s.closed:
					err = eim.Errorf(eim.EUNAVAILABLE, "store closed")
				default:
				}
				yield(eim.Event{}, err)
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
			}
			after = upto
			if more {
				continue
			}
			poll.Reset(pollInterval)
			select {
			case <-ctx.Done():
				yield(eim.Event{}, ctx.Err())
				return
			case <-s.closed:
				yield(eim.Event{}, eim.Errorf(eim.EUNAVAILABLE, "store closed"))
				return
			case <-wake:
				// Commits come in bursts (a fleet import, an onboarding
				// wave): gather those of the next moment into one read
				// rather than reading once per commit. Nothing is missed:
				// the read starts from after, whatever woke it.
				gather.Reset(watchGather)
				select {
				case <-ctx.Done():
					yield(eim.Event{}, ctx.Err())
					return
				case <-s.closed:
					yield(eim.Event{}, eim.Errorf(eim.EUNAVAILABLE, "store closed"))
					return
				case <-gather.C:
				}
			case <-poll.C:
				// No notification: another process's commit, or one lost.
				force = true
			}
		}
	}
}

// watchGather is how long a woken watcher waits for further commits before
// it reads: under load one read then serves many commits (at 1,400
// commits/s a watcher read per commit cost 15 % of the server's CPU).
const watchGather = 5 * time.Millisecond

// hub wakes watchers: broadcast closes the current channel and replaces it.
// epoch counts the broadcasts.
type hub struct {
	mu    sync.Mutex
	ch    chan struct{}
	epoch uint64
}

func newHub() *hub { return &hub{ch: make(chan struct{})} }

// wait returns the channel the next broadcast closes and the current epoch.
func (h *hub) wait() (<-chan struct{}, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch, h.epoch
}

func (h *hub) now() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
	h.epoch++
}

// Sizes of the feed tail.
const (
	tailRead = 5000  // events one refresh reads at most
	tailKeep = 20000 // events kept (up to twice as many before a trim)
)

// tail keeps the newest events of the feed in memory for the Store's
// watchers. A commit wakes every watcher (eight or so in a server); each
// used to read the feed itself, which under a stream of commits was a
// fifth of the server's CPU. Now the first watcher woken reads all new
// events once, and the others take theirs from memory. A watcher further
// behind than the tail reaches reads the store directly.
type tail struct {
	mu   sync.Mutex // held through a refresh: watchers woken together share it
	evs  []eim.Event
	from int64 // evs holds every event with a revision in (from, upto]; -1: not started
	upto int64
	// epoch is the hub's epoch when the last refresh began: it saw every
	// commit broadcast before.
	epoch uint64
	full  bool // the last refresh read everything committed, not just readN
	// readN and keep are tailRead and tailKeep (smaller in tests).
	readN, keep int
}

func newTail() *tail { return &tail{from: -1, readN: tailRead, keep: tailKeep} }

// read returns the events after the revision, of the kinds (all when
// none), at most watchBatch; the revision up to which the feed has been
// read for the caller; and whether more may be read at once. epoch is the
// hub's when the caller took its wake-up channel: the answer includes every
// commit broadcast before it. force makes it look at the store anyway (a
// poll: commits of other processes whose notification was lost).
func (t *tail) read(ctx context.Context, s *Store, after int64, kinds []eim.Kind, epoch uint64, force bool) ([]eim.Event, int64, bool, error) {
	t.mu.Lock()
	if t.from < 0 {
		t.from, t.upto = after, after
	}
	if after >= t.from && (force || !t.full || t.epoch < epoch || after > t.upto) {
		if err := t.refresh(ctx, s); err != nil {
			t.mu.Unlock()
			return nil, 0, false, err
		}
	}
	// Behind the tail, or left behind by the trim of that refresh.
	if after < t.from {
		t.mu.Unlock()
		evs, upto, err := s.events(ctx, after, watchBatch, kinds)
		return evs, upto, len(evs) == watchBatch, err
	}
	defer t.mu.Unlock()
	i, _ := slices.BinarySearchFunc(t.evs, after, func(e eim.Event, rev int64) int { return cmp.Compare(e.Revision, rev+1) })
	var out []eim.Event
	for ; i < len(t.evs); i++ {
		e := t.evs[i]
		if len(kinds) > 0 && !slices.Contains(kinds, e.Kind) {
			continue
		}
		out = append(out, e)
		if len(out) == watchBatch {
			return out, e.Revision, true, nil
		}
	}
	return out, max(after, t.upto), !t.full, nil
}

// refresh reads the events committed since the tail's last read.
func (t *tail) refresh(ctx context.Context, s *Store) error {
	epoch := s.wake.now()
	evs, upto, err := s.events(ctx, t.upto, t.readN, nil)
	if err != nil {
		return err
	}
	t.evs = append(t.evs, evs...)
	t.upto = max(t.upto, upto)
	t.full = len(evs) < t.readN
	t.epoch = epoch
	if len(t.evs) > 2*t.keep {
		drop := len(t.evs) - t.keep
		t.from = t.evs[drop-1].Revision
		t.evs = slices.Clone(t.evs[drop:])
	}
	return nil
}

// listen wakes watchers on NOTIFYs from other processes' commits. It holds
// a dedicated connection and reconnects after failures; watchers poll
// meanwhile, so nothing depends on a notification arriving.
func (s *Store) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("change feed listener failed, reconnecting", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN eim_events"); err != nil {
		return err
	}
	// Commits may have happened while we were not listening.
	s.wake.broadcast()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.wake.broadcast()
	}
}
