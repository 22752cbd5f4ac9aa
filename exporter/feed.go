package exporter

import (
	"context"
	"errors"
	"time"

	"github.com/eimhq/eim"
)

// Following the change feed for the projects, locations and schedules
// (the hosts and instances come through the host view): this file is all
// of it, so that it can move onto the shared feed runner as a whole. The shape is the runner's: a
// re-list (load) when the feed starts or restarts, then batches of events
// (apply); a failure starts over after a pause, from the store's revision
// of that moment.

// applyEvery spaces the reads of changed resources: events that arrive
// meanwhile are read together. A scrape (every 15 s or more) sees changes
// at most this much later.
const applyEvery = 250 * time.Millisecond

// maxBatch bounds the events applied at once.
const maxBatch = 5000

// follow keeps the snapshot in step with the feed until ctx ends.
func (s *Service) follow(ctx context.Context) error {
	for {
		err := s.followOnce(ctx)
		s.live.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("exporter: change feed failed; reading everything again after a pause", "err", err, "retry_in", s.retry)
		t := time.NewTimer(s.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// followOnce loads the snapshot as of the feed's current revision and
// applies the events after it, until the feed or a read fails.
func (s *Service) followOnce(ctx context.Context) error {
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := s.load(ctx); err != nil {
		return err
	}
	s.live.Store(true)
	s.feed.Live(true)
	defer s.feed.Live(false)
	s.loaded.Store(true)
	s.log.Info("exporter: snapshot loaded", "took", time.Since(start).Round(time.Millisecond))
	// Once the host view has read the whole fleet, every host is new to
	// the compressed series: they are compressed then rather than in the
	// first scrape's time (cache.go).
	primed := s.hosts.WhenPrimed()
	if !s.perHost {
		primed = nil
	}

	// The feed is read by a goroutine of this call's own, and applied
	// here, so that a panic while applying reaches the module's loop
	// runner (which recovers it and calls Run again).
	wctx, cancel := context.WithCancel(ctx)
	evs := make(chan eim.Event, maxBatch)
	done := make(chan struct{})
	var watchErr error
	go func() {
		defer close(done)
		defer close(evs)
		for ev, err := range s.store.Watch(wctx, rev, feedKinds...) {
			if err != nil {
				watchErr = err
				return
			}
			select {
			case evs <- ev:
			case <-wctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-done
	}()

	// Project settings are not in the feed: the projects are read again
	// now and then.
	projects := time.NewTicker(s.projectsEvery)
	defer projects.Stop()
	pause := time.NewTimer(applyEvery)
	pause.Stop()
	batch := make([]eim.Event, 0, maxBatch)
	for {
		var ev eim.Event
		var ok bool
		select {
		case ev, ok = <-evs:
		case <-primed:
			primed = nil
			s.log.Info("exporter: the host view is whole", "hosts", s.hostCount())
			s.cache.segments(s.take(s.now()))
			continue
		case <-projects.C:
			if err := s.refreshProjects(ctx); err != nil {
				return err
			}
			continue
		}
		if !ok {
			<-done
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if watchErr == nil {
				watchErr = errors.New("the change feed ended")
			}
			return watchErr
		}
		batch = append(batch[:0], ev)
	drain:
		for len(batch) < maxBatch {
			select {
			case ev, ok := <-evs:
				if !ok {
					break drain
				}
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		if err := s.apply(ctx, batch); err != nil {
			return err
		}
		s.feed.Handled(batch)
		if len(evs) == 0 {
			s.feed.CaughtUp()
		}
		pause.Reset(applyEvery)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pause.C:
		}
	}
}
