package hostmgr

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// tracker is the in-memory liveness of the nodes: when each was last heard
// from, what the handlers last learnt of its host, and a heap of deadlines.
//
// The heap holds at most one entry per host, keyed by a deadline that may
// be early: a heartbeat only moves seen forward, and the checker, popping a
// deadline that passed, pushes the host back with its real one. So a
// heartbeat is a map update, and the checker pops each live host about once
// per timeout.
//
// The checker's pops also pace the saves of last-seen times: a host popped
// with a newer time than the store holds joins toSave, as does a host heard
// from for the first time. So the flusher's work, like the checker's,
// follows the hosts it has to write (a fleet over its timeout), not the
// fleet, and it does not walk the map. After a restart the hosts' first
// passes are drawn over their timeout, so that these writes do not come
// all at once (see expired).
//
// With replicas (see replicas.go), the heap holds only the hosts of the
// shards this process owns, and the tracker is shared: it saves a host's
// time whenever the store's may be older than w, and adds slack to every
// deadline.
type tracker struct {
	mu     sync.Mutex
	hosts  map[string]*entry
	due    deadlines
	toSave []*entry

	owned []bool // by shard: whose hosts this process flags
	// shared is set while other replicas may hear this process's hosts
	// and flag them: a host heard is saved when the store's time may be
	// older than w (so the store is at most w and a flush behind any
	// replica's), every deadline carries slack, and a passed deadline is
	// checked against the store's time before the host is flagged.
	shared   bool
	w, slack time.Duration
	// pardoned is when the store last came back from an outage: no
	// deadline counts from before it (see pardon).
	pardoned time.Time
}

// entry is one host. Guarded by tracker.mu.
type entry struct {
	id, project string
	shard       int
	seen        time.Time // last heard from
	stored      time.Time // what the store holds (zero: nothing)
	// restored is when a restart restored the host from the store: its
	// deadline counts from then, not from seen (the outage was the
	// server's), while seen still dates its silence.
	restored time.Time
	// spread is set on a restored host until the checker first passes
	// it; see expired.
	spread bool
	saving bool // in toSave
	// until, when set, is a longer deadline than seen + timeout: the host
	// was asked to reboot.
	until time.Time
	// known is set when the fields below reflect the host row as it was
	// after its last change in the feed; a heartbeat of an unknown host
	// reads the row. gen counts the feed's changes, so that a read racing
	// a change does not mark the entry known.
	known  bool
	gen    uint64
	status string // the host's hostStatus
	digest string // the host's hardware digest
	boot   string // the host's boot ID
	action *hostv1.HostAction
	off    bool // shut down on request: not timed out
	at     time.Time
	index  int // in due; -1 when not queued
}

// newTracker returns a tracker that owns every shard (alone) or none
// (a replica: it owns the shards it gains).
func newTracker(alone bool) *tracker {
	t := &tracker{hosts: map[string]*entry{}, owned: make([]bool, shards)}
	for i := range t.owned {
		t.owned[i] = alone
	}
	return t
}

// get returns the host's entry, creating it.
func (t *tracker) get(project, id string) *entry {
	e := t.hosts[id]
	if e == nil {
		e = &entry{id: id, project: project, shard: shardOf(id), index: -1}
		t.hosts[id] = e
	}
	return e
}

// queue puts e in the heap at deadline at, unless it is there already (at
// an earlier deadline, which is then re-checked) or its shard is another
// replica's.
func (t *tracker) queue(e *entry, at time.Time) {
	if e.index >= 0 || !t.owned[e.shard] {
		return
	}
	e.at = at
	heap.Push(&t.due, e)
}

// restore adds a host known from the store, due at the later of its last
// seen time and now (when pardon), plus its timeout (applied by the
// checker).
func (t *tracker) restore(project, id string, seen, now time.Time, pardon bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	e.stored = seen
	if seen.After(e.seen) {
		e.seen = seen
	}
	if pardon {
		// A restart is not the node's silence: count from now.
		e.restored = now
		e.spread = true
	}
	t.queue(e, now)
}

// heardAt records that the node of e was heard from at now. A host heard
// from for the first time is saved at the next flush, so that a restart
// knows it; later times are saved as the checker passes them (expired),
// and, while the fleet is shared, whenever the store's may be older than
// w.
func (t *tracker) heardAt(e *entry, now time.Time) (prev time.Time) {
	prev = e.seen
	if now.After(e.seen) {
		e.seen = now
	}
	if e.stored.IsZero() || (t.shared && now.Sub(e.stored) >= t.w) {
		t.save(e)
	}
	return prev
}

// save queues e for the next flush.
func (t *tracker) save(e *entry) {
	if !e.saving {
		e.saving = true
		t.toSave = append(t.toSave, e)
	}
}

// changed marks a host changed in the feed: the next heartbeat reads it.
//
// While the fleet is shared, a change is also how the owner of a host's
// shard learns of a host only other replicas hear (its first heartbeat
// wrote its status), or hear again after it was flagged: a host of an
// owned shard that is not queued is queued, its deadline counting from
// now (someone changed it just now). The store's last-seen time, read
// when the deadline passes, tells the rest.
func (t *tracker) changed(project, id string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.hosts[id]; e != nil {
		e.known = false
		e.gen++
	}
	if !t.shared || !t.owned[shardOf(id)] {
		return
	}
	e := t.get(project, id)
	if e.index >= 0 || e.off {
		return
	}
	if now.After(e.restored) {
		e.restored = now
	}
	t.queue(e, now)
}

// forget drops a deleted host.
func (t *tracker) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.hosts[id]; e != nil {
		if e.index >= 0 {
			heap.Remove(&t.due, e.index)
		}
		delete(t.hosts, id)
	}
}

// saveAll queues every host heard from since its last save: for the last
// flush before a shutdown.
func (t *tracker) saveAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.hosts {
		if e.seen.After(e.stored) {
			t.save(e)
		}
	}
}

// unsaved takes up to max of the queued last-seen times that are newer
// than the store's, oldest queued first; the rest wait for the next flush.
func (t *tracker) unsaved(max int) []eim.LastSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(max, len(t.toSave))
	out := make([]eim.LastSeen, 0, n)
	for i, e := range t.toSave[:n] {
		e.saving = false
		t.toSave[i] = nil
		// Forgotten since it was queued, or saved by another path.
		if t.hosts[e.id] != e || !e.seen.After(e.stored) {
			continue
		}
		out = append(out, eim.LastSeen{Project: e.project, HostID: e.id, At: e.seen})
	}
	t.toSave = append(t.toSave[:0], t.toSave[n:]...)
	return out
}

// saved records what the store now holds; when the save failed (ok false),
// the hosts are queued again.
func (t *tracker) saved(batch []eim.LastSeen, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ls := range batch {
		e := t.hosts[ls.HostID]
		if e == nil {
			continue
		}
		if !ok {
			t.save(e)
		} else if ls.At.After(e.stored) {
			e.stored = ls.At
		}
	}
}

// expired pops the hosts whose deadline passed and returns them, with the
// time each was last seen; hosts heard from since are queued again at their
// real deadline, and for a save when the store has an older time. A
// returned host is out of the heap until it is heard from again.
func (t *tracker) expired(now time.Time, timeoutOf func(project string) time.Duration) []expiry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []expiry
	for t.due.Len() > 0 && !t.due[0].at.After(now) {
		e := heap.Pop(&t.due).(*entry)
		if e.off || !t.owned[e.shard] {
			continue
		}
		deadline := t.deadline(e, timeoutOf)
		if deadline.After(now) {
			at := deadline
			if e.spread && !e.seen.After(e.restored) {
				// After a restart every host is due at once, and each
				// next deadline is a timeout after a heartbeat of the
				// interval following it: the fleet's saves would come
				// together, every timeout, for ever. A key drawn early
				// in the timeout spreads the passes, and with them the
				// saves, over it (a host not heard from by its key
				// draws again from what is left).
				at = now.Add(1 + rand.N(deadline.Sub(now)))
			} else {
				e.spread = false
			}
			t.queue(e, at)
			if e.seen.After(e.stored) {
				t.save(e)
			}
			continue
		}
		out = append(out, expiry{project: e.project, id: e.id, seen: e.seen, gen: e.gen})
	}
	return out
}

// deadline returns when e times out: a timeout (and the slack of a
// shared fleet) after it was last heard from, or after it was restored,
// unless it may stay silent until later (e.until).
func (t *tracker) deadline(e *entry, timeoutOf func(project string) time.Duration) time.Time {
	from := e.seen
	if e.restored.After(from) {
		from = e.restored
	}
	deadline := from.Add(timeoutOf(e.project) + t.slack)
	if e.until.After(deadline) {
		deadline = e.until
	}
	return deadline
}

type expiry struct {
	project, id string
	seen        time.Time
	gen         uint64
}

// deadlines is a min-heap of entries by at.
type deadlines []*entry

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].at.Before(d[j].at) }
func (d deadlines) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].index, d[j].index = i, j
}
func (d *deadlines) Push(x any) {
	e := x.(*entry)
	e.index = len(*d)
	*d = append(*d, e)
}
func (d *deadlines) Pop() any {
	old := *d
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*d = old[:len(old)-1]
	return e
}
