package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// Watchers share the feed's tail: with a tail small enough to be trimmed
// many times over, watchers of different kinds, started at different
// revisions (one far behind the tail), each see exactly the events of
// their kinds, in order, while writers commit concurrently.
func TestFeedTailSharedByWatchers(t *testing.T) {
	dsns := map[string]string{"sqlite": filepath.Join(t.TempDir(), "eim.db")}
	if u := postgresURLIfSet(t); u != "" {
		dsns["postgres"] = u
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, dsn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Shrink the store's own tail, under its lock: Open has already
			// started the reference cache's watcher, which reads the tail,
			// so putting another one in its place would race with it.
			s.tail.mu.Lock()
			s.tail.readN, s.tail.keep = 7, 10
			s.tail.mu.Unlock()
			p := fmt.Sprintf("tail-%d", time.Now().UnixNano())
			if err := s.CreateProject(ctx, &eim.Project{Name: p, ID: p}); err != nil {
				t.Fatal(err)
			}
			start, err := s.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A backlog before the watchers start, so that the one started
			// at the beginning is behind the trimmed tail.
			create := func(i int) {
				t.Helper()
				err := s.Update(ctx, p, func(tx eim.Tx) error {
					if i%3 == 0 {
						return tx.Create(ctx, &eim.Region{Name: fmt.Sprintf("r%d", i)})
					}
					return tx.Create(ctx, &eim.Host{Name: fmt.Sprintf("h%d", i)})
				})
				if err != nil {
					t.Error(err)
				}
			}
			for i := range 60 {
				create(i)
			}
			mid, err := s.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const total = 300
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			type watcher struct {
				after int64
				kinds []eim.Kind
				mu    sync.Mutex
				seen  []eim.Event
				err   error
			}
			ws := []*watcher{
				{after: start, kinds: []eim.Kind{eim.KindHost}},
				{after: start},
				{after: mid, kinds: []eim.Kind{eim.KindRegion}},
				{after: mid, kinds: []eim.Kind{eim.KindHost, eim.KindRegion}},
			}
			var wg sync.WaitGroup
			for _, w := range ws {
				wg.Go(func() {
					for e, err := range s.Watch(wctx, w.after, w.kinds...) {
						if err != nil {
							if !errors.Is(err, context.Canceled) {
								w.mu.Lock()
								w.err = err
								w.mu.Unlock()
							}
							return
						}
						if e.Project == p {
							w.mu.Lock()
							w.seen = append(w.seen, e)
							w.mu.Unlock()
						}
					}
				})
			}
			var writers sync.WaitGroup
			for k := range 3 {
				writers.Go(func() {
					for i := 60 + k; i < total; i += 3 {
						create(i)
					}
				})
			}
			writers.Wait()
			wants := make([][]eim.Event, len(ws))
			for i, w := range ws {
				want, err := s.Events(ctx, w.after, 100000, w.kinds...)
				if err != nil {
					t.Fatal(err)
				}
				wants[i] = slices.DeleteFunc(want, func(e eim.Event) bool { return e.Project != p })
			}
			// Wait until every watcher has seen as many events as the feed
			// holds for it (or the deadline), then compare.
			for {
				done := true
				for i, w := range ws {
					w.mu.Lock()
					if len(w.seen) < len(wants[i]) && w.err == nil {
						done = false
					}
					w.mu.Unlock()
				}
				if done || wctx.Err() != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			for i, w := range ws {
				t.Logf("watcher %d (after %d, kinds %v): saw %d of %d events, err %v", i, w.after, w.kinds, len(w.seen), len(wants[i]), w.err)
			}
			for i, w := range ws {
				if w.err != nil {
					last := int64(0)
					if len(w.seen) > 0 {
						last = w.seen[len(w.seen)-1].Revision
					}
					s.tail.mu.Lock() // the reference cache's watcher still uses it
					from, upto, full := s.tail.from, s.tail.upto, s.tail.full
					s.tail.mu.Unlock()
					t.Fatalf("watcher %d: %v (saw %d events up to revision %d, the feed has %d up to %d; tail from %d upto %d full %v)", i, w.err, len(w.seen), last, len(wants[i]), wants[i][len(wants[i])-1].Revision, from, upto, full)
				}
				if !slices.Equal(w.seen, wants[i]) {
					t.Fatalf("watcher %d (after %d, kinds %v): saw %d events, the feed has %d", i, w.after, w.kinds, len(w.seen), len(wants[i]))
				}
			}
		})
	}
}
