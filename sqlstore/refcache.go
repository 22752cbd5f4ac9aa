package sqlstore

import (
	"context"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// refCache keeps the rows of the reference kinds (cachedKinds: sites,
// regions, OS profiles…) across transactions, so that the writes that
// refer to them — a host create checks its site and answers with its site
// and region — do not read the same few rows from the database once each.
// On PostgreSQL every such read is a round trip to a backend on the same
// cores: for host creates at a site they were a third of the statements.
//
// It never serves a row older than the database's for a write of this
// process: a transaction that writes a cached kind (or a project) drops
// what it changed before its commit and again after it, and a read fills
// the cache only when nothing was dropped between the start of its
// transaction and its fill (gen) and no such commit is under way
// (inflight): a read that raced a commit does not put back the old row,
// not even for the moment between the commit and the second drop, when
// another reader may already have read the new row from the database.
// Writes of other processes (PostgreSQL, scaled out) reach it through the
// change feed, which a goroutine of the Store follows; while that is not
// running (starting, or after the feed failed) the cache is not used. So
// their changes are seen up to the feed's latency later, as by every other
// feed-kept cache of EIM (and in that moment a reader may read the new row
// from the database and then the old one from the cache). A write never
// puts such an old row back: the update of a cached kind names the
// updated_at it read, and when the stored row has moved on the cache is
// cleared and the transaction run again (tx.Update). Two changes of one
// row within the same millisecond are not told apart by that check.
//
// A transaction that has written a cached kind neither reads nor fills
// the cache (its reads see its own uncommitted writes).
type refCache struct {
	mu  sync.Mutex
	gen uint64 // counts the drops
	// inflight counts this process's commits of cached kinds between
	// their two drops.
	inflight int
	live     bool // the feed is followed: entries may be used
	rows     map[refKey]refEntry
	max      int
}

type refEntry struct {
	project string
	sc      *scanner // a snapshot: decoded anew for each use
}

// refCacheMax bounds the rows kept: far more than the sites and OS
// profiles a deployment has; past it, an arbitrary row makes room.
const refCacheMax = 20000

func newRefCache() *refCache {
	return &refCache{rows: map[refKey]refEntry{}, max: refCacheMax}
}

// get returns the kept row of kind k with the id, when the cache is live
// and the row belongs to project ("" = any).
func (c *refCache) get(k eim.Kind, id, project string) (*scanner, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return nil, false
	}
	e, ok := c.rows[refKey{k, id}]
	if !ok || (project != "" && e.project != project) {
		return nil, false
	}
	return e.sc, true
}

// generation is what a read takes before it starts, for put.
func (c *refCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps a row read when the generation was gen, unless something was
// dropped since (the read may predate that change).
func (c *refCache) put(gen uint64, k eim.Kind, id, project string, sc *scanner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.live || c.inflight > 0 {
		return
	}
	if _, ok := c.rows[refKey{k, id}]; !ok && len(c.rows) >= c.max {
		for key := range c.rows {
			delete(c.rows, key)
			break
		}
	}
	c.rows[refKey{k, id}] = refEntry{project: project, sc: sc}
}

// committing drops what the events of a transaction about to commit change,
// and keeps fills out until committed is called.
func (c *refCache) committing(evs []pendingEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight++
	c.dropLocked(evs)
}

// committed drops what the events changed again, once the commit (or its
// failure) is over.
func (c *refCache) committed(evs []pendingEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.dropLocked(evs)
}

// drop forgets what the events changed: the rows they update, or
// everything after a delete of a cached kind or of a project (the
// database's cascades change rows without events of their own). A created
// row was not kept before it existed.
func (c *refCache) drop(evs []pendingEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(evs)
}

func (c *refCache) dropLocked(evs []pendingEvent) {
	dropped := false
	for _, e := range evs {
		switch {
		case e.op == eim.OpCreated:
		case e.kind == eim.KindProject || (cachedKinds[e.kind] && e.op == eim.OpDeleted):
			clear(c.rows)
			dropped = true
		case cachedKinds[e.kind]:
			delete(c.rows, refKey{e.kind, e.id})
			dropped = true
		}
	}
	if dropped {
		c.gen++
	}
}

// clearAll drops every row: one was found older than the database's.
func (c *refCache) clearAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.rows)
	c.gen++
}

// setLive clears the cache and starts or stops its use.
func (c *refCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.rows)
	c.gen++
	c.live = live
}

// touchesRefs reports whether events change what the cache keeps.
func touchesRefs(evs []pendingEvent) bool {
	for _, e := range evs {
		if e.kind == eim.KindProject || cachedKinds[e.kind] {
			return true
		}
	}
	return false
}

// refWatchKinds are the kinds whose events the follower reads.
func refWatchKinds() []eim.Kind {
	ks := []eim.Kind{eim.KindProject}
	for k := range cachedKinds {
		ks = append(ks, k)
	}
	return ks
}

// followRefs keeps the cache current with the writes of other processes,
// from the change feed, until ctx ends. The cache is used only while it
// runs.
func (s *Store) followRefs(ctx context.Context) {
	const retry = 2 * time.Second
	kinds := refWatchKinds()
	for ctx.Err() == nil {
		rev, err := s.Revision(ctx)
		if err == nil {
			// Every commit up to rev is visible to the reads that follow;
			// the later ones come through the feed.
			s.refs.setLive(true)
			for e, werr := range s.Watch(ctx, rev, kinds...) {
				if werr != nil {
					err = werr
					break
				}
				s.refs.drop([]pendingEvent{{project: e.Project, id: e.ID, kind: e.Kind, op: e.Op}})
			}
			s.refs.setLive(false)
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("reference cache: following the change feed failed; not used until it is followed again", "err", err, "retry in", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
