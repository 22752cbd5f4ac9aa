package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testNoLostUpdates: two transactions that read the same host and each
// change a different field of it both take effect. The first reads the
// host and holds on to it while the second reads, changes and commits; the
// first then writes what it read with its own change. A store may make the
// second wait for the first (SQLite's single writer) or run the first again
// on the row as the second left it (PostgreSQL), but it must not write
// back the stale row and so undo the second's change.
func testNoLostUpdates(t *testing.T, s eim.Store) {
	p := project(t, s)
	h := &eim.Host{Name: "before"}
	update(t, s, p, func(tx eim.Tx) error { return tx.Create(ctx(t), h) })

	var runs atomic.Int32
	read := make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		errA <- s.Update(ctx(t), p, func(tx eim.Tx) error {
			r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
			if err != nil {
				return err
			}
			if runs.Add(1) == 1 {
				close(read)
				// Long enough for the other writer to commit here, unless
				// the store makes it wait for this transaction.
				time.Sleep(300 * time.Millisecond)
			}
			r.(*eim.Host).Name = "after"
			return tx.Update(ctx(t), r)
		})
	}()
	<-read
	errB := s.Update(ctx(t), p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		r.(*eim.Host).Note = "noted"
		return tx.Update(ctx(t), r)
	})
	if errB != nil {
		t.Fatalf("second writer: %v", errB)
	}
	if err := <-errA; err != nil {
		t.Fatalf("first writer: %v", err)
	}
	got, err := get(t, s, p, eim.KindHost, h.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	g := got.(*eim.Host)
	if g.Name != "after" || g.Note != "noted" {
		t.Fatalf("host after two concurrent writers: name %q, note %q; want %q and %q (a change was lost)", g.Name, g.Note, "after", "noted")
	}
	t.Logf("the first writer ran %d time(s)", runs.Load())
}

// testConflictGivesUp: a transaction that keeps losing its row to other
// writers is not run forever; the caller gets an error saying to try
// again, and nothing of it is written. (Only stores that run transactions
// again on a conflict can get here: on SQLite the writers never overlap.)
func testConflictGivesUp(t *testing.T, s eim.Store) {
	p := project(t, s)
	h := &eim.Host{Name: "start"}
	update(t, s, p, func(tx eim.Tx) error { return tx.Create(ctx(t), h) })

	var runs atomic.Int32
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		n := runs.Add(1)
		// Another writer changes the host between this read and the write,
		// every time; on a store with serial writers it waits instead, and
		// is given up on after a moment.
		// (Long enough for a loaded machine: on SQLite it is waited out once.)
		c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
		defer cancel()
		other := s.Update(c, p, func(tx eim.Tx) error {
			o, err := tx.Get(c, eim.KindHost, h.ResourceID)
			if err != nil {
				return err
			}
			o.(*eim.Host).Note = "other"
			return tx.Update(c, o)
		})
		if other != nil {
			return nil // serial writers: nothing to race
		}
		r.(*eim.Host).Name = "mine" + string(rune('0'+n%10))
		return tx.Update(ctx(t), r)
	})
	if runs.Load() == 1 {
		if err != nil {
			t.Fatalf("the store has serial writers, yet the transaction failed: %v", err)
		}
		t.Skip("the store's writers do not overlap")
	}
	wantCode(t, err, eim.EUNAVAILABLE)
	if runs.Load() > 10 {
		t.Fatalf("the transaction ran %d times before the store gave up", runs.Load())
	}
	got, gerr := get(t, s, p, eim.KindHost, h.ResourceID)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if g := got.(*eim.Host); g.Name != "start" || g.Note != "other" {
		t.Fatalf("host: name %q, note %q; want the other writer's note and no name change", g.Name, g.Note)
	}
	t.Logf("gave up after %d runs: %v", runs.Load(), err)
}
