package sqlstore

import (
	"context"
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

// note records the committed events of a transaction.
func (g *growth) note(events []pendingEvent) {
	var tables map[string]int
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
	tables["events"] = len(events)
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
