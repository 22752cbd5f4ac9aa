// Package coord coordinates the server processes that share one database:
// work that must run in one process at a time (a Singleton, held through a
// database lease), the processes that are running (Announce, Members), and
// work divided among them (Shards).
//
// Leases live in the database (eim.Store's Claim and Release), whose clock
// decides when they expire, so the processes' clocks need not agree. A
// holder renews its lease every third of its TTL; a process that dies
// stops renewing, and its lease is taken by another after at most one TTL
// and that one's next claim. A store that is away is waited for, never
// fatal: work whose lease cannot be renewed in time is stopped before the
// lease can expire, so two processes never run it at once.
package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/metrics"
)

// Options configure the coordination of one process.
type Options struct {
	Store eim.Store
	// Holder names this process in leases and memberships: unique among
	// the processes sharing the database (the server's --replica-id).
	Holder string
	// TTL is how long a lease or membership lasts unless renewed (default
	// DefaultTTL); it is renewed every TTL/3. A process that dies leaves
	// its work to another within about one TTL.
	TTL    time.Duration
	Logger *slog.Logger
	// Held, when set, is called when this process takes (true) or loses
	// (false) a lease: for metrics and the process's status. It must not
	// block.
	Held func(name string, held bool)
	// Metrics, when set, gets eim_leases_held: the leases this process
	// holds, by lease (a run-once loop's name; the prefix of a set of
	// shards).
	Metrics prometheus.Registerer

	leases *prometheus.GaugeVec // set by check
}

// DefaultTTL is the default of Options.TTL.
const DefaultTTL = 10 * time.Second

// check validates o and fills in its defaults.
func (o Options) check() (Options, error) {
	if o.Store == nil {
		return o, eim.Errorf(eim.EINVALID, "coord: Options.Store is required")
	}
	if o.Holder == "" {
		return o, eim.Errorf(eim.EINVALID, "coord: Options.Holder is required")
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < 3*time.Millisecond {
		return o, eim.Errorf(eim.EINVALID, "coord: Options.TTL %v is too short", o.TTL)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Held == nil {
		o.Held = func(string, bool) {}
	}
	o.leases = metrics.Register(o.Metrics, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eim_leases_held",
		Help: "Leases this process holds, by lease: a run-once loop's (\"loop/<module>/<name>\", 0 or 1) or a set of shards' (\"host/shard\", how many)."},
		[]string{"lease"}))
	return o, nil
}

// took records that this process took (held) or lost the lease name,
// counted under label.
func (o Options) took(label, name string, held bool) {
	o.Held(name, held)
	if held {
		o.leases.WithLabelValues(label).Inc()
	} else {
		o.leases.WithLabelValues(label).Dec()
	}
}

// tick is the renewal period.
func (o Options) tick() time.Duration { return o.TTL / 3 }

// Singleton runs fn while this process holds the lease name, until ctx
// ends; it returns nil then, or an error at once when o is not valid.
//
// The lease is claimed every TTL/3 until it is held, then renewed as
// often. While it is held fn runs; when fn returns (an error, a panic,
// which is recovered, or nil before its context ended) it is logged and
// run again after a back-off, as long as the lease is held. When a
// renewal finds the lease taken, or the store has not answered for so
// long that the lease may expire before the next renewal, fn's context is
// cancelled; once fn has returned, Singleton goes back to claiming. fn
// must therefore stop promptly when its context ends. When ctx ends, fn is
// stopped and waited for, and the lease released, so that another process
// takes the work over at once.
func Singleton(ctx context.Context, o Options, name string, fn func(context.Context) error) error {
	o, err := o.check()
	if err != nil {
		return err
	}
	if name == "" {
		return eim.Errorf(eim.EINVALID, "coord: a lease name is required")
	}
	l := &lease{o: o, name: name}
	for ctx.Err() == nil {
		if !l.claim(ctx) {
			if !sleep(ctx, o.tick()) {
				break
			}
			continue
		}
		o.Logger.Info("coord: took the lease", "lease", name, "holder", o.Holder)
		o.took(name, name, true)
		l.hold(ctx, fn)
		o.took(name, name, false)
		if ctx.Err() == nil {
			o.Logger.Warn("coord: lost the lease; its work is stopped", "lease", name, "holder", o.Holder)
		}
	}
	if l.until.IsZero() {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := o.Store.Release(rctx, name, o.Holder); err != nil {
		// It expires by itself.
		o.Logger.Warn("coord: could not release the lease", "lease", name, "err", err)
	}
	return nil
}

// releaseTimeout bounds the release at shutdown.
const releaseTimeout = 5 * time.Second

// lease is one lease as its holder sees it.
type lease struct {
	o    Options
	name string
	// until is a time (this process's monotonic clock) before which the
	// lease is surely held: when the last successful claim was sent, plus
	// the TTL. Zero when it is not held.
	until  time.Time
	failed bool  // the last claim failed (logged once per outage)
	quiet  bool  // its owner logs failures (Shards)
	err    error // of the last claim
	// margin is how much later than a tick the next renewal may come
	// (Shards: the last round's length).
	margin time.Duration
}

// claim claims or renews the lease and reports whether it is held now.
func (l *lease) claim(ctx context.Context) bool {
	sent := time.Now()
	cctx, cancel := context.WithTimeout(ctx, l.o.tick())
	held, err := l.o.Store.Claim(cctx, l.name, l.o.Holder, l.o.TTL)
	cancel()
	return l.result(ctx, sent, held, err)
}

// result records the answer to a claim sent at sent. A failed call keeps
// a held lease while it surely has not expired and the next renewal can
// come before it does.
func (l *lease) result(ctx context.Context, sent time.Time, held bool, err error) bool {
	l.err = err
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		if !l.failed && !l.quiet {
			l.o.Logger.Warn("coord: cannot claim the lease; retrying", "lease", l.name, "err", err, "retry_in", l.o.tick())
		}
		l.failed = true
		if !l.until.IsZero() && time.Now().Add(l.o.tick()+l.margin).Before(l.until) {
			return true
		}
		l.until = time.Time{}
		return false
	}
	if l.failed && !l.quiet {
		l.o.Logger.Info("coord: the store answers claims again", "lease", l.name, "held", held)
	}
	l.failed = false
	if !held {
		l.until = time.Time{}
		return false
	}
	l.until = sent.Add(l.o.TTL)
	return true
}

// hold runs fn and renews the lease until the lease is lost or ctx ends;
// it returns once fn has returned.
func (l *lease) hold(ctx context.Context, fn func(context.Context) error) {
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.runFn(fctx, fn)
	}()
	t := time.NewTicker(l.o.tick())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-t.C:
			if l.claim(ctx) {
				continue
			}
		}
		stop()
		<-done
		return
	}
}

// runFn runs fn until ctx ends, again after a back-off whenever it
// returns early.
func (l *lease) runFn(ctx context.Context, fn func(context.Context) error) {
	base := min(time.Second, l.o.tick())
	backoff := base
	for {
		start := time.Now()
		err := safe(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxBackoff {
			backoff = base
		}
		if err == nil {
			err = errors.New("returned before its context ended")
		}
		l.o.Logger.Error("coord: the lease's work failed; running it again", "lease", l.name, "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// maxBackoff bounds the pause between runs of a failing fn.
const maxBackoff = 30 * time.Second

// safe runs fn, turning a panic into an error.
func safe(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx)
}

// Join announces this process once, for the deployment to see it before it
// serves anything (Announce then keeps it announced): a process that
// answers ready is in the others' view at their next read.
func Join(ctx context.Context, o Options, modules []string) error {
	o, err := o.check()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, o.tick())
	defer cancel()
	return o.Store.Announce(cctx, eim.Member{ID: o.Holder, Modules: slices.Clone(modules), Started: eim.NewTime(time.Now())}, o.TTL)
}

// Announce records this process as a running member with its modules,
// renews the record every TTL/3 until ctx ends, and then removes it. A
// store that is away is retried. It returns nil when ctx ends, or an
// error at once when o is not valid.
func Announce(ctx context.Context, o Options, modules []string) error {
	o, err := o.check()
	if err != nil {
		return err
	}
	m := eim.Member{ID: o.Holder, Modules: slices.Clone(modules), Started: eim.NewTime(time.Now())}
	failed := false
	for {
		cctx, cancel := context.WithTimeout(ctx, o.tick())
		err := o.Store.Announce(cctx, m, o.TTL)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil && !failed:
			failed = true
			o.Logger.Warn("coord: cannot announce this process; retrying", "member", o.Holder, "err", err, "retry_in", o.tick())
		case err == nil && failed:
			failed = false
			o.Logger.Info("coord: announced this process again", "member", o.Holder)
		}
		if !sleep(ctx, o.tick()) {
			break
		}
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := o.Store.Leave(lctx, o.Holder); err != nil {
		o.Logger.Warn("coord: could not remove this process's membership (it expires by itself)", "member", o.Holder, "err", err)
	}
	return nil
}

// Members returns the IDs of the live members that run module, sorted.
func Members(ctx context.Context, st eim.Store, module string) ([]string, error) {
	ms, err := st.Members(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if slices.Contains(m.Modules, module) {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// sleep waits d, or until ctx ends (then it reports false).
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
