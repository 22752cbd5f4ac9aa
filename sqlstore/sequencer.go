package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The PostgreSQL change feed's sequencer.
//
// Writers insert their events with revision NULL and commit without any
// global lock, so their commits (and WAL flushes) overlap. A round of the
// sequencer then numbers every committed unsequenced event, in seq order,
// from eim_revision, and commits that in one transaction. Rounds are
// serialized across processes by an advisory transaction lock, each round
// sees the previous one's commit, and eim_revision moves with the revisions
// it hands out: revisions are committed in revision order, and a reader
// that reads eim_revision and then the events at or below it sees every
// event with a revision up to it, now and later.
//
// After its commit a writer waits for a round that started after the
// commit (running it itself when none is running), so its events are in
// the feed when Update returns. Writers arriving meanwhile share the next
// round: its fsync is amortized over all of them. Events of a writer that
// died between its commit and a round are picked up by the next round or by
// sequenceLoop. Only the sequencer NOTIFYs: PostgreSQL serializes the
// commits of notifying transactions. A round is one call of the database
// function eim_sequence_events (migration 0009), one round trip. The same
// round numbers the committed audit records, per project (migration 0020,
// audit.go).

// sequencer coordinates this process's rounds and the writers waiting for
// them.
type sequencer struct {
	mu       sync.Mutex
	cond     *sync.Cond
	started  uint64 // rounds begun
	finished uint64 // rounds that succeeded (a failed round is retried)
	running  bool
}

func newSequencer() *sequencer {
	q := &sequencer{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// roundTimeout bounds one round, which outlives the writer's context: the
// writer's data is committed either way.
const roundTimeout = 30 * time.Second

// sequenced returns once a round that started after the call has finished.
func (s *Store) sequenced(ctx context.Context) error {
	q := s.seq
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.started + 1
	for q.finished < target {
		if q.running {
			q.cond.Wait()
			continue
		}
		q.running = true
		q.started++
		round := q.started
		q.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
		err := s.sequenceRound(rctx)
		cancel()
		q.mu.Lock()
		q.running = false
		if err == nil {
			q.finished = round
		} else {
			q.started = q.finished // let the next caller retry it
		}
		q.cond.Broadcast()
		if err != nil {
			return err
		}
	}
	return nil
}

// sequenceRound numbers the committed unsequenced events, and the audit
// records per project: one call of the eim_sequence_events function
// (migrations 0009 and 0020), in its own implicit
// transaction, which takes the sequencer's advisory lock, numbers the
// events from eim_revision and, when it numbered any, notifies the other
// processes' listeners.
func (s *Store) sequenceRound(ctx context.Context) error {
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT eim_sequence_events()").Scan(&n); err != nil {
		return fmt.Errorf("sequence events: %w", err)
	}
	if n > 0 {
		s.wake.broadcast()
	}
	return nil
}

// sequenceLoop runs a round now and then, for events (and audit records)
// whose writer died between its commit and a round.
func (s *Store) sequenceLoop(ctx context.Context) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			var pending bool
			err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT FROM events WHERE revision IS NULL) OR EXISTS (SELECT FROM audit_log WHERE seq IS NULL)").Scan(&pending)
			if err == nil && pending {
				err = s.sequenced(ctx)
			}
			if err != nil && ctx.Err() == nil {
				s.log.Warn("sequence events", "err", err)
			}
		}
	}
}
