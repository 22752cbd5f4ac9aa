// Package feed runs the loops of the modules that follow the change feed
// (see docs/architecture.md, "The change feed"): a module supplies what
// to do with a batch of events and how to re-list everything, and the
// Runner owns the rest — where to resume, the back-off when the store is
// away, the periodic re-list, batching the events that wait, the
// position a run-once consumer keeps in the store, the Live/Reset notion
// of a cache, and recovery from a handler's panic.
//
// Two kinds of consumers use it:
//
//   - A reconciler (the delete reaper, zero-touch provisioning, the OS
//     catalog, the per-host view) loses nothing: after a failure it
//     resumes after the last event it handled, and with Durable its
//     position is kept in the store, so that a restarted process, or
//     another replica taking the work over, resumes where the last one
//     stopped. A run that resumes first catches up with what it missed
//     (Store.Events, in batches) and only then is Live: what it keeps
//     lags the store by no more than the feed's latency while Live.
//   - A cache (Reset set) starts afresh: each (re)start of the feed
//     begins at the store's current revision and drops what the cache
//     held first; Live tells its readers whether the feed is followed,
//     that is whether a cached value may be used.
//
// Neither ever ends on a store failure: the store is EUNAVAILABLE while
// the database is away, and the runner retries with a growing pause (up
// to MaxWait) until it is back.
package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/metrics"
)

// Options configure a Runner. Store and Name are required, and at least
// one of Handle and Relist.
type Options struct {
	Store eim.Store
	// Name names the consumer in log messages and, with Durable, its
	// position in the store ("reaper", "oscatalog").
	Name   string
	Logger *slog.Logger

	// Kinds are the kinds of the events handled; none: every kind.
	Kinds []eim.Kind
	// Handle handles a batch of events, oldest first: the event that
	// arrived and those already waiting behind it, up to MaxBatch; the
	// slice is the runner's, not to be kept. nil: the feed is not
	// followed (a loop that only re-lists).
	//
	// An error, or a panic (logged with its stack), ends this run of the
	// feed as a store failure does: after a back-off the runner starts
	// again, and a reconciler is given the batch again (a cache starts
	// afresh). A handler returns an error only for what is worth handling
	// again; what it gives up on it logs itself and leaves to the re-list.
	Handle func(ctx context.Context, events []eim.Event) error
	// MaxBatch bounds a batch (default 100): the lists a handler makes of
	// a batch's IDs stay within what a statement takes.
	MaxBatch int

	// Relist reconciles everything (level-based): it makes up for a
	// wake-up missed and an action that failed. It is called once the
	// runner knows where it starts (so that nothing changed after the
	// re-list's reads is missed), after every restart of a cache's feed,
	// and every RelistEvery (0: only then). An error or a panic is
	// logged, and the call made again after a back-off. Relist and Handle
	// are never called at once.
	Relist      func(ctx context.Context) error
	RelistEvery time.Duration

	// Reset, when set, makes the runner a cache's: every (re)start of the
	// feed begins at the store's current revision, calling Reset first
	// (what the cache holds may predate changes the feed will not show);
	// Live is set once it returns.
	Reset func()
	// OnLive, when set, is called each time Live changes, with its new
	// value: a cache may keep aside what it may still serve while the
	// store is away, from the moment the feed is lost until it is live
	// again.
	OnLive func(live bool)

	// Durable keeps the consumer's position (the last revision handled)
	// in the store under Name, saved at most every SaveEvery (default
	// 5 s) and when Run ends; Run starts after it. Without a saved
	// position, or without Durable, Run starts at the store's current
	// revision: what came before is the re-list's.
	Durable   bool
	SaveEvery time.Duration

	// MinWait and MaxWait bound the pause after a failure (defaults 1 s
	// and 8 s): it doubles from MinWait with each failure in a row, plus
	// up to a fifth at random, so that replicas do not retry together.
	MinWait, MaxWait time.Duration

	// Metrics, when set, gets the runner's series, labelled with its
	// Name: eim_feed_lag_seconds, eim_feed_events_total, eim_feed_live.
	Metrics prometheus.Registerer
}

// Runner follows the change feed for one consumer. See the package
// documentation.
type Runner struct {
	o   Options
	log *slog.Logger

	live    atomic.Bool
	pos     atomic.Int64 // the last revision handled
	started atomic.Bool

	series Series
}

// Series are a consumer's change-feed series, children of families that
// every consumer of the process shares (labelled consumer). A module
// that follows the feed by itself (the exporter) uses them too.
type Series struct {
	lag, live prometheus.Gauge
	events    prometheus.Counter
}

// NewSeries returns the series of the consumer named consumer, on reg
// (nil: kept, not exposed).
func NewSeries(reg prometheus.Registerer, consumer string) Series {
	return Series{lag: lagVec(reg).WithLabelValues(consumer), live: liveVec(reg).WithLabelValues(consumer),
		events: eventsVec(reg).WithLabelValues(consumer)}
}

// Handled records a batch of events handled (oldest first): their count,
// and the lag of the newest.
func (s Series) Handled(evs []eim.Event) {
	if len(evs) == 0 {
		return
	}
	s.events.Add(float64(len(evs)))
	if t := evs[len(evs)-1].Time; !t.IsZero() {
		s.lag.Set(max(0, time.Since(t.Time).Seconds()))
	}
}

// CaughtUp records that no event waits: no lag.
func (s Series) CaughtUp() { s.lag.Set(0) }

// Live records whether the consumer follows the feed.
func (s Series) Live(live bool) {
	if live {
		s.live.Set(1)
	} else {
		s.live.Set(0)
	}
}

// The families of every consumer of a process.
func lagVec(reg prometheus.Registerer) *prometheus.GaugeVec {
	return metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eim_feed_lag_seconds",
		Help: "How far behind the change feed a consumer is: while events wait for it, from the commit of the newest event of its last batch to the end of that batch's handling; 0 when none waits."},
		[]string{"consumer"}))
}

func eventsVec(reg prometheus.Registerer) *prometheus.CounterVec {
	return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_feed_events_total",
		Help: "Change-feed events a consumer handled."}, []string{"consumer"}))
}

func liveVec(reg prometheus.Registerer) *prometheus.GaugeVec {
	return metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eim_feed_live",
		Help: "1 while a consumer follows the change feed (caught up after a resume); 0 while the store is away or it restarts."},
		[]string{"consumer"}))
}

// New returns a Runner. It panics when a required option is missing (a
// programming error).
func New(o Options) *Runner {
	if o.Store == nil || o.Name == "" || (o.Handle == nil && o.Relist == nil) {
		panic("feed.New: Store, Name and Handle or Relist are required")
	}
	if o.Reset != nil && o.Durable {
		panic("feed.New: a cache (Reset) starts afresh; Durable is for reconcilers")
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 100
	}
	if o.SaveEvery <= 0 {
		o.SaveEvery = 5 * time.Second
	}
	if o.MinWait <= 0 {
		o.MinWait = time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 8 * time.Second
	}
	o.MaxWait = max(o.MaxWait, o.MinWait)
	r := &Runner{o: o, log: o.Logger, series: NewSeries(o.Metrics, o.Name)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Live reports whether the feed is followed (and, after a resume, caught
// up with): for a cache, whether its values may be used.
func (r *Runner) Live() bool { return r.live.Load() }

// Position returns the revision of the last event handled (or where the
// runner started, when it handled none).
func (r *Runner) Position() int64 { return r.pos.Load() }

// Run follows the feed until ctx ends, and then returns nil. It may be
// called once.
func (r *Runner) Run(ctx context.Context) error {
	if r.started.Swap(true) {
		return fmt.Errorf("%s: Run called twice", r.o.Name)
	}
	s := &state{wait: backoff{min: r.o.MinWait, max: r.o.MaxWait}, relistWait: backoff{min: r.o.MinWait, max: r.o.MaxWait}}
	defer r.saveLast(ctx, s)
	for {
		err := r.run(ctx, s)
		if ctx.Err() != nil {
			return nil
		}
		pause := s.wait.next()
		r.log.Warn(r.o.Name+": change feed stopped; starting again", "err", err, "after", r.pos.Load(), "retry_in", pause.Round(time.Millisecond))
		if !sleep(ctx, pause) {
			return nil
		}
	}
}

// state is what outlives one run of the feed.
type state struct {
	positioned bool // pos is where to resume
	relisted   bool // the re-list at the start succeeded
	saved      int64
	savedOK    bool // saved holds what the store has
	wait       backoff
	relistWait backoff
	relistAt   time.Time // when the next re-list is due; zero: none
}

// run is one run of the feed: it finds where to start, then handles
// events and re-lists until the feed fails, a handler fails, or ctx ends.
func (r *Runner) run(ctx context.Context, s *state) error {
	cache := r.o.Reset != nil
	if r.o.Handle == nil {
		s.positioned = true // nothing to follow: no position
	}
	// A run that resumes (after a failure, or from a saved position) has
	// events to catch up on before it is Live.
	resumed := s.positioned && !cache
	if !s.positioned || cache {
		rev, saved, err := r.start(ctx)
		if err != nil {
			return err
		}
		resumed = saved
		r.pos.Store(rev)
		s.positioned = true
		s.wait.reset() // the store answers
		if cache {
			if err := r.call("reset", func() error { r.o.Reset(); return nil }); err != nil {
				return err
			}
			s.relisted = false
		}
	}
	if caught, err := r.catchUp(ctx, s, resumed); err != nil || !caught {
		return err
	}
	r.setLive(true)
	defer r.setLive(false)
	started := time.Now()
	defer func() {
		// A run that lasted is a success: the next failure waits little.
		if time.Since(started) > r.o.MaxWait {
			s.wait.reset()
		}
	}()
	if r.o.Relist != nil && !s.relisted {
		s.relistAt = time.Now()
	}

	var events chan item
	if r.o.Handle != nil {
		wctx, cancel := context.WithCancel(ctx)
		ch := make(chan item, r.o.MaxBatch) // events gather while a batch is handled
		var wg sync.WaitGroup
		wg.Go(func() { r.watch(wctx, r.pos.Load(), ch) })
		defer func() { cancel(); wg.Wait() }()
		events = ch
	}
	var save <-chan time.Time
	if r.o.Durable {
		t := time.NewTicker(r.o.SaveEvery)
		defer t.Stop()
		save = t.C
	}
	relist := time.NewTimer(time.Hour)
	defer relist.Stop()
	batch := make([]eim.Event, 0, r.o.MaxBatch)
	for {
		var relistC <-chan time.Time
		if !s.relistAt.IsZero() {
			d := time.Until(s.relistAt)
			if d <= 0 {
				r.relist(ctx, s)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue
			}
			relist.Reset(d)
			relistC = relist.C
		}
		if events != nil && len(events) == 0 {
			r.series.CaughtUp() // nothing waits
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-relistC:
		case <-save:
			r.save(ctx, s)
		case it := <-events:
			batch = batch[:0]
			for it.err == nil {
				batch = append(batch, it.ev)
				if len(batch) == r.o.MaxBatch {
					break
				}
				var ok bool
				select {
				case it, ok = <-events:
				default:
				}
				if !ok {
					break
				}
			}
			if len(batch) > 0 {
				if err := r.call("handle", func() error { return r.o.Handle(ctx, batch) }); err != nil {
					return err
				}
				r.handled(batch)
				s.wait.reset()
			}
			if it.err != nil {
				return it.err
			}
		}
	}
}

// start returns where a run starts: a reconciler's saved position (saved
// is then true), or the store's current revision.
func (r *Runner) start(ctx context.Context) (rev int64, saved bool, err error) {
	rev, err = r.o.Store.Revision(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read the revision: %w", err)
	}
	if !r.o.Durable {
		return rev, false, nil
	}
	pos, ok, err := r.o.Store.FeedPosition(ctx, r.o.Name)
	if err != nil {
		return 0, false, fmt.Errorf("read the saved position: %w", err)
	}
	switch {
	case !ok:
		return rev, false, nil
	case pos > rev:
		// The database is older than the position (restored from a
		// backup): what it has after its revision is new to us.
		r.log.Warn(r.o.Name+": the saved feed position is ahead of the database; starting at the database's revision", "saved", pos, "revision", rev)
		return rev, false, nil
	}
	r.log.Info(r.o.Name+": resuming the change feed", "after", pos, "behind", rev-pos)
	return pos, true, nil
}

// catchUp handles, in batches, the events a resumed run missed, up to
// the revision committed when it reads the last batch: until then the
// consumer is not Live. It reports false when ctx ended.
func (r *Runner) catchUp(ctx context.Context, s *state, resumed bool) (bool, error) {
	if !resumed || r.o.Handle == nil {
		return true, nil
	}
	for {
		evs, err := r.o.Store.Events(ctx, r.pos.Load(), r.o.MaxBatch, r.o.Kinds...)
		if err != nil {
			return false, err
		}
		if len(evs) > 0 {
			if err := r.call("handle", func() error { return r.o.Handle(ctx, evs) }); err != nil {
				return false, err
			}
			r.handled(evs)
			s.wait.reset()
		}
		if len(evs) < r.o.MaxBatch {
			s.wait.reset() // the store answers
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
	}
}

// handled records a batch handled: the position, and the series.
func (r *Runner) handled(evs []eim.Event) {
	r.pos.Store(evs[len(evs)-1].Revision)
	r.series.Handled(evs)
}

// setLive sets Live and tells OnLive.
func (r *Runner) setLive(live bool) {
	r.series.Live(live)
	if r.live.Swap(live) != live && r.o.OnLive != nil {
		r.call("OnLive", func() error { r.o.OnLive(live); return nil })
	}
}

// relist calls Relist and schedules the next call.
func (r *Runner) relist(ctx context.Context, s *state) {
	err := r.call("re-list", func() error { return r.o.Relist(ctx) })
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		pause := s.relistWait.next()
		if r.o.RelistEvery > 0 {
			pause = min(pause, r.o.RelistEvery)
		}
		r.log.Warn(r.o.Name+": re-list failed", "err", err, "retry_in", pause.Round(time.Millisecond))
		s.relistAt = time.Now().Add(pause)
		return
	}
	s.relisted = true
	s.relistWait.reset()
	s.relistAt = time.Time{}
	if r.o.RelistEvery > 0 {
		s.relistAt = time.Now().Add(r.o.RelistEvery)
	}
}

type item struct {
	ev  eim.Event
	err error
}

// watch sends the feed's events after rev to ch, and the error that ends
// it, until ctx ends.
func (r *Runner) watch(ctx context.Context, rev int64, ch chan<- item) {
	for ev, err := range r.o.Store.Watch(ctx, rev, r.o.Kinds...) {
		select {
		case ch <- item{ev, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// errPanic marks a recovered panic.
var errPanic = errors.New("panic")

// call runs fn, turning a panic into an error (logged with its stack).
func (r *Runner) call(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error(r.o.Name+": panic in "+what, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w in %s: %v", errPanic, what, p)
		}
	}()
	return fn()
}

// save records the position when it moved.
func (r *Runner) save(ctx context.Context, s *state) {
	pos := r.pos.Load()
	if !s.positioned || (s.savedOK && pos <= s.saved) {
		return
	}
	if err := r.o.Store.SaveFeedPosition(ctx, r.o.Name, pos); err != nil {
		if ctx.Err() == nil {
			r.log.Warn(r.o.Name+": could not save the feed position; trying again later", "err", err, "position", pos)
		}
		return
	}
	s.saved, s.savedOK = pos, true
}

// saveLast saves the position when Run ends, with a few seconds of its
// own: a clean stop then loses nothing of what was handled.
func (r *Runner) saveLast(ctx context.Context, s *state) {
	if !r.o.Durable {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r.save(sctx, s)
}

// backoff is a pause that doubles from min to max with each failure in a
// row.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur + rand.N(b.cur/5+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d, or until ctx ends (it then reports false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
