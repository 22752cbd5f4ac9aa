package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// refEngines runs fn with a function opening stores on one database, on
// SQLite and (when configured) PostgreSQL.
func refEngines(t *testing.T, fn func(t *testing.T, open func() *Store)) {
	engines := map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return filepath.Join(t.TempDir(), "eim.db") },
		"PostgreSQL": func(t *testing.T) string { return postgresURL(t) },
	}
	for name, dsn := range engines {
		t.Run(name, func(t *testing.T) {
			d := dsn(t)
			fn(t, func() *Store {
				s, err := Open(context.Background(), d, Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				waitRefsLive(t, s)
				return s
			})
		})
	}
}

func waitRefsLive(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.refs.mu.Lock()
		live := s.refs.live
		s.refs.mu.Unlock()
		if live {
			return
		}
	}
	t.Fatal("the reference cache did not start following the feed")
}

func refSite(t *testing.T, s *Store) (project, site string) {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateProject(ctx, &eim.Project{Name: "p", ID: "0f0e0d0c-0000-4000-8000-000000000001"}); err != nil && eim.ErrorCode(err) != eim.ECONFLICT {
		t.Fatal(err)
	}
	st := &eim.Site{Name: "before"}
	if err := s.Update(ctx, "p", func(tx eim.Tx) error { return tx.Create(ctx, st) }); err != nil {
		t.Fatal(err)
	}
	return "p", st.ResourceID
}

func siteName(t *testing.T, s *Store, project, id string) string {
	t.Helper()
	var name string
	err := s.View(t.Context(), project, func(tx eim.Tx) error {
		r, err := tx.Get(t.Context(), eim.KindSite, id)
		if err == nil {
			name = r.(*eim.Site).Name
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// A site read once is answered from memory by later transactions, until a
// write of it through the store.
func TestRefCacheServesReads(t *testing.T) {
	refEngines(t, func(t *testing.T, open func() *Store) {
		s := open()
		p, site := refSite(t, s)
		if got := siteName(t, s, p, site); got != "before" {
			t.Fatalf("first read: %q", got)
		}
		// Behind the store's back: not seen, as the row is kept.
		if _, err := s.db.Exec(s.d.rebind("UPDATE sites SET name = 'behind' WHERE id = ?"), site); err != nil {
			t.Fatal(err)
		}
		if got := siteName(t, s, p, site); got != "before" {
			t.Fatalf("second read: %q, want the kept row (before)", got)
		}
		// A write of another row of a cached kind leaves it kept.
		reg := &eim.Region{Name: "r"}
		if err := s.Update(t.Context(), p, func(tx eim.Tx) error { return tx.Create(t.Context(), reg) }); err != nil {
			t.Fatal(err)
		}
		if got := siteName(t, s, p, site); got != "before" {
			t.Fatalf("after another write: %q, want the kept row (before)", got)
		}
		// A write of the site itself drops it.
		err := s.Update(t.Context(), p, func(tx eim.Tx) error {
			r, err := tx.Get(t.Context(), eim.KindSite, site)
			if err != nil {
				return err
			}
			r.(*eim.Site).RegionID = reg.ResourceID
			return tx.Update(t.Context(), r)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := siteName(t, s, p, site); got != "before" {
			// The update wrote back the name it read ("before").
			t.Fatalf("after the update: %q, want before", got)
		}
	})
}

// Another process's write reaches the cache through the change feed.
func TestRefCacheOtherProcess(t *testing.T) {
	refEngines(t, func(t *testing.T, open func() *Store) {
		a, b := open(), open()
		p, site := refSite(t, a)
		if got := siteName(t, a, p, site); got != "before" {
			t.Fatalf("first read: %q", got)
		}
		if _, ok := a.refs.get(eim.KindSite, site, p); !ok {
			t.Fatal("the read did not keep the site")
		}
		err := b.Update(t.Context(), p, func(tx eim.Tx) error {
			r, err := tx.Get(t.Context(), eim.KindSite, site)
			if err != nil {
				return err
			}
			r.(*eim.Site).Name = "after"
			return tx.Update(t.Context(), r)
		})
		if err != nil {
			t.Fatal(err)
		}
		// Up to the feed's latency: a notification on PostgreSQL, the
		// watchers' poll (2 s) on SQLite.
		deadline := time.Now().Add(10 * time.Second)
		for siteName(t, a, p, site) != "after" {
			if time.Now().After(deadline) {
				t.Fatal("the other process's rename was not seen after 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// A write of a reference row read from the cache while the cache was
// behind another process's change (the feed not yet delivered) must not
// write the old row back over that change: the update names the version
// it read, fails when the row moved on, and the transaction runs again on
// the row as stored.
func TestRefCacheStaleRowNotWrittenBack(t *testing.T) {
	refEngines(t, func(t *testing.T, open func() *Store) {
		a, b := open(), open()
		p, site := refSite(t, a)
		if got := siteName(t, a, p, site); got != "before" {
			t.Fatalf("first read: %q", got)
		}
		stale, ok := a.refs.get(eim.KindSite, site, p)
		if !ok {
			t.Fatal("the read did not keep the site")
		}
		// The guard compares millisecond versions: let the clock move on.
		time.Sleep(5 * time.Millisecond)
		err := b.Update(t.Context(), p, func(tx eim.Tx) error {
			r, err := tx.Get(t.Context(), eim.KindSite, site)
			if err != nil {
				return err
			}
			r.(*eim.Site).Name = "renamed"
			return tx.Update(t.Context(), r)
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for siteName(t, a, p, site) != "renamed" {
			if time.Now().After(deadline) {
				t.Fatal("the other process's rename was not seen after 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Put the old row back, as if the feed had not delivered yet.
		a.refs.mu.Lock()
		a.refs.rows[refKey{eim.KindSite, site}] = refEntry{project: p, sc: stale}
		a.refs.mu.Unlock()

		runs := 0
		err = a.Update(t.Context(), p, func(tx eim.Tx) error {
			runs++
			r, err := tx.Get(t.Context(), eim.KindSite, site)
			if err != nil {
				return err
			}
			r.(*eim.Site).SiteLat = 123
			return tx.Update(t.Context(), r)
		})
		if err != nil {
			t.Fatal(err)
		}
		if runs != 2 || a.Races() != 1 {
			t.Errorf("the update ran %d times (races counted: %d), want 2 (once on the stale row, once on the stored one) and 1", runs, a.Races())
		}
		var got *eim.Site
		err = a.View(t.Context(), p, func(tx eim.Tx) error {
			r, err := tx.Get(t.Context(), eim.KindSite, site)
			if err == nil {
				got = r.(*eim.Site)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "renamed" || got.SiteLat != 123 {
			t.Fatalf("site: name %q, lat %d; want the other process's name and this one's latitude", got.Name, got.SiteLat)
		}
	})
}
