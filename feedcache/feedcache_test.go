package feedcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent callers share one load; a drop during a load keeps that load's
// value out of the cache (it may predate the change); Current tells a
// computed value's generation apart from a newer one.
func TestLoader(t *testing.T) {
	var loads atomic.Int64
	release := make(chan struct{})
	l := &Loader[int]{Load: func(ctx context.Context, key string) (int, error) {
		n := loads.Add(1)
		<-release
		return int(n), nil
	}}
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Go(func() {
			v, _, err := l.Get(t.Context(), "p")
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	for loads.Load() == 0 {
	}
	close(release)
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d loads for 8 concurrent callers, want 1", loads.Load())
	}
	for _, v := range got {
		if v != 1 {
			t.Fatalf("values %v", got)
		}
	}
	_, gen, _ := l.Get(t.Context(), "p")
	if !l.Current("p", gen) || !l.Cached("p") {
		t.Fatal("loaded value not current")
	}
	l.Drop("p")
	if l.Current("p", gen) || l.Cached("p") {
		t.Fatal("dropped value still current")
	}

	// A drop while loading: the load's value is returned, not kept.
	block := make(chan struct{})
	started := make(chan struct{})
	l2 := &Loader[string]{Load: func(ctx context.Context, key string) (string, error) {
		close(started)
		<-block
		return "stale", nil
	}}
	done := make(chan string)
	go func() { v, _, _ := l2.Get(t.Context(), "p"); done <- v }()
	<-started
	l2.Drop("p")
	close(block)
	if v := <-done; v != "stale" || l2.Cached("p") {
		t.Fatalf("value %q, cached %v", v, l2.Cached("p"))
	}

	// Errors are returned and not cached.
	fail := &Loader[int]{Load: func(context.Context, string) (int, error) { return 0, errors.New("boom") }}
	if _, _, err := fail.Get(t.Context(), "p"); err == nil || fail.Cached("p") {
		t.Fatal("error not returned, or cached")
	}
}
