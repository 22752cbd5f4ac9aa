package hostmgr

import (
	"container/heap"
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
type tracker struct {
	mu    sync.Mutex
	hosts map[string]*entry
	due   deadlines
}

// entry is one host. Guarded by tracker.mu.
type entry struct {
	id, project string
	seen        time.Time // last heard from
	stored      time.Time // what the store holds (zero: nothing)
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
	action *hostv1.HostAction
	off    bool // shut down on request: not timed out
	at     time.Time
	index  int // in due; -1 when not queued
}

func newTracker() *tracker {
	return &tracker{hosts: map[string]*entry{}}
}

// get returns the host's entry, creating it.
func (t *tracker) get(project, id string) *entry {
	e := t.hosts[id]
	if e == nil {
		e = &entry{id: id, project: project, index: -1}
		t.hosts[id] = e
	}
	return e
}

// queue puts e in the heap at deadline at, unless it is there already (at
// an earlier deadline, which is then re-checked).
func (t *tracker) queue(e *entry, at time.Time) {
	if e.index >= 0 {
		return
	}
	e.at = at
	heap.Push(&t.due, e)
}

// restore adds a host known from the store, due at the later of its last
// seen time and now, plus its timeout (applied by the checker).
func (t *tracker) restore(project, id string, seen, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	e.stored = seen
	if seen.After(e.seen) {
		e.seen = seen
	}
	// A restart is not the node's silence: count from now.
	if now.After(e.seen) {
		e.seen = now
	}
	t.queue(e, e.seen)
}

// changed marks a host changed in the feed: the next heartbeat reads it.
func (t *tracker) changed(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.hosts[id]; e != nil {
		e.known = false
		e.gen++
	}
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

// unsaved returns the last-seen times that moved by half the host's
// timeout since they were stored: enough for a restart or a reader of the
// store, and a write per host every few heartbeats rather than each.
func (t *tracker) unsaved(timeoutOf func(project string) time.Duration) []eim.LastSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []eim.LastSeen
	for _, e := range t.hosts {
		if e.seen.IsZero() || !e.seen.After(e.stored) {
			continue
		}
		if e.stored.IsZero() || e.seen.Sub(e.stored) >= timeoutOf(e.project)/2 {
			out = append(out, eim.LastSeen{Project: e.project, HostID: e.id, At: e.seen})
		}
	}
	return out
}

// saved records what the store now holds.
func (t *tracker) saved(batch []eim.LastSeen) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ls := range batch {
		if e := t.hosts[ls.HostID]; e != nil && ls.At.After(e.stored) {
			e.stored = ls.At
		}
	}
}

// expired pops the hosts whose deadline passed and returns them, with the
// time each was last seen; hosts heard from since are queued again at their
// real deadline. A returned host is out of the heap until it is heard from
// again.
func (t *tracker) expired(now time.Time, timeoutOf func(project string) time.Duration) []expiry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []expiry
	for t.due.Len() > 0 && !t.due[0].at.After(now) {
		e := heap.Pop(&t.due).(*entry)
		if e.off {
			continue
		}
		deadline := e.seen.Add(timeoutOf(e.project))
		if e.until.After(deadline) {
			deadline = e.until
		}
		if deadline.After(now) {
			t.queue(e, deadline)
			continue
		}
		out = append(out, expiry{project: e.project, id: e.id, seen: e.seen, gen: e.gen})
	}
	return out
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
