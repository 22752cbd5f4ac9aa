// Package hostview is the process's one per-host read model: what one
// process knows of each host's row and its instance — project, site,
// states, statuses, power, node credentials, and what the fleet's pages
// and series show — read once and kept current by the change feed and
// by this process's own commits. Node authentication (southbound), the
// host module, telemetry and maintenance read it, so that a process
// reads and follows a host once, not once per module, and a node's call
// costs no database access while its host is unchanged; the UI's
// summaries and the exporter's series are projections over it
// (Project): they are told of each record replaced, (old, new), and
// index the shared records rather than keeping copies.
//
// The feed's handler reads again every changed host (and, with
// projections, every changed instance) once per batch, and the record
// it makes is what every reader and projection then uses. Every read of
// the view — the feed's, a call's, the read ahead — goes through the
// store's eim.HostFacts: the columns the view keeps, not whole rows.
//
// Consistency is node authentication's, the strictest of its readers:
//
//   - a write of this process drops what it changed before it returns
//     (Store.OnCommit), so a host invalidated or deleted through this
//     server is refused at once;
//   - a write of another process (a replica) arrives through the feed,
//     within its latency (milliseconds);
//   - while the feed is not followed (before Run, after a failure until
//     it has caught up again) nothing is served from memory: Host reads
//     the store. What the view held is kept, and, for a call whose read
//     finds the store away, Stale serves it for a bounded time after the
//     loss; once the feed is back it resumes after the last event it
//     handled, dropping what changed meanwhile, so the view is warm again
//     at once.
//
// A read of the store that raced a change must not be kept: each entry
// counts its changes, and a read is kept only if none happened since it
// began.
//
// Without projections, a view with Options.Evict holds only the hosts
// whose nodes call its process: none is read ahead, and a host no call
// looks up for a while is dropped.
//
// A projection is told of every record the view replaces, in order per
// host: the read ahead at the start, the feed's reads, the calls' reads.
// With projections the view also follows instances, and the read ahead
// must succeed (it is tried again) so that a projection sees the whole
// fleet (Primed).
//
// Modules keep what they compute from a host on its Host value (Memo):
// a Host is never changed, a change makes a new one, so a memo cannot
// outlive the facts it came from. Modules that keep more per host than
// that (the host module's liveness) hear of changes through OnChange.
package hostview

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// Credentials returns what decides whether the host's node may
// authenticate.
func (h *Host) Credentials() eim.NodeCredentials {
	return eim.NodeCredentials{HostID: h.ID(), Project: h.Project(), DesiredState: h.DesiredState(), SecretHash: h.NodeSecretHash(), Gen: h.credGen}
}

// Slot names one module's memo on a Host (NewSlot).
type Slot int

// maxSlots bounds the modules that keep a memo on hosts.
const maxSlots = 4

// Memo returns what the module of slot s kept on h (nil: nothing).
func (h *Host) Memo(s Slot) any {
	if m := h.memo.Load(); m != nil {
		return m[s].Load()
	}
	return nil
}

// SetMemo keeps v on h for the module of slot s. Every call of a slot
// must keep values of the same type.
func (h *Host) SetMemo(s Slot, v any) {
	m := h.memo.Load()
	if m == nil {
		// Made on the first memo: a host no module keeps one on (one a
		// process shows but does not serve) costs a pointer.
		h.memo.CompareAndSwap(nil, new(memos))
		m = h.memo.Load()
	}
	m[s].Store(v)
}

// memos are a Host's memos, by slot.
type memos [maxSlots]atomic.Value

// Options configure a View. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	Now    func() time.Time
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
	// Evict, when set, makes a view without projections hold only the
	// hosts whose nodes call this process (a replica of the nodes'
	// modules): it does not read the fleet ahead, a host is read at its
	// first call, and a host no call looked up for about Evict (between
	// Evict/2 and Evict) is dropped. Replicas then divide the fleet's
	// memory among them, as they divide its nodes.
	Evict time.Duration
}

// View is the per-host view. Its methods work before Run is called, but
// keep nothing until Run follows the feed.
type View struct {
	store eim.Store
	facts eim.HostFacts // the store's reads of the columns the view keeps
	log   *slog.Logger
	now   func() time.Time
	feed  *feed.Runner
	seed  maphash.Seed

	shards [shardCount]shard
	// changes counts the hosts dropped, whether kept or not: a page read
	// ahead is kept only if none was dropped while it was read.
	changes atomic.Uint64
	// lost is when the feed was lost (unix nanoseconds), 0 while it is
	// followed or before it ever was.
	lost atomic.Int64

	slots   atomic.Int32
	hooksMu sync.Mutex
	hooks   atomic.Pointer[[]func(project, id string, deleted bool)]
	// projs are the projections (Project); primed is set once the read
	// ahead read every host (and instance) for them.
	projs   atomic.Pointer[[]func(old, new *Host)]
	primed  atomic.Bool
	primedC chan struct{} // closed when primed is set
	// evict is Options.Evict; onDemand is set when Run follows it (no
	// projections).
	evict    time.Duration
	onDemand atomic.Bool
	// insts is each instance's host (with projections): the feed's
	// handler and the read ahead use it, never at once.
	insts map[string]string
}

// shardCount spreads the entries over locks: every southbound call and
// heartbeat looks a host up, from as many goroutines as there are calls.
const shardCount = 32

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

// entry is one host's place in the view. A drop (a change of the host)
// marks it stale, and bumps its generation, so that a read begun before
// the change cannot bring the old row back; a stale record is not
// served, but stays what the projections were last told until the feed
// reads the host again. The entry goes when the feed finds the host
// gone.
type entry struct {
	h     *Host
	gen   uint64 // bumped by every drop
	stale bool
	used  bool // looked up since the last sweep (Options.Evict)
}

// New returns a View of the store, and hooks it to the store's commits.
func New(o Options) *View {
	if o.Store == nil {
		panic("hostview.New: Store is required")
	}
	v := &View{store: o.Store, facts: o.Store.HostFacts(o.Store), log: o.Logger, now: o.Now, evict: o.Evict, seed: maphash.MakeSeed(), insts: map[string]string{}, primedC: make(chan struct{})}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.now == nil {
		v.now = time.Now
	}
	for i := range v.shards {
		v.shards[i].m = map[string]*entry{}
	}
	v.feed = feed.New(feed.Options{Store: o.Store, Name: "host view", Logger: v.log, Metrics: o.Metrics, Kinds: []eim.Kind{eim.KindHost, eim.KindInstance},
		Handle:   v.handle,
		MaxBatch: 500,
		// At the start, the whole fleet in a few scans: after a restart
		// every node calls within an interval, and each call would
		// otherwise read its host.
		Relist: v.prime,
		OnLive: func(live bool) {
			if live {
				v.lost.Store(0)
			} else {
				v.lost.CompareAndSwap(0, v.now().UnixNano())
			}
		},
	})
	o.Store.OnCommit(v.changed)
	return v
}

// Run follows the change feed until ctx ends, and returns nil then.
func (v *View) Run(ctx context.Context) error {
	if v.evict <= 0 || v.projected() {
		return v.feed.Run(ctx)
	}
	v.onDemand.Store(true)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { v.sweep(ctx) })
	return v.feed.Run(ctx)
}

// sweep drops, every Evict/2, the hosts no call looked up since the last
// sweep, until ctx ends.
func (v *View) sweep(ctx context.Context) {
	t := time.NewTicker(v.evict / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i := range v.shards {
			sh := &v.shards[i]
			sh.mu.Lock()
			for id, e := range sh.m {
				if e.used {
					e.used = false
				} else {
					delete(sh.m, id)
				}
			}
			sh.mu.Unlock()
		}
	}
}

// Len returns how many hosts the view holds.
func (v *View) Len() int {
	n := 0
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.h != nil {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Shared returns v, the process's view, for a module to use; when v is
// nil (a module on its own: tests, tools) it returns a new View of o that
// the module owns (own true) and must run (RunAlong).
func Shared(v *View, o Options) (_ *View, own bool) {
	if v != nil {
		return v, false
	}
	return New(o), true
}

// RunAlong runs run until it returns, and, when own, v beside it until
// ctx ends: a module's Run with a view of its own.
func RunAlong(ctx context.Context, v *View, own bool, run func(context.Context) error) error {
	if !own {
		return run(ctx)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { v.Run(ctx) })
	return run(ctx)
}

// Live reports whether the view serves from memory: the feed is followed
// and caught up with.
func (v *View) Live() bool { return v.feed.Live() }

// NewSlot returns a slot for a module's memo on hosts. It panics when
// more than a few are asked for (a programming error).
func (v *View) NewSlot() Slot {
	n := v.slots.Add(1) - 1
	if n >= maxSlots {
		panic("hostview: too many memo slots")
	}
	return Slot(n)
}

// OnChange registers fn to be told of every host dropped from the view:
// changed (deleted false) or deleted, by this process's commits (before
// they return) and through the feed, so possibly twice. fn must be
// quick, must not write, and must not call the view.
func (v *View) OnChange(fn func(project, id string, deleted bool)) {
	v.hooksMu.Lock()
	defer v.hooksMu.Unlock()
	var hooks []func(string, string, bool)
	if old := v.hooks.Load(); old != nil {
		hooks = append(hooks, *old...)
	}
	hooks = append(hooks, fn)
	v.hooks.Store(&hooks)
}

func (v *View) shard(id string) *shard {
	return &v.shards[maphash.String(v.seed, id)%shardCount]
}

// Host returns host id's facts; it must be in project (any project when
// ""), or the error is ENOTFOUND. While the view is live a known host
// costs no database access; otherwise Host reads the store, and keeps
// what it read while live.
func (v *View) Host(ctx context.Context, project, id string) (*Host, error) {
	if !v.feed.Live() {
		return v.read(ctx, project, id)
	}
	sh := v.shard(id)
	sh.mu.Lock()
	e := sh.m[id]
	if e != nil && e.h != nil && !e.stale {
		h := e.h
		e.used = true
		sh.mu.Unlock()
		if project != "" && h.Project() != project {
			return nil, notFound(id)
		}
		return h, nil
	}
	if e == nil {
		e = &entry{}
		sh.m[id] = e
	}
	e.used = true
	gen := e.gen
	sh.mu.Unlock()

	h, err := v.read(ctx, project, id)
	if err != nil {
		return nil, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] == e && e.gen == gen && v.feed.Live() {
		if e.h != nil && !e.stale {
			// Filled meanwhile (read ahead), from the same state: one
			// Host value per state, so that memos are shared.
			return e.h, nil
		}
		if e.h == nil {
			// Keyed by the record's copy of the ID, not the caller's.
			delete(sh.m, id)
			sh.m[h.ID()] = e
		}
		v.install(e, h, false)
	}
	return h, nil
}

func notFound(id string) error { return eim.Errorf(eim.ENOTFOUND, "host %s not found", id) }

// read reads host id from the store.
func (v *View) read(ctx context.Context, project, id string) (*Host, error) {
	rows, err := v.facts.Hosts(ctx, project, []string{id})
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].ID == id {
			return factsOf(&rows[i]), nil
		}
	}
	return nil, notFound(id)
}

// Stale returns what the view held of host id when the feed was lost,
// if that was at most maxAge ago and nothing of this process changed the
// host since: for a call whose read finds the store away.
func (v *View) Stale(id string, maxAge time.Duration) (*Host, bool) {
	lost := v.lost.Load()
	if lost == 0 || v.now().Sub(time.Unix(0, lost)) > maxAge {
		return nil, false
	}
	sh := v.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[id]; e != nil && e.h != nil && !e.stale {
		return e.h, true
	}
	return nil, false
}

// changed drops the hosts of events, and tells the OnChange hooks.
func (v *View) changed(evs []eim.Event) {
	hooks := v.hooks.Load()
	for _, ev := range evs {
		if ev.Kind != eim.KindHost {
			continue
		}
		sh := v.shard(ev.ID)
		sh.mu.Lock()
		// Counted under the entry's lock: a page filled after this sees
		// it (see fill).
		v.changes.Add(1)
		if e := sh.m[ev.ID]; e != nil {
			e.stale, e.gen = true, e.gen+1
		}
		sh.mu.Unlock()
		if hooks != nil {
			for _, fn := range *hooks {
				fn(ev.Project, ev.ID, ev.Op == eim.OpDeleted)
			}
		}
	}
}

// primePage is how many hosts one read of prime takes, and primeTries
// how often a page is read before it is kept stale (a page read while a
// host changed is not served from).
const (
	primePage  = 2000
	primeTries = 3
)

// prime reads every host, of every project, into the view, in pages,
// and with projections every instance. Without projections it stops
// when ctx ends or a read fails (the calls then read what is missing),
// and returns nil: it is not tried again. With projections a failure is
// returned, for the runner to call it again: they need the whole fleet.
func (v *View) prime(ctx context.Context) error {
	if v.onDemand.Load() {
		return nil // the hosts are read at their calls
	}
	start := time.Now()
	full := v.projected()
	// With projections the instances are read first, so that each host's
	// record is made once, with its instance.
	var insts map[string]*Instance // by host ID
	if full {
		insts = map[string]*Instance{}
		for after := ""; ; {
			page, err := v.facts.InstancesAfter(ctx, after, primePage)
			if err != nil {
				return fmt.Errorf("read the instances ahead: %w", err)
			}
			for i := range page {
				insts[page[i].HostID] = instanceOf(&page[i])
			}
			if len(page) < primePage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	after, n, skipped := "", 0, 0
	for {
		var page []eim.HostRow
		kept := false
		for range primeTries {
			mark := v.changes.Load()
			var err error
			page, err = v.facts.HostsAfter(ctx, after, primePage)
			if err != nil {
				if full {
					return fmt.Errorf("read the hosts ahead: %w", err)
				}
				if ctx.Err() == nil {
					v.log.Warn("host view: could not read the hosts ahead; calls will read their hosts", "err", err)
				}
				return nil
			}
			if kept = v.fill(mark, page, insts); kept {
				break
			}
		}
		if kept {
			n += len(page)
		} else {
			skipped += len(page)
			v.fillStale(page, insts)
		}
		if len(page) < primePage {
			break
		}
		after = page[len(page)-1].ID
	}
	// Each instance on its host's record (there already, but for a host
	// a call read meanwhile), and its host remembered.
	for hostID, in := range insts {
		v.setInstance(hostID, in)
	}
	if !v.primed.Swap(true) {
		close(v.primedC)
	}
	v.log.Info("host view: read ahead", "hosts", n, "left to their calls", skipped, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// fill keeps a page of hosts read ahead, begun when changes was mark. A
// page is stale when any host was dropped since, even one not in it: the
// dropped host is not known to be outside the page. It then reports false
// and keeps the rest of the page out (those kept before the drop are
// dropped by it if they changed). Hosts the view holds already are left:
// they are at least as new.
func (v *View) fill(mark uint64, page []eim.HostRow, insts map[string]*Instance) bool {
	for i := range page {
		h := factsOf(&page[i])
		h.inst = insts[h.ID()]
		sh := v.shard(h.ID())
		sh.mu.Lock()
		if v.changes.Load() != mark {
			sh.mu.Unlock()
			return false
		}
		e := sh.m[h.ID()]
		if e == nil {
			e = &entry{}
			sh.m[h.ID()] = e
		}
		if e.h == nil {
			v.install(e, h, false)
		}
		sh.mu.Unlock()
	}
	return true
}

// fillStale keeps, for the projections, the hosts of a page that could
// not be read apart from changes: stale, so not served (a call reads its
// host), and read again by the feed if they changed.
func (v *View) fillStale(page []eim.HostRow, insts map[string]*Instance) {
	if !v.projected() {
		return
	}
	for i := range page {
		h := factsOf(&page[i])
		h.inst = insts[h.ID()]
		sh := v.shard(h.ID())
		sh.mu.Lock()
		e := sh.m[h.ID()]
		if e == nil {
			e = &entry{}
			sh.m[h.ID()] = e
		}
		if e.h == nil {
			v.install(e, h, true)
		}
		sh.mu.Unlock()
	}
}

// install makes h e's record, with the instance of the record it
// replaces, and tells the projections. The entry's shard is locked.
func (v *View) install(e *entry, h *Host, stale bool) {
	old := e.h
	if old != nil && h.inst == nil {
		h.inst = old.inst
	}
	e.h, e.stale = h, stale
	v.project(old, h)
}

// handle handles a batch of the feed: it drops the changed hosts, then
// reads them again (with projections, every changed host; without, those
// the view holds) and, with projections, the changed instances.
func (v *View) handle(ctx context.Context, evs []eim.Event) error {
	v.changed(evs)
	full := v.projected()
	var hostIDs, instIDs []string
	for _, ev := range evs {
		switch ev.Kind {
		case eim.KindHost:
			hostIDs = append(hostIDs, ev.ID)
		case eim.KindInstance:
			if full {
				instIDs = append(instIDs, ev.ID)
			}
		}
	}
	if err := v.refreshHosts(ctx, dedupe(hostIDs), full); err != nil {
		return err
	}
	return v.refreshInstances(ctx, dedupe(instIDs))
}

// readBatch bounds the IDs of one read of changed rows.
const readBatch = 500

// refreshHosts reads the hosts with the ids again and keeps what it
// read: served again when nothing of this process changed the host
// since the read began, and told to the projections in any case (it is
// never older than what they were told: the feed reads again what
// changed meanwhile). A host gone leaves the view.
func (v *View) refreshHosts(ctx context.Context, ids []string, all bool) error {
	type mark struct {
		e   *entry
		gen uint64
	}
	marks := make(map[string]mark, len(ids))
	for _, id := range ids {
		sh := v.shard(id)
		sh.mu.Lock()
		e := sh.m[id]
		if e == nil && all {
			e = &entry{stale: true}
			sh.m[id] = e
		}
		if e != nil {
			marks[id] = mark{e, e.gen}
		}
		sh.mu.Unlock()
	}
	if len(marks) == 0 {
		return nil
	}
	found := make(map[string]*Host, len(marks))
	for chunk := range slices.Chunk(slices.Collect(maps.Keys(marks)), readBatch) {
		rows, err := v.facts.Hosts(ctx, "", chunk)
		if err != nil {
			return fmt.Errorf("read changed hosts: %w", err)
		}
		for i := range rows {
			found[rows[i].ID] = factsOf(&rows[i])
		}
	}
	for id, m := range marks {
		sh := v.shard(id)
		sh.mu.Lock()
		if sh.m[id] == m.e {
			h, e := found[id], m.e
			switch {
			case h == nil:
				delete(sh.m, id)
				if e.h != nil {
					v.project(e.h, nil)
				}
			case e.gen == m.gen:
				v.install(e, h, false)
			case e.stale || e.h == nil:
				// Changed again meanwhile: the projections get what
				// was read; the feed brings the change after it.
				v.install(e, h, true)
			}
			// Otherwise a call read it after the change: newer.
		}
		sh.mu.Unlock()
	}
	return nil
}

// refreshInstances reads the instances with the ids again and sets each
// on its host's record (a new record: see Host).
func (v *View) refreshInstances(ctx context.Context, ids []string) error {
	found := make(map[string]*eim.InstanceRow, len(ids))
	for chunk := range slices.Chunk(ids, readBatch) {
		rows, err := v.facts.Instances(ctx, chunk)
		if err != nil {
			return fmt.Errorf("read changed instances: %w", err)
		}
		for i := range rows {
			found[rows[i].ID] = &rows[i]
		}
	}
	for _, id := range ids {
		in := found[id]
		if prev, ok := v.insts[id]; ok && (in == nil || in.HostID != prev) {
			v.clearInstance(prev, id)
		}
		if in != nil {
			v.setInstance(in.HostID, instanceOf(in))
		}
	}
	return nil
}

// setInstance sets in on its host's record, and remembers its host.
func (v *View) setInstance(hostID string, in *Instance) {
	sh := v.shard(hostID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[hostID]
	if e != nil && e.h != nil {
		hostID = e.h.ID() // the record's copy, not the row's
	}
	v.insts[in.ID()] = hostID
	if e != nil && e.h != nil && (e.h.inst == nil || !e.h.inst.equal(in)) {
		old := e.h
		e.h = old.withInstance(in)
		v.project(old, e.h)
	}
}

// clearInstance takes instance id off its host's record.
func (v *View) clearInstance(hostID, id string) {
	delete(v.insts, id)
	sh := v.shard(hostID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[hostID]; e != nil && e.h != nil && e.h.inst != nil && e.h.inst.ID() == id {
		old := e.h
		e.h = old.withInstance(nil)
		v.project(old, e.h)
	}
}

func dedupe(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}
