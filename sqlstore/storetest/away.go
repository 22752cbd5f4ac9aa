package storetest

import (
	"context"
	"iter"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim"
)

// Away is a store whose database can be made to go away, for the outage
// tests of the modules on every engine (a real outage of PostgreSQL:
// Proxy, StartPostgres). While it is away every call fails with
// EUNAVAILABLE, as the real store's calls do when PostgreSQL restarts,
// and a watch ends so at once; what it passes through is the wrapped
// store's (whose commits still call its OnCommit hooks: writes made on
// it directly are those of a connection that survived).
type Away struct {
	eim.Store
	away atomic.Bool
}

// SetAway makes the database go away (true) or come back.
func (s *Away) SetAway(away bool) { s.away.Store(away) }

// ErrAway is what calls fail with while the database is away.
var ErrAway = eim.Errorf(eim.EUNAVAILABLE, "the database is unavailable; try again")

func (s *Away) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	if s.away.Load() {
		return ErrAway
	}
	return s.Store.View(ctx, project, fn)
}

func (s *Away) Update(ctx context.Context, project string, fn func(eim.Tx) error) error {
	if s.away.Load() {
		return ErrAway
	}
	return s.Store.Update(ctx, project, fn)
}

func (s *Away) UpdateGrouped(ctx context.Context, project string, fn func(eim.Tx) error) (func(), error) {
	if s.away.Load() {
		return nil, ErrAway
	}
	return s.Store.UpdateGrouped(ctx, project, fn)
}

func (s *Away) SaveLastSeen(ctx context.Context, seen []eim.LastSeen) error {
	if s.away.Load() {
		return ErrAway
	}
	return s.Store.SaveLastSeen(ctx, seen)
}

func (s *Away) LastSeen(ctx context.Context) ([]eim.LastSeen, error) {
	if s.away.Load() {
		return nil, ErrAway
	}
	return s.Store.LastSeen(ctx)
}

func (s *Away) FindProject(ctx context.Context, name string) (*eim.Project, error) {
	if s.away.Load() {
		return nil, ErrAway
	}
	return s.Store.FindProject(ctx, name)
}

func (s *Away) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	if s.away.Load() {
		return nil, ErrAway
	}
	return s.Store.ListProjects(ctx)
}

func (s *Away) Revision(ctx context.Context) (int64, error) {
	if s.away.Load() {
		return 0, ErrAway
	}
	return s.Store.Revision(ctx)
}

func (s *Away) Events(ctx context.Context, after int64, limit int, kinds ...eim.Kind) ([]eim.Event, error) {
	if s.away.Load() {
		return nil, ErrAway
	}
	return s.Store.Events(ctx, after, limit, kinds...)
}

func (s *Away) FeedPosition(ctx context.Context, consumer string) (int64, bool, error) {
	if s.away.Load() {
		return 0, false, ErrAway
	}
	return s.Store.FeedPosition(ctx, consumer)
}

func (s *Away) SaveFeedPosition(ctx context.Context, consumer string, rev int64) error {
	if s.away.Load() {
		return ErrAway
	}
	return s.Store.SaveFeedPosition(ctx, consumer, rev)
}

// Watch fails as soon as the database is away (the real feed fails at
// its next read).
func (s *Away) Watch(ctx context.Context, after int64, kinds ...eim.Kind) iter.Seq2[eim.Event, error] {
	return func(yield func(eim.Event, error) bool) {
		if s.away.Load() {
			yield(eim.Event{}, ErrAway)
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for wctx.Err() == nil && !s.away.Load() {
				select {
				case <-wctx.Done():
				case <-t.C:
				}
			}
			cancel()
		}()
		for ev, err := range s.Store.Watch(wctx, after, kinds...) {
			if s.away.Load() {
				yield(eim.Event{}, ErrAway)
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// HostBeats is the wrapped store's, its transactions run through s (or
// run) and its reads failing while the database is away.
func (s *Away) HostBeats(run eim.TxRunner) eim.HostBeats {
	if run == nil {
		run = awayRunner{s}
	}
	return awayBeats{HostBeats: s.Store.HostBeats(run), s: s}
}

type awayRunner struct{ s *Away }

func (r awayRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return r.s.Update(ctx, project, fn)
}

type awayBeats struct {
	eim.HostBeats
	s *Away
}

func (b awayBeats) HostsInStatus(ctx context.Context, project, status string, before uint64, offset, limit int) ([]eim.HostLiveness, error) {
	if b.s.away.Load() {
		return nil, ErrAway
	}
	return b.HostBeats.HostsInStatus(ctx, project, status, before, offset, limit)
}

// NodeReports is the wrapped store's, its transactions run through s (or
// run) and its read-only look failing while the database is away.
func (s *Away) NodeReports(run eim.TxRunner) eim.NodeReports {
	if run == nil {
		run = awayRunner{s}
	}
	return awayReports{NodeReports: s.Store.NodeReports(run), s: s}
}

type awayReports struct {
	eim.NodeReports
	s *Away
}

func (r awayReports) NodeState(ctx context.Context, project, id string) (eim.NodeState, error) {
	if r.s.away.Load() {
		return eim.NodeState{}, ErrAway
	}
	return r.NodeReports.NodeState(ctx, project, id)
}

// DeviceClaims is the wrapped store's, its transactions run through s (or
// run) and its read-only look failing while the database is away.
func (s *Away) DeviceClaims(run eim.TxRunner) eim.DeviceClaims {
	if run == nil {
		run = awayRunner{s}
	}
	return awayClaims{DeviceClaims: s.Store.DeviceClaims(run), s: s}
}

// HostFacts is the wrapped store's, its reads run through s's View (or
// view's), so that they fail while the database is away.
func (s *Away) HostFacts(view eim.TxViewer) eim.HostFacts {
	if view == nil {
		view = s
	}
	return s.Store.HostFacts(view)
}

type awayClaims struct {
	eim.DeviceClaims
	s *Away
}

func (c awayClaims) Claims(ctx context.Context, uuid, serial string) (eim.DeviceClaimSet, error) {
	if c.s.away.Load() {
		return eim.DeviceClaimSet{}, ErrAway
	}
	return c.DeviceClaims.Claims(ctx, uuid, serial)
}
