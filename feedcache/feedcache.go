// Package feedcache holds what the caches kept current by the change
// feed (see package feed) share: a per-key value (a project's tree)
// loaded once for all the callers that ask while it is missing, with a
// generation that tells a value computed from it whether it is still
// current, and paged scans that fill a cache for a whole fleet.
package feedcache

import (
	"context"
	"sync"

	"github.com/eimhq/eim"
)

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
