package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/eimhq/eim"
)

// BatcherOptions configure a Batcher. Zero values select defaults.
type BatcherOptions struct {
	// MaxBatch is the most calls one transaction runs (default 128).
	MaxBatch int
	// Workers is how many batches may run at once. The default follows
	// the store's capabilities: one for a store with one writer (SQLite);
	// two for one with concurrent writers (PostgreSQL), where every
	// statement is a round trip and batches in flight together hide it
	// while each still amortizes its commit: with batches written grouped
	// and a worker free at its commit, 10,000 nodes' Day 0 took 83 s with
	// one worker, 60 s with two and 70 s with eight (BENCHMARKS.md).
	// Calls that are mostly creates, written together by a batch
	// (GroupedCreates), gain from large batches: one worker suits them
	// (32 API clients' creates went from 1,739/s with 4 workers to
	// 2,228/s with one).
	Workers int
	Logger  *slog.Logger
}

// Batcher coalesces concurrent small writes into one store transaction
// (group commit): thousands of nodes reporting at once then cost one commit
// per batch instead of one each, which is what bounds write throughput on
// both engines (an fsync on SQLite, a WAL flush and round trips on
// PostgreSQL).
//
// The calls of a batch run one after the other in one unscoped
// transaction, so each sees the writes of those before it, as if they had
// run serially. When a call fails, the transaction is rolled back and the
// batch re-run without it; the failed call is then run again alone, and the
// error of that solo run is what its caller gets: a call is never blamed
// for another's failure (on PostgreSQL a statement failure swallowed by one
// call aborts the transaction for every later call). Calls must therefore
// be re-runnable: read what they need inside the transaction and keep no
// effects outside it until Do returns.
type Batcher struct {
	store    eim.Store
	maxBatch int
	workers  int
	log      *slog.Logger

	ctx    context.Context // the transactions' context; cancelled by Close
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	queue  []*call
	closed bool
	wake   chan struct{} // capacity 1: the queue became non-empty

	batches, calls, reruns atomic.Int64
	// pending counts the committed batches whose callers wait for their
	// events to be in the feed.
	pending sync.WaitGroup
}

// call is one Do waiting for its outcome.
type call struct {
	project string
	fn      func(eim.Tx) error
	state   atomic.Int32 // callQueued, callTaken or callAbandoned
	err     error        // set before done is closed
	done    chan struct{}
}

const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

// ErrBatcherClosed is returned by Do after Close.
var ErrBatcherClosed = eim.Errorf(eim.EUNAVAILABLE, "the server is shutting down")

// NewBatcher starts a batcher over store; Close stops it.
func NewBatcher(store eim.Store, opts BatcherOptions) *Batcher {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 128
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
		if store.Capabilities().ConcurrentWriters {
			opts.Workers = 2
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Batcher{store: store, maxBatch: opts.MaxBatch, workers: opts.Workers, log: opts.Logger, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	// The workers start here, not in loop, so that they exist when
	// NewBatcher returns (goroutine-leak checks snapshot right after).
	var wg sync.WaitGroup
	for range b.workers {
		wg.Go(b.work)
	}
	go b.loop(&wg)
	return b
}

// Do runs fn in a read-write transaction over all projects, together with
// other concurrent calls, and returns fn's error (nil once the transaction
// that ran it committed). When ctx ends before fn's batch starts, fn does
// not run and Do returns ctx's error; once started, Do waits for the
// outcome.
func (b *Batcher) Do(ctx context.Context, fn func(tx eim.Tx) error) error {
	return b.DoIn(ctx, "", fn)
}

// DoIn is Do in a transaction scoped to project (see eim.Store.Update):
// only calls of the same project share a transaction, so tenant isolation
// holds inside a batch as it does for a lone write. The API's writes use it.
func (b *Batcher) DoIn(ctx context.Context, project string, fn func(tx eim.Tx) error) error {
	c := &call{project: project, fn: fn, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrBatcherClosed
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callAbandoned) {
			return ctx.Err()
		}
		<-c.done
		return c.err
	}
}

// Close stops the batcher: calls not yet started fail with
// ErrBatcherClosed, a running batch is cancelled, and Close returns when
// the batcher's goroutine has ended.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	<-b.done
}

// BatcherStats count a batcher's work since it started.
type BatcherStats struct {
	Batches int64 // transactions that committed a batch
	Calls   int64 // calls that finished (successfully or not)
	Reruns  int64 // batches re-run after a failed call
	Queued  int   // calls waiting now
}

// Stats returns the counters.
func (b *Batcher) Stats() BatcherStats {
	b.mu.Lock()
	q := len(b.queue)
	b.mu.Unlock()
	return BatcherStats{Batches: b.batches.Load(), Calls: b.calls.Load(), Reruns: b.reruns.Load(), Queued: q}
}

// loop waits for the workers to end (Close) and fails the calls left.
func (b *Batcher) loop(wg *sync.WaitGroup) {
	defer close(b.done)
	wg.Wait()
	b.pending.Wait()
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, c := range q {
		b.finish(c, ErrBatcherClosed)
	}
}

// work runs batches until Close.
func (b *Batcher) work() {
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.wake:
		}
		for {
			batch, more := b.take()
			if len(batch) == 0 {
				break
			}
			if more {
				// Another worker can start on the rest meanwhile.
				select {
				case b.wake <- struct{}{}:
				default:
				}
			}
			b.run(batch)
		}
	}
}

// take removes up to maxBatch live calls of one project from the queue:
// the project of the oldest live call. Calls of other projects keep their
// order and go in a later batch.
func (b *Batcher) take() (batch []*call, more bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		out  []*call
		rest = b.queue[:0:0]
		proj string
	)
	for i, c := range b.queue {
		if len(out) == b.maxBatch {
			rest = append(rest, b.queue[i:]...)
			break
		}
		if len(out) > 0 && c.project != proj {
			if c.state.Load() == callQueued {
				rest = append(rest, c)
			}
			continue
		}
		if c.state.CompareAndSwap(callQueued, callTaken) {
			proj = c.project
			out = append(out, c)
		}
	}
	b.queue = rest
	return out, len(rest) > 0
}

// run commits batch, taking failed calls out and running them alone.
func (b *Batcher) run(batch []*call) {
	var suspects []*call
	for len(batch) > 0 {
		failed := -1
		var failErr error
		fn := func(tx eim.Tx) error {
			for i, c := range batch {
				if err := b.invoke(c, tx); err != nil {
					failed, failErr = i, err
					return err
				}
			}
			return nil
		}
		var (
			sequenced func()
			err       error
		)
		// A batch of more than one call holds its creates back, where the
		// store can (eim.Capabilities.GroupedCreates): a failure of those
		// writes fails the batch as a whole, and its calls are then run
		// one by one, each with its own errors.
		if len(batch) > 1 {
			sequenced, err = b.store.UpdateGrouped(b.ctx, batch[0].project, fn)
		} else {
			err = b.store.Update(b.ctx, batch[0].project, fn)
		}
		if err == nil {
			b.batches.Add(1)
			if sequenced == nil {
				for _, c := range batch {
					b.finish(c, nil)
				}
				break
			}
			// Committed: the worker may start the next batch while this
			// one's events are numbered; its callers learn they are done
			// once they are in the feed, as after a plain Update.
			b.pending.Add(1)
			go func() {
				defer b.pending.Done()
				sequenced()
				for _, c := range batch {
					b.finish(c, nil)
				}
			}()
			break
		}
		if b.ctx.Err() != nil {
			for _, c := range batch {
				b.finish(c, closedErr(err))
			}
			break
		}
		if failed < 0 {
			// Not attributable to one call (commit failure, a call that
			// swallowed a failed statement, cancellation): run each alone.
			if len(batch) == 1 {
				b.finish(batch[0], err)
				break
			}
			b.log.Warn("batch failed; running its calls one by one", "calls", len(batch), "err", err)
			suspects = append(suspects, batch...)
			break
		}
		b.reruns.Add(1)
		if len(batch) == 1 {
			// Alone, so the error is its own.
			b.finish(batch[0], failErr)
			break
		}
		suspects = append(suspects, batch[failed])
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
	for _, c := range suspects {
		b.solo(c)
	}
}

// solo runs one call in its own transaction; its error is its own.
func (b *Batcher) solo(c *call) {
	err := b.store.Update(b.ctx, c.project, func(tx eim.Tx) error { return b.invoke(c, tx) })
	switch {
	case err == nil:
		b.batches.Add(1)
	case b.ctx.Err() != nil:
		err = closedErr(err)
	}
	b.finish(c, err)
}

// invoke runs a call's fn, turning a panic into an error of that call.
func (b *Batcher) invoke(c *call, tx eim.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("panic in a batched write", "panic", r, "stack", string(debug.Stack()))
			err = eim.Errorf(eim.EINTERNAL, "internal error")
		}
	}()
	return c.fn(tx)
}

// closedErr is the error of a call cut short by Close.
func closedErr(err error) error {
	if errors.Is(err, ErrBatcherClosed) {
		return err
	}
	return fmt.Errorf("%w (%v)", ErrBatcherClosed, err)
}

func (b *Batcher) finish(c *call, err error) {
	c.err = err
	b.calls.Add(1)
	close(c.done)
}
