package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func testProjects(t *testing.T, s eim.Store) {
	c := ctx(t)
	rev, err := s.Revision(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &eim.Project{Name: "acme", ID: "11111111-1111-4111-8111-111111111111"}
	if err := s.CreateProject(c, p); err != nil {
		t.Fatal(err)
	}
	// A new project is in the feed (the OS catalog provisions it from there).
	evs, err := s.Events(c, rev, 10, eim.KindProject)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Project != "acme" || evs[0].ID != "acme" || evs[0].Op != eim.OpCreated {
		t.Fatalf("events after CreateProject: got %+v, want one CREATED of project acme", evs)
	}
	wantCode(t, s.CreateProject(c, &eim.Project{Name: "acme", ID: "22222222-2222-4222-8222-222222222222"}), eim.ECONFLICT)
	err = s.CreateProject(c, &eim.Project{Name: "other", ID: p.ID})
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "id")
	got, err := s.FindProject(c, "acme")
	if err != nil || got.ID != p.ID || got.CreatedAt.IsZero() {
		t.Fatalf("FindProject: got %+v, %v; want %+v", got, err, p)
	}
	_, err = s.FindProject(c, "nosuch")
	wantCode(t, err, eim.ENOTFOUND)
	for _, id := range []string{p.ID, strings.ToUpper(p.ID)} {
		got, err = s.FindProjectByID(c, id)
		if err != nil || got.Name != "acme" || got.ID != p.ID || got.CreatedAt.IsZero() {
			t.Fatalf("FindProjectByID(%s): got %+v, %v; want project acme", id, got, err)
		}
	}
	_, err = s.FindProjectByID(c, "44444444-4444-4444-8444-444444444444")
	wantCode(t, err, eim.ENOTFOUND)
	if err := s.CreateProject(c, &eim.Project{Name: "zeta", ID: "33333333-3333-4333-8333-333333333333"}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListProjects(c)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}
	if !slices.Contains(names, "acme") || !slices.Contains(names, "zeta") {
		t.Fatalf("ListProjects: got %v, want acme and zeta among them", names)
	}
}

func testDeleteProject(t *testing.T, s eim.Store) {
	p, keep := project(t, s), project(t, s)
	created := map[string]bool{}
	// Every kind with every reference set, so the order of deletion matters.
	for _, k := range eim.Kinds() {
		r := eim.NewResource(k)
		fill(t, s, p, r)
		create(t, s, p, r)
	}
	update(t, s, p, func(tx eim.Tx) error {
		for _, k := range eim.Kinds() {
			items, _, err := tx.List(ctx(t), k, eim.Query{})
			if err != nil {
				return err
			}
			for _, it := range items {
				created[it.Base().ResourceID] = true
			}
		}
		return nil
	})
	kept := create(t, s, keep, &eim.Region{Name: "kept"})
	rev, _ := s.Revision(ctx(t))
	if err := s.DeleteProject(ctx(t), p); err != nil {
		t.Fatalf("DeleteProject: %v", err)
	}
	_, err := s.FindProject(ctx(t), p)
	wantCode(t, err, eim.ENOTFOUND)
	for _, k := range eim.Kinds() {
		if n := count(t, s, "", k, eim.Query{Where: []eim.Cond{{Field: "resourceId", Value: keys(created)}}}); n != 0 {
			t.Errorf("%s left after DeleteProject: %d", k, n)
		}
	}
	evs, err := s.Events(ctx(t), rev, 10000)
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for i, e := range evs {
		if e.Op != eim.OpDeleted || e.Project != p {
			t.Errorf("event %+v: want DELETED of project %s", e, p)
		}
		if e.Kind == eim.KindProject && (e.ID != p || i != len(evs)-1) {
			t.Errorf("event %+v: want the project's own delete last, naming it", e)
		}
		deleted[e.ID] = true
	}
	if !deleted[p] {
		t.Errorf("no delete event for project %s", p)
	}
	for id := range created {
		if !deleted[id] {
			t.Errorf("no delete event for %s", id)
		}
	}
	if _, err := get(t, s, keep, eim.KindRegion, kept.Base().ResourceID); err != nil {
		t.Errorf("other project's region: %v", err)
	}
	wantCode(t, s.DeleteProject(ctx(t), p), eim.ENOTFOUND)
	// The name can be used again.
	if err := s.CreateProject(ctx(t), &eim.Project{Name: p, ID: "44444444-4444-4444-8444-444444444444"}); err != nil {
		t.Fatalf("CreateProject after delete: %v", err)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testFeed(t *testing.T, s eim.Store) {
	p := project(t, s)
	start, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	region := create(t, s, p, &eim.Region{}).(*eim.Region)
	site := create(t, s, p, &eim.Site{RegionID: region.ResourceID}).(*eim.Site)
	site.Name = "renamed"
	update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), site) })
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })
	// A read-only or failed transaction writes no event.
	_ = s.View(ctx(t), p, func(tx eim.Tx) error { _, err := tx.Get(ctx(t), eim.KindRegion, region.ResourceID); return err })
	_ = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })

	type ev struct {
		kind eim.Kind
		id   string
		op   eim.Op
	}
	want := []ev{
		{eim.KindRegion, region.ResourceID, eim.OpCreated},
		{eim.KindSite, site.ResourceID, eim.OpCreated},
		{eim.KindSite, site.ResourceID, eim.OpUpdated},
		{eim.KindSite, site.ResourceID, eim.OpDeleted},
	}
	evs, err := s.Events(ctx(t), start, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []ev
	for i, e := range evs {
		got = append(got, ev{e.Kind, e.ID, e.Op})
		if e.Project != p || e.Time.IsZero() {
			t.Errorf("event %d: got project %q time %v, want %q and a time", i, e.Project, e.Time, p)
		}
		if i > 0 && e.Revision <= evs[i-1].Revision {
			t.Errorf("revisions not increasing: %d after %d", e.Revision, evs[i-1].Revision)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events: got %+v, want %+v", got, want)
	}
	rev, err := s.Revision(ctx(t))
	if err != nil || rev != evs[len(evs)-1].Revision {
		t.Fatalf("Revision: got %d, %v; want %d", rev, err, evs[len(evs)-1].Revision)
	}
	// Resume after a revision; limit; kinds.
	resumed, err := s.Events(ctx(t), evs[1].Revision, 1)
	if err != nil || len(resumed) != 1 || resumed[0] != evs[2] {
		t.Fatalf("Events(after %d, limit 1): got %+v, %v; want %+v", evs[1].Revision, resumed, err, evs[2])
	}
	regions, err := s.Events(ctx(t), start, 100, eim.KindRegion, eim.KindHost)
	if err != nil || len(regions) != 1 || regions[0] != evs[0] {
		t.Fatalf("Events(kinds region, host): got %+v, %v; want %+v", regions, err, evs[:1])
	}
	if none, err := s.Events(ctx(t), rev, 100); err != nil || len(none) != 0 {
		t.Fatalf("Events after the newest: got %+v, %v; want none", none, err)
	}
	// Watch replays from a revision and then stops with the context.
	wctx, cancel := context.WithCancel(ctx(t))
	var watched []eim.Event
	for e, err := range s.Watch(wctx, start) {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Watch: %v", err)
			}
			break
		}
		watched = append(watched, e)
		if len(watched) == len(evs) {
			cancel()
		}
	}
	cancel()
	if !slices.Equal(watched, evs) {
		t.Fatalf("Watch: got %+v, want %+v", watched, evs)
	}
}

// testConcurrentFeed: with 8 writers at once, a watcher sees every committed
// event exactly once, in strictly increasing revision order.
func testConcurrentFeed(t *testing.T, s eim.Store) {
	p := project(t, s)
	start, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 8, 40
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	var (
		mu   sync.Mutex
		seen []eim.Event
		werr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for e, err := range s.Watch(wctx, start, eim.KindHost) {
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					werr = err
				}
				return
			}
			mu.Lock()
			seen = append(seen, e)
			n := len(seen)
			mu.Unlock()
			if n == writers*perWriter {
				cancel()
			}
		}
	}()
	var wg sync.WaitGroup
	committed := make(chan string, writers*perWriter)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				h := &eim.Host{Name: fmt.Sprintf("w%d-%d", w, i)}
				err := s.Update(ctx(t), p, func(tx eim.Tx) error {
					// Some work inside the tx, so that transactions overlap.
					if _, err := tx.Count(ctx(t), eim.KindHost, eim.Query{}); err != nil {
						return err
					}
					return tx.Create(ctx(t), h)
				})
				if err != nil {
					errs <- err
					return
				}
				committed <- h.ResourceID
			}
		})
	}
	wg.Wait()
	close(errs)
	close(committed)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
	}
	if werr != nil {
		t.Fatalf("Watch: %v", werr)
	}
	want := map[string]bool{}
	for id := range committed {
		want[id] = true
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("watched %d events, want %d", len(seen), len(want))
	}
	got := map[string]bool{}
	for i, e := range seen {
		if i > 0 && e.Revision <= seen[i-1].Revision {
			t.Fatalf("event %d: revision %d after %d", i, e.Revision, seen[i-1].Revision)
		}
		if got[e.ID] || !want[e.ID] || e.Op != eim.OpCreated {
			t.Fatalf("event %+v: duplicate, unknown or not a create", e)
		}
		got[e.ID] = true
	}
	// The feed read afterwards agrees with what was watched.
	all, err := s.Events(ctx(t), start, 10000, eim.KindHost)
	if err != nil || !slices.Equal(all, seen) {
		t.Fatalf("Events after the writers: %d events, %v; want the %d watched", len(all), err, len(seen))
	}
}

// testWatchWakeUp: a watcher waiting for new events gets one soon after
// its commit. The test waits on the event (with a generous deadline) and
// never sleeps.
func testWatchWakeUp(t *testing.T, s eim.Store) {
	p := project(t, s)
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	got := make(chan eim.Event, 10)
	go func() {
		defer close(got)
		for e, err := range s.Watch(wctx, rev) {
			if err != nil {
				return
			}
			got <- e
		}
	}()
	for i := range 3 {
		r := create(t, s, p, &eim.Region{Name: fmt.Sprint(i)})
		select {
		case e := <-got:
			if e.ID != r.Base().ResourceID || e.Op != eim.OpCreated {
				t.Fatalf("watched %+v, want the creation of %s", e, r.Base().ResourceID)
			}
		case <-wctx.Done():
			t.Fatalf("no event for %s before the deadline", r.Base().ResourceID)
		}
	}
	cancel()
	for range got {
	}
}

func testWatchCancel(t *testing.T, s eim.Store) {
	wctx, cancel := context.WithCancel(ctx(t))
	cancel()
	n := 0
	for _, err := range s.Watch(wctx, 0) {
		n++
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch with a done context: got %v, want context.Canceled", err)
		}
	}
	if n != 1 {
		t.Fatalf("Watch with a done context yielded %d times, want 1", n)
	}
}
