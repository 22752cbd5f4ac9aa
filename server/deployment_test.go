package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestDeploymentFresh: Fresh reads the other processes' modules again when
// its view is freshAfter old, at most once per freshAfter whatever the callers.
func TestDeploymentFresh(t *testing.T) {
	var mu sync.Mutex
	others := [][]string{{"api"}}
	reads := 0
	members := func(context.Context) ([][]string, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return slices.Clone(others), nil
	}
	d := newDeployment([]*Module{{Name: "host"}}, members, slog.New(slog.DiscardHandler))
	clock := time.Unix(1e9, 0)
	d.now = func() time.Time { return clock } // set before the goroutines, read by them
	ctx := context.Background()
	d.refresh(ctx)
	if got := d.Modules(); !slices.Equal(got, []string{"api", "host"}) {
		t.Fatalf("modules: %v, want api and host", got)
	}
	mu.Lock()
	others = append(others, []string{"os"})
	mu.Unlock()
	// Within a second of the last read: the view as it is, no read.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { d.Fresh(ctx) })
	}
	wg.Wait()
	if reads != 1 || slices.Contains(d.Modules(), "os") {
		t.Fatalf("reads %d, modules %v: want no read within freshAfter of the last", reads, d.Modules())
	}
	clock = clock.Add(freshAfter)
	for range 20 {
		wg.Go(func() {
			if got := d.Fresh(ctx); !slices.Contains(got, "os") {
				t.Errorf("Fresh: %v, want os, started since", got)
			}
		})
	}
	wg.Wait()
	if reads != 2 {
		t.Errorf("reads: %d, want one more for 20 concurrent callers", reads)
	}
}
