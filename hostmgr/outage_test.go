package hostmgr_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// awayStore is a store whose database can be made to go away: while away,
// every call fails with "unavailable", as the real store's calls do when
// PostgreSQL restarts.
type awayStore struct {
	eim.Store
	away atomic.Bool
	// saved counts the last-seen times saved, readBack those read by ID.
	saved, readBack atomic.Int64
}

var errAway = eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")

func (s *awayStore) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	if s.away.Load() {
		return errAway
	}
	return s.Store.View(ctx, project, fn)
}

func (s *awayStore) Update(ctx context.Context, project string, fn func(eim.Tx) error) error {
	if s.away.Load() {
		return errAway
	}
	return s.Store.Update(ctx, project, fn)
}

func (s *awayStore) SaveLastSeen(ctx context.Context, seen []eim.LastSeen) error {
	if s.away.Load() {
		return errAway
	}
	s.saved.Add(int64(len(seen)))
	return s.Store.SaveLastSeen(ctx, seen)
}

func (s *awayStore) LastSeen(ctx context.Context) ([]eim.LastSeen, error) {
	if s.away.Load() {
		return nil, errAway
	}
	return s.Store.LastSeen(ctx)
}

func (s *awayStore) LastSeenOf(ctx context.Context, ids []string) ([]eim.LastSeen, error) {
	if s.away.Load() {
		return nil, errAway
	}
	s.readBack.Add(int64(len(ids)))
	return s.Store.LastSeenOf(ctx, ids)
}

func (s *awayStore) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if s.away.Load() {
		return false, errAway
	}
	return s.Store.Claim(ctx, name, holder, ttl)
}

func (s *awayStore) Release(ctx context.Context, name, holder string) error {
	if s.away.Load() {
		return errAway
	}
	return s.Store.Release(ctx, name, holder)
}

func (s *awayStore) Announce(ctx context.Context, m eim.Member, ttl time.Duration) error {
	if s.away.Load() {
		return errAway
	}
	return s.Store.Announce(ctx, m, ttl)
}

func (s *awayStore) Members(ctx context.Context) ([]eim.Member, error) {
	if s.away.Load() {
		return nil, errAway
	}
	return s.Store.Members(ctx)
}

func (s *awayStore) Leave(ctx context.Context, id string) error {
	if s.away.Load() {
		return errAway
	}
	return s.Store.Leave(ctx, id)
}

func (s *awayStore) FindProject(ctx context.Context, name string) (*eim.Project, error) {
	if s.away.Load() {
		return nil, errAway
	}
	return s.Store.FindProject(ctx, name)
}

func (s *awayStore) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	if s.away.Load() {
		return nil, errAway
	}
	return s.Store.ListProjects(ctx)
}

func (s *awayStore) Revision(ctx context.Context) (int64, error) {
	if s.away.Load() {
		return 0, errAway
	}
	return s.Store.Revision(ctx)
}

// Watch fails as soon as the database is away (the real feed fails at its
// next read).
func (s *awayStore) Watch(ctx context.Context, after int64, kinds ...eim.Kind) iter.Seq2[eim.Event, error] {
	return func(yield func(eim.Event, error) bool) {
		if s.away.Load() {
			yield(eim.Event{}, errAway)
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			for wctx.Err() == nil && !s.away.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		for ev, err := range s.Store.Watch(wctx, after, kinds...) {
			if s.away.Load() {
				yield(eim.Event{}, errAway)
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// While the store is away no host is flagged "No Connection" (a node
// refused meanwhile was not silent of its own doing); once it is back,
// every deadline counts from then, as after a restart; and a host that
// stays silent is still flagged a timeout later, not forgotten because
// its flag could not be written during the outage.
func TestStoreAwayFlagsNobody(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &storetest.Away{Store: e.store}
		opts := e.opts
		opts.Store, opts.Batcher = st, nil
		svc := hostmgr.New(opts)
		beating, silent := e.host(nil), e.host(nil)
		e.beat(svc, beating, nil)
		e.beat(svc, beating, nil) // the first one's write is read back: now known
		e.beat(svc, silent, nil)
		e.wantStatus(silent.ResourceID, "Running", eim.StatusIdle)

		// 40 s of outage: past the 30 s timeout of the silent host.
		st.SetAway(true)
		for range 4 {
			e.clock.Add(10 * time.Second)
			e.beat(svc, beating, nil) // answered from memory
			svc.CheckTimeouts(e.ctx)
		}
		st.SetAway(false)
		e.wantStatus(silent.ResourceID, "Running", eim.StatusIdle)

		// Back: the silent host's deadline counts from now.
		back := e.clock.Now()
		e.clock.Add(time.Second)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(silent.ResourceID, "Running", eim.StatusIdle)
		for range 2 {
			e.clock.Add(10 * time.Second)
			e.beat(svc, beating, nil)
			svc.CheckTimeouts(e.ctx)
		}
		e.wantStatus(silent.ResourceID, "Running", eim.StatusIdle)

		// A timeout after the store came back, it is flagged.
		e.clock.Add(back.Add(31 * time.Second).Sub(e.clock.Now()))
		e.beat(svc, beating, nil)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(silent.ResourceID, "No Connection", eim.StatusError)
		e.wantStatus(beating.ResourceID, "Running", eim.StatusIdle)
	})
}

// A store that fails one write for another reason (a write that lost its
// races) does not pardon the fleet: the host is flagged at the next pass.
func TestStoreBlipDoesNotPardon(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &storetest.Away{Store: e.store}
		opts := e.opts
		opts.Store, opts.Batcher = st, nil
		svc := hostmgr.New(opts)
		silent := e.host(nil)
		e.beat(svc, silent, nil)
		e.clock.Add(31 * time.Second)
		// The flag fails, but the store answers the probe at the next pass.
		st.SetAway(true)
		svc.CheckTimeouts(e.ctx)
		st.SetAway(false)
		e.clock.Add(time.Second)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(silent.ResourceID, "No Connection", eim.StatusError)
	})
}

// Run neither ends nor fails while the store is away, at its start or
// later: it waits for the store and follows the feed again once it is
// back.
func TestRunSurvivesStoreAway(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &storetest.Away{Store: e.store}
		st.SetAway(true)
		opts := e.opts
		opts.Store, opts.Batcher = st, nil
		svc := hostmgr.New(opts)
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		select {
		case err := <-done:
			t.Fatalf("Run ended while the store was away at its start: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if svc.Restored() {
			t.Fatal("Run restored liveness from a store that is away")
		}
		st.SetAway(false)
		waitFor(t, svc.Restored) // once the store is back

		// The feed fails under it, and comes back: a change made after
		// that reaches the module (the host's next heartbeat reads it).
		h := e.host(nil)
		e.beat(svc, h, nil)
		st.SetAway(true)
		select {
		case err := <-done:
			t.Fatalf("Run ended when the store went away: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		st.SetAway(false)
		// Written while the module's feed may still be in its retry
		// pause: it resumes after the last event it handled.
		e.edit(h.ResourceID, func(h *eim.Host) { h.HostStatus, h.HostStatusIndicator = "No Connection", eim.StatusError })
		waitFor(t, func() bool { // the feed's change reaches the heartbeat's answer
			e.beat(svc, h, nil)
			return e.getHost(h.ResourceID).HostStatus == "Running"
		})
	})
}
