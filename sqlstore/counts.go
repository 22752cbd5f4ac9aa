package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// countCache remembers the totals of list queries (totalElements) by the
// committed revision at which they were counted. Counting every match is
// what a list of a large fleet costs (the page itself is a hundred index
// lookups), and user interfaces ask the same counts over and over while
// the fleet does not change; any committed write moves the revision and so
// retires every cached count. A count is as fresh as the change feed: on
// PostgreSQL a commit shows in the revision once the sequencer has
// numbered it, a few milliseconds later, the same delay every watcher sees.
//
// Only read-only transactions use it: a write transaction's count includes
// its own uncommitted rows.
type countCache struct {
	mu      sync.Mutex
	rev     int64 // the revision the entries were counted at
	entries map[string]int
}

// maxCounts bounds the cache; when full it starts over.
const maxCounts = 4096

func newCountCache() *countCache { return &countCache{entries: map[string]int{}} }

func (c *countCache) get(rev int64, key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev != c.rev {
		return 0, false
	}
	n, ok := c.entries[key]
	return n, ok
}

func (c *countCache) put(rev int64, key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case rev > c.rev:
		c.rev = rev
		clear(c.entries)
	case rev < c.rev:
		return // counted in an older snapshot than the entries
	}
	if len(c.entries) >= maxCounts {
		clear(c.entries)
	}
	c.entries[key] = n
}

// countKey identifies a count: the statement and its arguments (the scope
// is among them: a project-scoped transaction's where starts with it).
func countKey(stmt string, args []any) string {
	var b strings.Builder
	b.WriteString(stmt)
	for _, a := range args {
		fmt.Fprintf(&b, "\x00%T:%v", a, a)
	}
	return b.String()
}

// count returns how many rows of c's table match where.
func (t *tx) count(ctx context.Context, c *codec, where string, list []any) (int, error) {
	stmt := "SELECT COUNT(*) FROM " + c.table + where
	var (
		key string
		rev int64
	)
	if !t.write {
		// The revision first: everything at or below it is committed and
		// so inside the count that follows, whatever its snapshot.
		if err := t.q.QueryRowContext(ctx, "SELECT revision FROM eim_revision WHERE id = 1").Scan(&rev); err != nil {
			return 0, t.fail(t.s.d.translate(fmt.Errorf("count %s: revision: %w", c.kind, err), nil))
		}
		key = countKey(stmt, list)
		if n, ok := t.s.counts.get(rev, key); ok {
			return n, nil
		}
	}
	var n int
	if err := t.queryRowBuilt(ctx, stmt, list).Scan(&n); err != nil {
		return 0, t.fail(t.s.d.translate(fmt.Errorf("count %s: %w", c.kind, err), nil))
	}
	if !t.write {
		t.s.counts.put(rev, key, n)
	}
	return n, nil
}
