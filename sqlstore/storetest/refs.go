package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// testRefsAcrossTx: rows of the kinds a store may keep across transactions
// (sites, regions…) read after a write see that write, in every scope, and
// never an older row than one read before.
func testRefsAcrossTx(t *testing.T, s eim.Store) {
	p, other := project(t, s), project(t, s)
	reg := create(t, s, p, &eim.Region{Name: "r"}).Base().ResourceID
	site := create(t, s, p, &eim.Site{Name: "v0000", RegionID: reg}).Base().ResourceID
	name := func(project string) (string, error) {
		r, err := get(t, s, project, eim.KindSite, site)
		if err != nil {
			return "", err
		}
		return r.(*eim.Site).Name, nil
	}
	rename := func(to string) {
		t.Helper()
		update(t, s, p, func(tx eim.Tx) error {
			r, err := tx.Get(ctx(t), eim.KindSite, site)
			if err != nil {
				return err
			}
			r.(*eim.Site).Name = to
			return tx.Update(ctx(t), r)
		})
	}
	for _, scope := range []string{p, ""} {
		if n, err := name(scope); err != nil || n != "v0000" {
			t.Fatalf("scope %q: %q, %v; want v0000", scope, n, err)
		}
	}
	// Another project does not see it, however often it was read.
	if _, err := get(t, s, other, eim.KindSite, site); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("from another project: %v, want ENOTFOUND", err)
	}

	rename("v0001")
	for _, scope := range []string{p, ""} {
		if n, err := name(scope); err != nil || n != "v0001" {
			t.Fatalf("after a rename, scope %q: %q, %v; want v0001", scope, n, err)
		}
	}

	// A write transaction that rolls back leaves nothing behind, not even
	// the rows it read after its own write.
	errRollback := errors.New("roll back")
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindSite, site)
		if err != nil {
			return err
		}
		r.(*eim.Site).Name = "never committed"
		if err := tx.Update(ctx(t), r); err != nil {
			return err
		}
		if _, err := tx.Get(ctx(t), eim.KindSite, site); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back update: %v", err)
	}
	if n, err := name(p); err != nil || n != "v0001" {
		t.Fatalf("after a rolled-back rename: %q, %v; want v0001", n, err)
	}

	// Readers racing a writer: each sees the names in order, and all see
	// the last one once the writer has returned.
	const renames = 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for i := range 4 {
		scope := p
		if i%2 == 1 {
			scope = ""
		}
		write := i >= 2 // read inside write transactions too
		wg.Go(func() {
			last := ""
			for {
				select {
				case <-stop:
					return
				default:
				}
				var n string
				read := func(tx eim.Tx) error {
					r, err := tx.Get(ctx(t), eim.KindSite, site)
					if err == nil {
						n = r.(*eim.Site).Name
					}
					return err
				}
				var err error
				if write {
					err = s.Update(ctx(t), scope, read)
				} else {
					err = s.View(ctx(t), scope, read)
				}
				if err != nil {
					errs <- err
					return
				}
				if n < last {
					errs <- fmt.Errorf("scope %q: read %s after %s", scope, n, last)
					return
				}
				last = n
			}
		})
	}
	for i := 2; i <= renames; i++ {
		rename(fmt.Sprintf("v%04d", i))
		want := fmt.Sprintf("v%04d", i)
		if n, err := name(""); err != nil || n != want {
			t.Fatalf("right after rename %d: %q, %v", i, n, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A deleted site is gone for every later transaction.
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site) })
	for _, scope := range []string{p, ""} {
		if _, err := get(t, s, scope, eim.KindSite, site); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("after the delete, scope %q: %v, want ENOTFOUND", scope, err)
		}
	}
	// And the region with its project.
	if _, err := get(t, s, p, eim.KindRegion, reg); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProject(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, s, "", eim.KindRegion, reg); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("region of a deleted project: %v, want ENOTFOUND", err)
	}
}
