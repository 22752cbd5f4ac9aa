// Package feedcache holds what the modules that answer heartbeats from
// memory (telemetry, maintenance) share: following the change feed with
// retries, and a per-key value (a project's tree) loaded once for all the
// callers that ask while it is missing, with a generation that tells a
// value computed from it whether it is still current.
package feedcache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim"
)

// Follower follows the change feed for a cache.
type Follower struct {
	Store eim.Store
	Kinds []eim.Kind
	// Name prefixes log messages ("telemetry").
	Name   string
	Logger *slog.Logger
	// RetryWait is how long to wait after the feed failed (default 2 s).
	RetryWait time.Duration
	// Reset drops everything cached: called each time the feed is
	// (re)started, since what was cached may predate changes the feed
	// will not show.
	Reset func()
	// Event drops what one event changed.
	Event func(eim.Event)

	// Live is set while the feed is followed: only then may cached
	// values be used.
	Live atomic.Bool
	once sync.Once
}

// Run follows the feed until ctx ends (it then returns nil). When the feed
// fails it clears Live, waits and starts again from the store's current
// revision. It may be called once.
func (f *Follower) Run(ctx context.Context) error {
	first := false
	f.once.Do(func() { first = true })
	if !first {
		return errors.New(f.Name + ": Run called twice")
	}
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := f.RetryWait
	if retry <= 0 {
		retry = 2 * time.Second
	}
	defer f.Live.Store(false)
	for {
		err := f.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		log.Warn(f.Name+": change feed failed; reading afresh until it is back", "err", err, "retry_in", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (f *Follower) follow(ctx context.Context) error {
	f.Live.Store(false)
	rev, err := f.Store.Revision(ctx)
	if err != nil {
		return err
	}
	f.Reset()
	f.Live.Store(true)
	for ev, err := range f.Store.Watch(ctx, rev, f.Kinds...) {
		if err != nil {
			f.Live.Store(false)
			return err
		}
		f.Event(ev)
	}
	return ctx.Err()
}

// Loader caches one value per key (a project), loaded on demand.
type Loader[T any] struct {
	// Load reads the value of a key.
	Load func(ctx context.Context, key string) (T, error)

	mu sync.Mutex
	m  map[string]*slot[T]
}

type slot[T any] struct {
	gen     uint64 // bumped when the value is dropped
	val     T
	ok      bool
	loading chan struct{}
}

// Get returns the key's value, loading it once for all the callers that
// ask while it is missing, and its generation. A value that changed while
// it was loaded is returned to this call but not kept.
func (l *Loader[T]) Get(ctx context.Context, key string) (T, uint64, error) {
	var zero T
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*slot[T]{}
	}
	s := l.m[key]
	if s == nil {
		s = &slot[T]{}
		l.m[key] = s
	}
	for !s.ok && s.loading != nil {
		ch := s.loading
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return zero, 0, ctx.Err()
		}
		l.mu.Lock()
	}
	if s.ok {
		v, g := s.val, s.gen
		l.mu.Unlock()
		return v, g, nil
	}
	ch := make(chan struct{})
	s.loading = ch
	gen := s.gen
	l.mu.Unlock()

	v, err := l.Load(ctx, key)

	l.mu.Lock()
	defer l.mu.Unlock()
	s.loading = nil
	close(ch)
	if err != nil {
		return zero, 0, err
	}
	if s.gen == gen {
		s.val, s.ok = v, true
	}
	return v, gen, nil
}

// Current reports whether the key's value is cached at generation gen.
func (l *Loader[T]) Current(key string, gen uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[key]
	return s != nil && s.ok && s.gen == gen
}

// Cached reports whether the key's value is cached.
func (l *Loader[T]) Cached(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[key]
	return s != nil && s.ok
}

// Drop drops the key's value.
func (l *Loader[T]) Drop(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.m[key]; s != nil {
		s.gen++
		s.ok = false
		var zero T
		s.val = zero
	}
}

// DropAll drops every value.
func (l *Loader[T]) DropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	for _, s := range l.m {
		s.gen++
		s.ok, s.val = false, zero
	}
}

// Each calls fn for every resource of kind k in project, reading them in
// pages of size (ordered by ID, each page its own read transaction), so
// that a module can fill its cache for a whole fleet with a few scans
// instead of a read per resource.
func Each(ctx context.Context, st eim.Store, project string, k eim.Kind, size int, fn func(eim.Resource)) error {
	after := ""
	for {
		q := eim.Query{OrderBy: "resourceId", Limit: size, NoTotal: true}
		if after != "" {
			q.Filter = `resourceId > "` + after + `"`
		}
		var items []eim.Resource
		err := st.View(ctx, project, func(tx eim.Tx) error {
			var err error
			items, _, err = tx.List(ctx, k, q)
			return err
		})
		if err != nil {
			return err
		}
		for _, r := range items {
			fn(r)
		}
		if len(items) < size {
			return nil
		}
		after = items[len(items)-1].Base().ResourceID
	}
}
