package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"go.uber.org/goleak"
)

// batcherEnv is a batcher over a fresh store and project.
type batcherEnv struct {
	*env
	b *inventory.Batcher
}

func runBatcher(t *testing.T, f func(t *testing.T, e *batcherEnv)) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run(t, func(t *testing.T, e *env) {
		// One worker on either engine: the tests hold it to queue calls.
		b := inventory.NewBatcher(e.store, inventory.BatcherOptions{MaxBatch: 128, Workers: 1})
		t.Cleanup(b.Close)
		f(t, &batcherEnv{env: e, b: b})
	})
}

// createHost returns a batched call that creates a host in the project.
func (e *batcherEnv) createHost(name, uuid string) func(eim.Tx) error {
	return func(tx eim.Tx) error {
		return tx.Create(e.ctx, &eim.Host{Meta: eim.Meta{Project: e.proj}, Name: name, UUID: uuid})
	}
}

// hostNames returns the names of the project's hosts.
func (e *batcherEnv) hostNames() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	noErr(e.t, e.store.View(e.ctx, e.proj, func(tx eim.Tx) error {
		items, _, err := tx.List(e.ctx, eim.KindHost, eim.Query{})
		for _, r := range items {
			out[r.(*eim.Host).Name] = true
		}
		return err
	}))
	return out
}

// hold blocks the batcher in a call until the returned release is called,
// so that the calls made meanwhile queue up and form the next batch.
func (e *batcherEnv) hold() (release func(), errc <-chan error) {
	e.t.Helper()
	gate, started := make(chan struct{}), make(chan struct{})
	ec := make(chan error, 1)
	go func() {
		ec <- e.b.Do(e.ctx, func(eim.Tx) error {
			select {
			case <-started:
			default:
				close(started)
			}
			<-gate
			return nil
		})
	}()
	<-started
	return func() { close(gate) }, ec
}

// async starts a Do and waits until it is queued (n calls waiting).
func (e *batcherEnv) async(ctx context.Context, n int, fn func(eim.Tx) error) <-chan error {
	e.t.Helper()
	ec := make(chan error, 1)
	go func() { ec <- e.b.Do(ctx, fn) }()
	waitFor(e.t, func() bool { return e.b.Stats().Queued == n })
	return ec
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBatcherConcurrentCalls(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		const n = 200
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = e.b.Do(e.ctx, e.createHost(fmt.Sprint("h", i), "")) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		names := e.hostNames()
		if len(names) != n {
			t.Fatalf("hosts: got %d, want %d", len(names), n)
		}
		if st := e.b.Stats(); st.Calls != n || st.Batches < 1 || st.Batches > n {
			t.Fatalf("stats: got %+v, want %d calls in 1..%d batches", st, n, n)
		}
	})
}

// Calls queued together run in one transaction; a failing call (its own
// error, a uniqueness conflict with an earlier call of the batch, a
// panic) gets its error while the others commit.
func TestBatcherFailingCallsAreIsolated(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		release, held := e.hold()
		uuid := "11111111-2222-4333-8444-555555555555"
		errOwn := eim.Errorf(eim.EPRECONDITION, "refused by the call")
		a := e.async(e.ctx, 1, e.createHost("a", uuid))
		b := e.async(e.ctx, 2, func(tx eim.Tx) error {
			if err := e.createHost("b", "")(tx); err != nil {
				return err
			}
			return errOwn // after writing: the write must not commit
		})
		c := e.async(e.ctx, 3, e.createHost("c", uuid))
		d := e.async(e.ctx, 4, func(eim.Tx) error { panic("boom") })
		f := e.async(e.ctx, 5, e.createHost("f", ""))
		batchesBefore := e.b.Stats().Batches
		release()
		noErr(t, <-held)
		noErr(t, <-a)
		if err := <-b; !errors.Is(err, errOwn) {
			t.Errorf("b: got %v, want its own error", err)
		}
		if err := <-c; eim.ErrorCode(err) != eim.ECONFLICT {
			t.Errorf("c: got %v, want a conflict", err)
		}
		if err := <-d; eim.ErrorCode(err) != eim.EINTERNAL {
			t.Errorf("d (panics): got %v, want internal", err)
		}
		noErr(t, <-f)
		names := e.hostNames()
		if !names["a"] || !names["f"] || names["b"] || names["c"] || len(names) != 2 {
			t.Errorf("hosts: got %v, want a and f", names)
		}
		st := e.b.Stats()
		// The good calls committed together: the held call's batch, then
		// one batch with a and f after three re-runs. A store that writes
		// a batch's creates together (PostgreSQL) finds c's conflict at
		// the commit of a, c and f, which then run alone: two re-runs (b
		// and d), and a and f commit on their own.
		wantBatches, wantReruns := int64(2), int64(3)
		if e.store.Capabilities().GroupedCreates {
			wantBatches, wantReruns = 3, 2
		}
		if st.Batches-batchesBefore != wantBatches || st.Reruns != wantReruns {
			t.Errorf("stats: got %+v, want %d committed batches (from %d) and %d re-runs", st, wantBatches, batchesBefore, wantReruns)
		}
	})
}

// A call that swallows a failed statement poisons the transaction (on
// PostgreSQL every later statement fails): the batch is re-run so that
// innocent calls commit and only the culprit fails.
func TestBatcherSwallowedFailure(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		uuid := "21111111-2222-4333-8444-555555555555"
		noErr(t, e.b.Do(e.ctx, e.createHost("first", uuid)))
		release, held := e.hold()
		culprit := e.async(e.ctx, 1, func(tx eim.Tx) error {
			_ = e.createHost("dup", uuid)(tx) // ECONFLICT, ignored
			return nil
		})
		innocent := e.async(e.ctx, 2, e.createHost("innocent", ""))
		release()
		noErr(t, <-held)
		if err := <-culprit; err == nil {
			t.Error("culprit: got nil, want the swallowed statement's error")
		}
		noErr(t, <-innocent)
		if names := e.hostNames(); !names["innocent"] || names["dup"] {
			t.Errorf("hosts: got %v, want innocent and not dup", names)
		}
	})
}

// A call whose context ends while it waits does not run.
func TestBatcherAbandonedCall(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		release, held := e.hold()
		ctx, cancel := context.WithCancel(e.ctx)
		ran := false
		ec := e.async(ctx, 1, func(eim.Tx) error { ran = true; return nil })
		cancel()
		if err := <-ec; !errors.Is(err, context.Canceled) {
			t.Errorf("abandoned call: got %v, want context.Canceled", err)
		}
		release()
		noErr(t, <-held)
		noErr(t, e.b.Do(e.ctx, func(eim.Tx) error { return nil }))
		if ran {
			t.Error("an abandoned call ran")
		}
	})
}

// Close fails the waiting calls and later ones with EUNAVAILABLE.
func TestBatcherClose(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		release, held := e.hold()
		waiting := e.async(e.ctx, 1, e.createHost("late", ""))
		closed := make(chan struct{})
		go func() { e.b.Close(); close(closed) }()
		done, cancel := context.WithCancel(e.ctx)
		cancel() // probes return at once: closed, or abandoned
		waitFor(t, func() bool {
			return eim.ErrorCode(e.b.Do(done, func(eim.Tx) error { return nil })) == eim.EUNAVAILABLE
		})
		release()
		<-closed
		if err := <-held; eim.ErrorCode(err) != eim.EUNAVAILABLE {
			t.Errorf("call running at Close: got %v, want unavailable", err)
		}
		if err := <-waiting; eim.ErrorCode(err) != eim.EUNAVAILABLE || !errors.Is(err, inventory.ErrBatcherClosed) {
			t.Errorf("call waiting at Close: got %v, want ErrBatcherClosed", err)
		}
		if names := e.hostNames(); names["late"] {
			t.Error("a call waiting at Close committed")
		}
	})
}

// A batched call returns once its events are in the change feed, as a
// plain Update does, also when the batch was written grouped and the
// worker went on before the feed numbered its events.
func TestBatcherCallsReturnAfterTheFeed(t *testing.T) {
	runBatcher(t, func(t *testing.T, e *batcherEnv) {
		rev, err := e.store.Revision(e.ctx)
		noErr(t, err)
		release, held := e.hold()
		hosts := make([]*eim.Host, 3)
		var done []<-chan error
		for i := range hosts {
			hosts[i] = &eim.Host{Meta: eim.Meta{Project: e.proj}, Name: fmt.Sprintf("fed%d", i)}
			h := hosts[i]
			done = append(done, e.async(e.ctx, i+1, func(tx eim.Tx) error { return tx.Create(e.ctx, h) }))
		}
		release()
		noErr(t, <-held)
		for i, ec := range done {
			noErr(t, <-ec)
			evs, err := e.store.Events(e.ctx, rev, 100, eim.KindHost)
			noErr(t, err)
			found := false
			for _, ev := range evs {
				found = found || ev.ID == hosts[i].ResourceID
			}
			if !found {
				t.Fatalf("%s returned before its create was in the feed (events %+v)", hosts[i].Name, evs)
			}
		}
	})
}

// By default a Batcher runs one batch at a time on a store with one
// writer, and two at once on a store with concurrent writers: a call
// queued behind a held batch waits, or runs beside it.
func TestBatcherWorkersFollowCapabilities(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		b := inventory.NewBatcher(e.store, inventory.BatcherOptions{})
		t.Cleanup(b.Close)
		be := &batcherEnv{env: e, b: b}
		release, held := be.hold()
		if e.store.Capabilities().ConcurrentWriters {
			noErr(t, b.Do(e.ctx, be.createHost("beside", "")))
			release()
			noErr(t, <-held)
			return
		}
		queued := be.async(e.ctx, 1, be.createHost("behind", "")) // waits until queued
		release()
		noErr(t, <-held)
		noErr(t, <-queued)
	})
}
