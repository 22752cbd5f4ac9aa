package hostmgr

import (
	"container/heap"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/intern"
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
	mu sync.Mutex
	// hosts finds a host's entry by its key (keyOf); the entries live in
	// slabs, so that a host costs its entry and a map slot, not an
	// allocation of its own, and free holds the entries of hosts gone.
	hosts  map[uint64]*entry
	slabs  [][]entry
	free   []*entry
	odd    map[string]uint64 // keys of IDs that are not host-<8 hex digits>
	oddIDs []string          // by key - oddKey
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

// entry is one host. Guarded by tracker.mu. It is compact, for a process
// holds one per host of the fleet: the host's ID is its key (the eight
// hex digits of host-xxxxxxxx as a number), the project and the status
// are references into the process's interned strings, and the times
// are unix nanoseconds (0: none).
type entry struct {
	key    uint64
	seen   int64 // last heard from
	stored int64 // what the store holds (0: nothing)
	// restored is when a restart restored the host from the store: its
	// deadline counts from then, not from seen (the outage was the
	// server's), while seen still dates its silence.
	restored int64
	// until, when set, is a longer deadline than seen + timeout: the host
	// was asked to reboot.
	until int64
	at    int64 // the deadline in due
	// gen counts the feed's changes, so that a read racing a change does
	// not mark the entry known.
	gen uint64
	// digest and boot are the host's hardware digest and boot ID (read
	// from the host view's record, whose strings they share).
	digest, boot string
	action       *hostv1.HostAction
	// wide holds the project and the status when the interned strings'
	// table had no room for them.
	wide    *entryWide
	index   int32 // in due; -1 when not queued
	shard   uint16
	project intern.Ref
	status  intern.Ref // the host's hostStatus
	// spread is set on a restored host until the checker first passes
	// it; see expired.
	spread bool
	saving bool // in toSave
	// known is set when status, digest, boot and action reflect the host
	// row as it was after its last change in the feed; a heartbeat of an
	// unknown host reads the row.
	known bool
	off   bool // shut down on request: not timed out
	dead  bool // gone from hosts, waiting in toSave to be freed
}

type entryWide struct{ project, status string }

func (e *entry) projectName() string {
	if e.wide != nil {
		return e.wide.project
	}
	return e.project.String()
}

func (e *entry) statusText() string {
	if e.wide != nil {
		return e.wide.status
	}
	return e.status.String()
}

// setStatus sets the entry's status text.
func (e *entry) setStatus(s string) {
	if e.wide != nil {
		e.wide.status = s
		return
	}
	if r, ok := intern.Of(s); ok {
		e.status = r
		return
	}
	e.wide = &entryWide{project: e.project.String(), status: s}
}

// nanos returns t in unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// timeOf returns the time of unix nanoseconds n, the zero time for 0.
func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// oddKey is where the keys of IDs not of the form host-<8 hex digits>
// start: above every 32-bit key.
const oddKey = 1 << 32

// keyOf returns the key of host id, or ok false when it has none yet
// (an ID of another form not seen before).
func (t *tracker) keyOf(id string) (uint64, bool) {
	if eim.ValidID(eim.KindHost, id) {
		var b [4]byte
		hex.Decode(b[:], []byte(id[len(id)-8:]))
		return uint64(binary.BigEndian.Uint32(b[:])), true
	}
	k, ok := t.odd[id]
	return k, ok
}

// idOf returns the ID of the host of key k.
func (t *tracker) idOf(k uint64) string {
	if k >= oddKey {
		return t.oddIDs[k-oddKey]
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(k))
	return string(eim.KindHost) + "-" + hex.EncodeToString(b[:])
}

// find returns the host's entry, nil when it has none.
func (t *tracker) find(id string) *entry {
	k, ok := t.keyOf(id)
	if !ok {
		return nil
	}
	return t.hosts[k]
}

// slabSize is how many entries one allocation of the tracker holds.
const slabSize = 1024

// remove takes e out of the tracker (and the heap); its place is used
// again once it is out of toSave too.
func (t *tracker) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(&t.due, int(e.index))
	}
	delete(t.hosts, e.key)
	if e.saving {
		e.dead = true // freed by unsaved
		return
	}
	t.release(e)
}

func (t *tracker) release(e *entry) {
	*e = entry{index: -1}
	t.free = append(t.free, e)
}

// newTracker returns a tracker that owns every shard (alone) or none
// (a replica: it owns the shards it gains).
func newTracker(alone bool) *tracker {
	t := &tracker{hosts: map[uint64]*entry{}, owned: make([]bool, shards)}
	for i := range t.owned {
		t.owned[i] = alone
	}
	return t
}

// get returns the host's entry, creating it.
func (t *tracker) get(project, id string) *entry {
	k, ok := t.keyOf(id)
	if !ok {
		if t.odd == nil {
			t.odd = map[string]uint64{}
		}
		k = oddKey + uint64(len(t.oddIDs))
		id = strings.Clone(id)
		t.odd[id] = k
		t.oddIDs = append(t.oddIDs, id)
	}
	if e := t.hosts[k]; e != nil {
		return e
	}
	var e *entry
	if n := len(t.free); n > 0 {
		e, t.free = t.free[n-1], t.free[:n-1]
	} else {
		if len(t.slabs) == 0 || len(t.slabs[len(t.slabs)-1]) == slabSize {
			t.slabs = append(t.slabs, make([]entry, 0, slabSize))
		}
		last := &t.slabs[len(t.slabs)-1]
		*last = append(*last, entry{})
		e = &(*last)[len(*last)-1]
	}
	*e = entry{key: k, shard: uint16(shardOf(id)), index: -1}
	if r, ok := intern.Of(project); ok {
		e.project = r
	} else {
		e.wide = &entryWide{project: strings.Clone(project)}
	}
	t.hosts[k] = e
	return e
}

// queue puts e in the heap at deadline at, unless it is there already (at
// an earlier deadline, which is then re-checked) or its shard is another
// replica's.
func (t *tracker) queue(e *entry, at time.Time) {
	if e.index >= 0 || !t.owned[e.shard] {
		return
	}
	e.at = nanos(at)
	heap.Push(&t.due, e)
}

// restore adds a host known from the store, due at the later of its last
// seen time and now (when pardon), plus its timeout (applied by the
// checker).
func (t *tracker) restore(project, id string, seen, now time.Time, pardon bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(project, id)
	e.stored = nanos(seen)
	if e.stored > e.seen {
		e.seen = e.stored
	}
	if pardon {
		// A restart is not the node's silence: count from now.
		e.restored = nanos(now)
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
	prev = timeOf(e.seen)
	n := nanos(now)
	if n > e.seen {
		e.seen = n
	}
	if e.stored == 0 || (t.shared && time.Duration(n-e.stored) >= t.w) {
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
	if e := t.find(id); e != nil {
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
	if n := nanos(now); n > e.restored {
		e.restored = n
	}
	t.queue(e, now)
}

// forget drops a deleted host.
func (t *tracker) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(id); e != nil {
		t.remove(e)
	}
}

// saveAll queues every host heard from since its last save: for the last
// flush before a shutdown.
func (t *tracker) saveAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.hosts {
		if e.seen > e.stored {
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
		if e.dead { // forgotten since it was queued
			t.release(e)
			continue
		}
		if e.seen <= e.stored { // saved by another path
			continue
		}
		out = append(out, eim.LastSeen{Project: e.projectName(), HostID: t.idOf(e.key), At: timeOf(e.seen)})
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
		e := t.find(ls.HostID)
		if e == nil {
			continue
		}
		if !ok {
			t.save(e)
		} else if at := nanos(ls.At); at > e.stored {
			e.stored = at
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
	n := nanos(now)
	for t.due.Len() > 0 && t.due[0].at <= n {
		e := heap.Pop(&t.due).(*entry)
		if e.off || !t.owned[e.shard] {
			continue
		}
		deadline := t.deadline(e, timeoutOf)
		if deadline.After(now) {
			at := deadline
			if e.spread && e.seen <= e.restored {
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
			if e.seen > e.stored {
				t.save(e)
			}
			continue
		}
		out = append(out, expiry{project: e.projectName(), id: t.idOf(e.key), seen: timeOf(e.seen), gen: e.gen})
	}
	return out
}

// deadline returns when e times out: a timeout (and the slack of a
// shared fleet) after it was last heard from, or after it was restored,
// unless it may stay silent until later (e.until).
func (t *tracker) deadline(e *entry, timeoutOf func(project string) time.Duration) time.Time {
	from := max(e.seen, e.restored)
	deadline := timeOf(from).Add(timeoutOf(e.projectName()) + t.slack)
	if until := timeOf(e.until); until.After(deadline) {
		deadline = until
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
func (d deadlines) Less(i, j int) bool { return d[i].at < d[j].at }
func (d deadlines) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].index, d[j].index = int32(i), int32(j)
}
func (d *deadlines) Push(x any) {
	e := x.(*entry)
	e.index = int32(len(*d))
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
