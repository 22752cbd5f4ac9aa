package sqlstore_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// A database that goes away (every connection dropped, new ones refused:
// a restart, a failover, a network cut) makes every kind of store call
// fail with "unavailable", never an internal error, and the store serves
// again by itself once the database is back: no restart, no reopen.
func TestPostgresDatabaseAway(t *testing.T) {
	s, proxy := behindProxy(t)
	ctx := t.Context()
	create := func(name string) error {
		return s.Update(ctx, "p", func(tx eim.Tx) error {
			return tx.Create(ctx, &eim.Region{Name: name})
		})
	}
	if err := create("before"); err != nil {
		t.Fatal(err)
	}

	// A watcher hears of the outage as "unavailable" too.
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() {
		for _, err := range s.Watch(wctx, rev, eim.KindRegion) {
			if err != nil {
				watchErr <- err
				return
			}
		}
	}()

	proxy.Cut()
	calls := map[string]func() error{
		"View (list)": func() error {
			return s.View(ctx, "p", func(tx eim.Tx) error {
				_, _, err := tx.List(ctx, eim.KindRegion, eim.Query{Limit: 10})
				return err
			})
		},
		"Update (create)": func() error { return create("during") },
		"Revision":        func() error { _, err := s.Revision(ctx); return err },
		"ListProjects":    func() error { _, err := s.ListProjects(ctx); return err },
		"LastSeen":        func() error { _, err := s.LastSeen(ctx); return err },
		"LastSeenOf":      func() error { _, err := s.LastSeenOf(ctx, []string{"host-12345678"}); return err },
		"Claim":           func() error { _, err := s.Claim(ctx, "l", "me", time.Minute); return err },
		"Release":         func() error { return s.Release(ctx, "l", "me") },
		"Announce":        func() error { return s.Announce(ctx, eim.Member{ID: "me"}, time.Minute) },
		"Members":         func() error { _, err := s.Members(ctx); return err },
		"Leave":           func() error { return s.Leave(ctx, "me") },
		"SaveLastSeen": func() error {
			return s.SaveLastSeen(ctx, []eim.LastSeen{{Project: "p", HostID: "host-12345678", At: time.Now()}})
		},
	}
	for name, call := range calls {
		err := call()
		t.Logf("%s: %v", name, err)
		if got := eim.ErrorCode(err); got != eim.EUNAVAILABLE {
			t.Errorf("%s with the database away: got %v (code %q), want code %q", name, err, got, eim.EUNAVAILABLE)
		}
	}
	select {
	case err := <-watchErr:
		if eim.ErrorCode(err) != eim.EUNAVAILABLE {
			t.Errorf("Watch with the database away: got %v, want code %q", err, eim.EUNAVAILABLE)
		}
	case <-time.After(10 * time.Second):
		t.Error("Watch did not report the outage within 10 s")
	}

	proxy.Restore()
	// Back at once: the pool reconnects on demand. The first write after
	// the cut may still meet a connection the cut broke; the store does not
	// retry writes (their commit may have happened), so callers see
	// "unavailable" and retry, as clients do here.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := create("after")
		if err == nil {
			break
		}
		if eim.ErrorCode(err) != eim.EUNAVAILABLE {
			t.Fatalf("create after the database came back: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("create still failing 10 s after the database came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, call := range calls {
		if name == "Update (create)" || name == "NodeCredentials" {
			continue // a create of an existing name; a host that does not exist
		}
		if err := call(); err != nil {
			t.Errorf("%s after the database came back: %v", name, err)
		}
	}
	var names []string
	if err := s.View(ctx, "p", func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindRegion, eim.Query{Limit: 10})
		for _, it := range items {
			names = append(names, it.(*eim.Region).Name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Errorf("regions after the outage: %v, want before and after (the write refused during it must not have happened)", names)
	}
}

// Reads ride out a pool of connections broken under them (the database
// restarted between two requests): the store runs a read again on a new
// connection instead of answering the first caller "unavailable".
func TestPostgresReadAfterBrokenPool(t *testing.T) {
	s, proxy := behindProxy(t)
	ctx := t.Context()
	list := func() error {
		return s.View(ctx, "p", func(tx eim.Tx) error {
			_, _, err := tx.List(ctx, eim.KindRegion, eim.Query{Limit: 10})
			return err
		})
	}
	// Fill the pools with idle connections.
	for range 8 {
		if err := list(); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Cut()
	proxy.Restore()
	for i := range 8 {
		if err := list(); err != nil {
			t.Fatalf("read %d after the pool's connections broke: %v", i, err)
		}
	}
}

// behindProxy opens a store on a fresh PostgreSQL database through a proxy
// the test can cut, with a project "p".
func behindProxy(t *testing.T) (*sqlstore.Store, *storetest.Proxy) {
	t.Helper()
	dsn := sqlstore.FreshPostgresURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.NewProxy(t, u.Host)
	s := openStore(t, proxy.URL(t, dsn))
	if err := s.CreateProject(t.Context(), &eim.Project{Name: "p", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	return s, proxy
}
