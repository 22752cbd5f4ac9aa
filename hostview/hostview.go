// Package hostview is the per-host view that the modules answering nodes
// share: what one process knows of each host's row — its project, site,
// states, status, power and node credentials — read once and kept current
// by the change feed and by this process's own commits. Node
// authentication (southbound), the host module, telemetry and
// maintenance read it, so that a process reads and follows a host once,
// not once per module, and a node's call costs no database access while
// its host is unchanged.
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
// Modules keep what they compute from a host on its Host value (Memo):
// a Host is never changed, a change makes a new one, so a memo cannot
// outlive the facts it came from. Modules that keep more per host than
// that (the host module's liveness) hear of changes through OnChange.
package hostview

import (
	"context"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// Host is what the view holds of one host: the fields of its row that
// the modules answering nodes read. It is never changed once returned.
type Host struct {
	ID, Project  string
	SiteID       string
	DesiredState eim.HostState
	CurrentState eim.HostState
	// The host module's: the status it shows, the hardware digest and
	// the node's boot it keeps, and the power fields its in-band actions
	// follow.
	HostStatus           string
	HostStatusIndicator  eim.StatusIndication
	HardwareDigest       string
	BootID               string
	BmcKind              eim.BaremetalControllerKind
	DesiredPowerState    eim.PowerState
	CurrentPowerState    eim.PowerState
	PowerStatus          string
	PowerStatusTimestamp uint64
	// Node authentication's.
	NodeSecretHash string
	NodeCredGen    int64

	memo [maxSlots]atomic.Value
}

// factsOf returns what the view keeps of a host row.
func factsOf(h *eim.Host) *Host {
	return &Host{
		ID: h.ResourceID, Project: h.Project, SiteID: h.SiteID,
		DesiredState: h.DesiredState, CurrentState: h.CurrentState,
		HostStatus: h.HostStatus, HostStatusIndicator: h.HostStatusIndicator, HardwareDigest: h.HardwareDigest,
		BootID: h.BootID, BmcKind: h.BmcKind, DesiredPowerState: h.DesiredPowerState, CurrentPowerState: h.CurrentPowerState,
		PowerStatus: h.PowerStatus, PowerStatusTimestamp: h.PowerStatusTimestamp,
		NodeSecretHash: h.NodeSecretHash, NodeCredGen: h.NodeCredGen,
	}
}

// Credentials returns what decides whether the host's node may
// authenticate.
func (h *Host) Credentials() eim.NodeCredentials {
	return eim.NodeCredentials{HostID: h.ID, Project: h.Project, DesiredState: h.DesiredState, SecretHash: h.NodeSecretHash, Gen: h.NodeCredGen}
}

// Slot names one module's memo on a Host (NewSlot).
type Slot int

// maxSlots bounds the modules that keep a memo on hosts.
const maxSlots = 4

// Memo returns what the module of slot s kept on h (nil: nothing).
func (h *Host) Memo(s Slot) any { return h.memo[s].Load() }

// SetMemo keeps v on h for the module of slot s. Every call of a slot
// must keep values of the same type.
func (h *Host) SetMemo(s Slot, v any) { h.memo[s].Store(v) }

// Options configure a View. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	Now    func() time.Time
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
}

// View is the per-host view. Its methods work before Run is called, but
// keep nothing until Run follows the feed.
type View struct {
	store eim.Store
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
}

// shardCount spreads the entries over locks: every southbound call and
// heartbeat looks a host up, from as many goroutines as there are calls.
const shardCount = 32

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

// entry is one host's place in the view; it stays when the host is
// dropped (h nil), so that a read begun before a change or a delete
// cannot bring the old row back.
type entry struct {
	h   *Host
	gen uint64 // bumped by every drop
}

// New returns a View of the store, and hooks it to the store's commits.
func New(o Options) *View {
	if o.Store == nil {
		panic("hostview.New: Store is required")
	}
	v := &View{store: o.Store, log: o.Logger, now: o.Now, seed: maphash.MakeSeed()}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.now == nil {
		v.now = time.Now
	}
	for i := range v.shards {
		v.shards[i].m = map[string]*entry{}
	}
	v.feed = feed.New(feed.Options{Store: o.Store, Name: "host view", Logger: v.log, Metrics: o.Metrics, Kinds: []eim.Kind{eim.KindHost},
		Handle: func(_ context.Context, evs []eim.Event) error {
			v.changed(evs)
			return nil
		},
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
func (v *View) Run(ctx context.Context) error { return v.feed.Run(ctx) }

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
	if e != nil && e.h != nil {
		h := e.h
		sh.mu.Unlock()
		if project != "" && h.Project != project {
			return nil, notFound(id)
		}
		return h, nil
	}
	if e == nil {
		e = &entry{}
		sh.m[id] = e
	}
	gen := e.gen
	sh.mu.Unlock()

	h, err := v.read(ctx, project, id)
	if err != nil {
		return nil, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] == e && e.gen == gen && v.feed.Live() {
		if e.h != nil {
			// Filled meanwhile (read ahead), from the same state: one
			// Host value per state, so that memos are shared.
			return e.h, nil
		}
		e.h = h
	}
	return h, nil
}

func notFound(id string) error { return eim.Errorf(eim.ENOTFOUND, "host %s not found", id) }

// read reads host id from the store.
func (v *View) read(ctx context.Context, project, id string) (*Host, error) {
	var h *Host
	err := v.store.View(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		h = factsOf(r.(*eim.Host))
		return nil
	})
	return h, err
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
	if e := sh.m[id]; e != nil && e.h != nil {
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
			e.h, e.gen = nil, e.gen+1
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
// how often a page is read before it is left to the hosts' reads (a page
// read while a host changed is not kept).
const (
	primePage  = 2000
	primeTries = 3
)

// prime reads every host, of every project, into the view, in pages. It
// stops when ctx ends or a read fails (the calls then read what is
// missing), and returns nil: it is not tried again.
func (v *View) prime(ctx context.Context) error {
	start := time.Now()
	after, n, skipped := "", 0, 0
	for {
		q := eim.Query{OrderBy: "resourceId", Limit: primePage, NoTotal: true}
		if after != "" {
			q.Filter = `resourceId > "` + after + `"`
		}
		var page []eim.Resource
		kept := false
		for range primeTries {
			mark := v.changes.Load()
			err := v.store.View(ctx, "", func(tx eim.Tx) error {
				var err error
				page, _, err = tx.List(ctx, eim.KindHost, q)
				return err
			})
			if err != nil {
				if ctx.Err() == nil {
					v.log.Warn("host view: could not read the hosts ahead; calls will read their hosts", "err", err)
				}
				return nil
			}
			if kept = v.fill(mark, page); kept {
				break
			}
		}
		if kept {
			n += len(page)
		} else {
			skipped += len(page)
		}
		if len(page) < primePage {
			break
		}
		after = page[len(page)-1].Base().ResourceID
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
func (v *View) fill(mark uint64, page []eim.Resource) bool {
	for _, r := range page {
		h := factsOf(r.(*eim.Host))
		sh := v.shard(h.ID)
		sh.mu.Lock()
		if v.changes.Load() != mark {
			sh.mu.Unlock()
			return false
		}
		e := sh.m[h.ID]
		if e == nil {
			e = &entry{}
			sh.m[h.ID] = e
		}
		if e.h == nil {
			e.h = h
		}
		sh.mu.Unlock()
	}
	return true
}
