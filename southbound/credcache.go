package southbound

import (
	"context"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// credCache keeps the node credentials that authentication reads on every
// southbound call, so that a fleet's heartbeats cost no database read. It
// is correct only while it follows every change of hosts:
//
//   - writes of this process invalidate it synchronously, before they
//     return (the store's commit hook), so a host invalidated or deleted
//     through this server's API is refused at once;
//   - writes of other processes (scale-out) reach it through the change
//     feed, within the feed's latency (milliseconds);
//   - while the feed is not followed (before Run, after a feed error) it
//     is off and every call reads the store, as without a cache.
//
// When the feed is lost, what the cache held is kept aside (stale) for
// one thing only: a call whose store read fails because the database is
// away is answered from it, for at most a node token's lifetime after the
// loss. A database restart then does not refuse a fleet's heartbeats (and
// so does not make its nodes look silent), while a host revoked through
// this process is still refused at once (its commit drops the stale
// entry) and one revoked through another process within the token
// lifetime that nodes' JWTs are trusted for anyway.
//
// A read of the store that raced a change must not be cached: each entry
// counts its invalidations, and a read is stored only if none happened
// since it started (and the cache was not reset).
type credCache struct {
	// live reports whether the feed is followed (the runner's Live).
	live func() bool

	mu      sync.Mutex
	epoch   uint64 // bumped by reset
	changes uint64 // hosts invalidated, whether cached or not
	entries map[string]*credEntry

	// stale holds the valid entries of before the feed was lost, and
	// lost when that was.
	stale map[string]eim.NodeCredentials
	lost  time.Time
}

type credEntry struct {
	cred  eim.NodeCredentials
	valid bool
	gen   uint64
}

// ticket identifies the state a store read started from.
type ticket struct{ epoch, gen uint64 }

func newCredCache() *credCache {
	return &credCache{entries: map[string]*credEntry{}, live: func() bool { return false }}
}

// get returns the cached credentials of host id, or a ticket to fill them
// with after a store read; ok is false when the cache is off or has none.
func (c *credCache) get(id string) (cred eim.NodeCredentials, t ticket, ok bool) {
	if !c.live() {
		return cred, ticket{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil {
		e = &credEntry{}
		c.entries[id] = e
	}
	if e.valid {
		return e.cred, ticket{}, true
	}
	return cred, ticket{epoch: c.epoch, gen: e.gen}, false
}

// fill stores what a store read that began with t found, unless the host
// changed (or the cache was reset) since.
func (c *credCache) fill(id string, t ticket, cred eim.NodeCredentials) {
	if !c.live() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[id]; e != nil && c.epoch == t.epoch && e.gen == t.gen {
		e.cred, e.valid = cred, true
	}
}

// mark returns the state a read of many hosts' credentials starts from,
// for primeFill.
func (c *credCache) mark() ticket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ticket{epoch: c.epoch, gen: c.changes}
}

// primeFill stores a page of credentials read ahead of the nodes' calls,
// begun at t (mark). A page is stale when any host changed since t, even
// one of another page or not cached: the change's host is not known to be
// outside the page. It then reports false and stores nothing (read it
// again). Entries already valid are left: they are at least as new.
func (c *credCache) primeFill(t ticket, creds []eim.NodeCredentials) bool {
	if !c.live() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != t.epoch {
		return true // reset: the feed is being followed afresh
	}
	if c.changes != t.gen {
		return false
	}
	for _, cr := range creds {
		e := c.entries[cr.HostID]
		if e == nil {
			e = &credEntry{}
			c.entries[cr.HostID] = e
		}
		if !e.valid {
			e.cred, e.valid = cr, true
		}
	}
	return true
}

// invalidate forgets what is cached of the hosts of events.
func (c *credCache) invalidate(events []eim.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range events {
		if ev.Kind != eim.KindHost {
			continue
		}
		c.changes++
		delete(c.stale, ev.ID)
		// A deleted host's entry stays, invalid: a read begun before the
		// delete must not bring the host back.
		if e := c.entries[ev.ID]; e != nil {
			e.valid, e.gen = false, e.gen+1
		}
	}
}

// reset forgets everything (the feed was lost: changes may have been
// missed), keeping the valid entries aside as stale, dated now.
func (c *credCache) reset(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if c.stale == nil {
		c.stale = map[string]eim.NodeCredentials{}
		c.lost = now
	}
	for id, e := range c.entries {
		if e.valid {
			c.stale[id] = e.cred
		}
	}
	c.entries = map[string]*credEntry{}
}

// restart empties the cache for a new start of the feed, and forgets the
// stale entries: the store answers again.
func (c *credCache) restart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.entries = map[string]*credEntry{}
	c.stale, c.lost = nil, time.Time{}
}

// staleOf returns the stale credentials of host id, if they were kept
// aside less than maxAge before now.
func (c *credCache) staleOf(id string, now time.Time, maxAge time.Duration) (eim.NodeCredentials, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cred, ok := c.stale[id]
	if !ok || now.Sub(c.lost) > maxAge {
		return eim.NodeCredentials{}, false
	}
	return cred, true
}

// Run follows the change feed for the credential cache until ctx ends,
// and returns nil then. Until it runs, and while the feed is lost, node
// authentication reads the store on every call.
func (s *Server) Run(ctx context.Context) error { return s.feed.Run(ctx) }

// newCredFeed returns the runner that keeps the cache current: a cache's
// (each start of the feed begins afresh), that reads every host's
// credentials ahead of the nodes' calls at each start.
func (s *Server) newCredFeed() *feed.Runner {
	return feed.New(feed.Options{Store: s.store, Name: "node credentials cache", Logger: s.log, Kinds: []eim.Kind{eim.KindHost},
		// Every change after the start's revision comes through the
		// feed; anything read from then on is at least as new.
		Reset:  s.creds.restart,
		Lost:   func() { s.creds.reset(s.now()) },
		Relist: s.primeCredentials,
		Handle: func(_ context.Context, evs []eim.Event) error {
			s.creds.invalidate(evs)
			return nil
		}})
}

// primePage is how many hosts' credentials one read of primeCredentials
// takes, and primeTries how often a page is read before it is left to the
// nodes' calls (each read is stale when a host changed meanwhile).
const (
	primePage  = 2000
	primeTries = 3
)

// primeCredentials reads every host's credentials into the cache, in
// pages, once the feed is followed. After a restart each node's first call
// (a token request) would otherwise read its host: a fleet's in one
// heartbeat interval, on top of the handshakes of its reconnections. It
// stops when ctx ends or a read fails (the calls then read what is
// missing, as without it), and returns nil: it is not retried.
func (s *Server) primeCredentials(ctx context.Context) error {
	start := time.Now()
	after, n, skipped := "", 0, 0
	for {
		var page []eim.NodeCredentials
		stored := false
		for range primeTries {
			t := s.creds.mark()
			var err error
			page, err = s.store.NodeCredentialsAfter(ctx, after, primePage)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("node credentials cache: could not read ahead; nodes' calls will read their hosts", "err", err)
				}
				return nil
			}
			if stored = s.creds.primeFill(t, page); stored {
				break
			}
		}
		if stored {
			n += len(page)
		} else {
			skipped += len(page)
		}
		if len(page) < primePage {
			break
		}
		after = page[len(page)-1].HostID
	}
	s.log.Info("node credentials cache: read ahead", "hosts", n, "left to their calls", skipped, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// nodeCredentials returns host id's credentials from the cache or the
// store.
func (s *Server) nodeCredentials(ctx context.Context, project, id string) (eim.NodeCredentials, error) {
	cred, t, ok := s.creds.get(id)
	if !ok {
		var err error
		cred, err = s.store.NodeCredentials(ctx, "", id)
		switch {
		case err == nil:
			s.creds.fill(id, t, cred)
		case eim.ErrorCode(err) == eim.EUNAVAILABLE && ctx.Err() == nil:
			old, ok := s.creds.staleOf(id, s.now(), s.ttl)
			if !ok {
				return cred, err
			}
			cred = old
		default:
			return cred, err
		}
	}
	if project != "" && cred.Project != project {
		return eim.NodeCredentials{}, eim.Errorf(eim.ENOTFOUND, "host %s not found", id)
	}
	return cred, nil
}
