package sqlstore

import (
	"context"
	"strings"
	"sync"

	"github.com/eimhq/eim"
)

// PostgreSQL plans from statistics that autovacuum refreshes only after a
// table has changed by a fraction of its size, and checks only every
// autovacuum_naptime. A table loaded from empty (a fleet onboarding) is
// queried meanwhile with estimates of an empty table: nested loops over
// "one row" that is 100,000, and COUNT(*) without index-only scans as the
// visibility map is unset. The store therefore vacuums and analyzes a table
// itself each time the rows it created there grow by half (from
// firstAnalyze on): about a dozen runs up to 100,000 rows. Growth by a
// quarter made twenty, eleven of them in the first 10,000 rows, for each of
// hosts and events, while 32 API clients' first 10,000 creates ran at
// 1,663/s against 2,000/s later; estimates off by up to half still choose
// the same plans here. VACUUM of an
// insert-mostly table reads only the pages changed since the last one and
// ANALYZE reads a fixed-size sample, so each run is short.

// The growth is counted from two sources. The resource tables are told by
// the committed events (a created event is a row); the events table by
// its own rows. Every other table (those a module's store writes with its
// own statements: edge_workload_targets, edge_workload_status,
// edge_devices, the rollouts' devices, recovery keys, power jobs…) is
// counted from the rows its INSERT statements wrote (tx.countInserted),
// an upsert's updates included: a workload given to 10,000 devices is
// 10,000 target rows that no event names, and its status read planned as
// nested loops until autovacuum came.

// firstAnalyze is the number of created rows of a table that triggers its
// first VACUUM (ANALYZE); each later one comes after growth by half.
const firstAnalyze = 1000

// growth counts the rows this store created per table and hands a table to
// the analyze loop when its count crosses the next threshold.
type growth struct {
	mu      sync.Mutex
	created map[string]int
	next    map[string]int
	due     chan string
}

func newGrowth() *growth {
	return &growth{created: map[string]int{}, next: map[string]int{}, due: make(chan string, 32)}
}

// note records the committed events of a transaction and the rows its
// INSERT statements wrote into tables no event names.
func (g *growth) note(events []pendingEvent, inserted map[string]int64) {
	var tables map[string]int
	for table, n := range inserted {
		if tables == nil {
			tables = map[string]int{}
		}
		tables[table] += int(n)
	}
	for _, e := range events {
		if e.op != eim.OpCreated {
			continue
		}
		c := codecOf(e.kind)
		if c == nil {
			continue
		}
		if tables == nil {
			tables = map[string]int{}
		}
		tables[c.table]++
	}
	if tables == nil {
		return
	}
	if len(events) > 0 {
		tables["events"] = len(events)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for table, n := range tables {
		g.created[table] += n
		next := g.next[table]
		if next == 0 {
			next = firstAnalyze
		}
		if g.created[table] < next {
			g.next[table] = next
			continue
		}
		g.next[table] = g.created[table] + g.created[table]/2
		select {
		case g.due <- table:
		default: // the loop is behind; the next threshold catches up
		}
	}
}

// analyzeLoop runs VACUUM (ANALYZE) on the tables that grew, one at a time.
func (s *Store) analyzeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case table := <-s.growth.due:
			// Table names come from the schema registry, not from input.
			if _, err := s.db.ExecContext(ctx, "VACUUM (ANALYZE, SKIP_LOCKED) "+table); err != nil && ctx.Err() == nil {
				s.log.Warn("postgres vacuum analyze", "table", table, "err", err)
			}
		}
	}
}

// insertTable returns the table an INSERT statement writes, from its text
// ("INSERT INTO name …"); ok is false for any other statement.
func insertTable(q string) (string, bool) {
	const prefix = "INSERT INTO "
	if len(q) <= len(prefix) || !strings.EqualFold(q[:len(prefix)], prefix) {
		return "", false
	}
	rest := q[len(prefix):]
	end := strings.IndexAny(rest, " (")
	if end <= 0 {
		return "", false
	}
	return rest[:end], true
}

// eventTables are the tables whose growth the committed events tell: the
// resources' (one created event a row) and the events table itself.
var eventTables = sync.OnceValue(func() map[string]bool {
	codecsOnce.Do(buildCodecs)
	out := map[string]bool{"events": true}
	for _, c := range codecs {
		out[c.table] = true
	}
	return out
})
