package storetest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testUpdateFields: UpdateFields writes the named fields and nothing else
// of what the resource holds, bumps UpdatedAt, names its event, and says
// what is wrong with a bad call.
func testUpdateFields(t *testing.T, s eim.Store) {
	p := project(t, s)
	site := create(t, s, p, &eim.Site{Name: "s"}).(*eim.Site)
	h := create(t, s, p, &eim.Host{Name: "before", Note: "kept", NodeSecretHash: "old", NodeCredGen: 1,
		Metadata: eim.Metadata{{Key: "a", Value: "b"}}}).(*eim.Host)
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	// What the writer holds besides the named fields is not written: a
	// stale copy of the others, or nothing at all.
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "stale", Note: "stale",
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: 42,
		SiteID: site.ResourceID, NodeSecretHash: "new", NodeCredGen: 2,
		HostNics: eim.List[eim.HostNic]{{DeviceName: "eth0", Mtu: 1500}}}
	update(t, s, p, func(tx eim.Tx) error {
		// JSON names, a reference, a JSON list, hidden fields by column;
		// a field named twice is written once.
		return tx.UpdateFields(ctx(t), w, "hostStatus", "host_status_indicator", "hostStatusTimestamp", "siteId",
			"hostNics", "node_secret_hash", "node_cred_gen", "hostStatus")
	})
	got, err := get(t, s, p, eim.KindHost, h.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	g := got.(*eim.Host)
	if g.Name != "before" || g.Note != "kept" || len(g.Metadata) != 1 {
		t.Errorf("fields not named: name %q, note %q, metadata %v; want them as stored (before, kept, [a=b])", g.Name, g.Note, g.Metadata)
	}
	if g.HostStatus != "Running" || g.HostStatusIndicator != eim.StatusIdle || g.HostStatusTimestamp != 42 || g.SiteID != site.ResourceID ||
		len(g.HostNics) != 1 || g.HostNics[0].DeviceName != "eth0" || g.NodeSecretHash != "new" || g.NodeCredGen != 2 {
		t.Errorf("fields named: got %+v, want them written", g)
	}
	if !g.Timestamps.UpdatedAt.After(h.Timestamps.UpdatedAt.Time) || !g.Timestamps.CreatedAt.Equal(h.Timestamps.CreatedAt.Time) {
		t.Errorf("timestamps: created %v updated %v, before created %v updated %v; want updatedAt bumped, createdAt kept", g.Timestamps.CreatedAt, g.Timestamps.UpdatedAt, h.Timestamps.CreatedAt, h.Timestamps.UpdatedAt)
	}
	if !w.Timestamps.UpdatedAt.Equal(g.Timestamps.UpdatedAt.Time) || w.Project != p || !w.Timestamps.CreatedAt.Equal(g.Timestamps.CreatedAt.Time) {
		t.Errorf("the writer's copy: project %q, created %v, updated %v; want the stored %q, %v, %v", w.Project, w.Timestamps.CreatedAt, w.Timestamps.UpdatedAt, p, g.Timestamps.CreatedAt, g.Timestamps.UpdatedAt)
	}
	evs, err := s.Events(ctx(t), rev, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != eim.KindHost || evs[0].ID != h.ResourceID || evs[0].Op != eim.OpUpdated || evs[0].Project != p {
		t.Errorf("events: got %+v, want one update of host %s", evs, h.ResourceID)
	}

	// An empty reference is stored as none.
	w.SiteID = ""
	update(t, s, p, func(tx eim.Tx) error { return tx.UpdateFields(ctx(t), w, "siteId") })
	if got, _ := get(t, s, p, eim.KindHost, h.ResourceID); got.(*eim.Host).SiteID != "" {
		t.Errorf("siteId after writing \"\": got %q", got.(*eim.Host).SiteID)
	}
	// The site may go now: nothing refers to it.
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })

	// Every write is a new version, even several in one millisecond.
	update(t, s, p, func(tx eim.Tx) error {
		last := w.Timestamps.UpdatedAt
		for i := range 5 {
			w.HostStatusTimestamp = uint64(100 + i)
			if err := tx.UpdateFields(ctx(t), w, "hostStatusTimestamp"); err != nil {
				return err
			}
			if !w.Timestamps.UpdatedAt.After(last.Time) {
				t.Errorf("write %d: updatedAt %v, not after the previous %v", i, w.Timestamps.UpdatedAt, last)
			}
			last = w.Timestamps.UpdatedAt
		}
		return nil
	})

	bad := []struct {
		name   string
		r      eim.Resource
		fields []string
		code   string
	}{
		{"no fields", w, nil, eim.EINVALID},
		{"unknown field", w, []string{"colour"}, eim.EINVALID},
		{"derived field", w, []string{"site"}, eim.EINVALID},
		{"the ID", w, []string{"resourceId"}, eim.EINVALID},
		{"the project", w, []string{"project"}, eim.EINVALID},
		{"a timestamp", w, []string{"updatedAt"}, eim.EINVALID},
		{"a timestamp by column", w, []string{"created_at"}, eim.EINVALID},
		{"no ID", &eim.Host{}, []string{"name"}, eim.EINVALID},
		{"a malformed ID", &eim.Host{Meta: eim.Meta{ResourceID: "site-12345678"}}, []string{"name"}, eim.EINVALID},
		{"missing", &eim.Host{Meta: eim.Meta{ResourceID: "host-0000abcd"}}, []string{"name"}, eim.ENOTFOUND},
		{"a dangling reference", &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, SiteID: site.ResourceID}, []string{"siteId"}, eim.EINVALID},
	}
	for _, b := range bad {
		err := s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.UpdateFields(ctx(t), b.r, b.fields...) })
		if eim.ErrorCode(err) != b.code {
			t.Errorf("%s: got %v, want %s", b.name, err, b.code)
		}
	}
	// Another project's row is not found from a scoped transaction.
	other := project(t, s)
	err = s.Update(ctx(t), other, func(tx eim.Tx) error {
		return tx.UpdateFields(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Name: "x"}, "name")
	})
	wantCode(t, err, eim.ENOTFOUND)
	// A read-only transaction refuses.
	err = s.View(ctx(t), p, func(tx eim.Tx) error { return tx.UpdateFields(ctx(t), w, "name") })
	if err == nil {
		t.Error("UpdateFields in View: got nil error")
	}
	if got, _ := get(t, s, p, eim.KindHost, h.ResourceID); got.(*eim.Host).Name != "before" {
		t.Errorf("name after refused writes: got %q, want before", got.(*eim.Host).Name)
	}
}

// testUpdateFieldsIf: the conditions are checked on the row written; a
// row that no longer meets them makes the transaction run again, on the
// row as it is now.
func testUpdateFieldsIf(t *testing.T, s eim.Store) {
	p := project(t, s)
	h := create(t, s, p, &eim.Host{Name: "h", HostStatus: "Running", NodeCredGen: 3}).(*eim.Host)
	set := func(status string, when ...eim.Cond) error {
		return s.Update(ctx(t), p, func(tx eim.Tx) error {
			return tx.UpdateFieldsIf(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, HostStatus: status}, when, "hostStatus")
		})
	}
	if err := set("Rebooting", eim.Cond{Field: "hostStatus", Value: "Running"}, eim.Cond{Field: "node_cred_gen", Value: int64(3)}); err != nil {
		t.Fatalf("conditions met: %v", err)
	}
	if got, _ := get(t, s, p, eim.KindHost, h.ResourceID); got.(*eim.Host).HostStatus != "Rebooting" {
		t.Fatalf("status: got %q, want Rebooting", got.(*eim.Host).HostStatus)
	}
	for _, c := range []eim.Cond{{Field: "colour", Value: "x"}, {Field: "nodeCredGen", Value: int64(3)}} {
		wantCode(t, set("x", c), eim.EINVALID)
	}
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		return tx.UpdateFieldsIf(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: "host-0000abcd"}}, []eim.Cond{{Field: "hostStatus", Value: ""}}, "hostStatus")
	})
	wantCode(t, err, eim.ENOTFOUND)

	// A writer decides on what it read; another changes it before the
	// write: the write is not made over the change, the transaction runs
	// again and decides on the new value.
	var runs atomic.Int32
	var other chan error
	err = s.Update(ctx(t), p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		read := r.(*eim.Host).HostStatus
		if runs.Add(1) == 1 {
			// Meanwhile, another transaction (on SQLite it waits for
			// this one, and writes after it).
			other = make(chan error, 1)
			go func() { other <- set("Invalidated") }()
			select {
			case err := <-other:
				other <- err
			case <-time.After(300 * time.Millisecond):
			}
		}
		if read != "Rebooting" && read != "Running" {
			return nil // not this writer's to change any more
		}
		return tx.UpdateFieldsIf(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, HostStatus: "Running"},
			[]eim.Cond{{Field: "hostStatus", Value: read}}, "hostStatus")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	got, _ := get(t, s, p, eim.KindHost, h.ResourceID)
	switch st := got.(*eim.Host).HostStatus; {
	case runs.Load() == 1 && st != "Invalidated":
		// Serial writers: this one wrote first, the other after it.
		t.Errorf("status: got %q, want the later writer's Invalidated", st)
	case runs.Load() > 1 && st != "Invalidated":
		t.Errorf("status after the conditional write ran again: got %q, want Invalidated (not written over)", st)
	}
	t.Logf("the conditional writer ran %d time(s)", runs.Load())
}

// testFieldWritesDoNotRace: a module writing a host's status and the API
// writing its name, each reading the host first and writing only its
// field, do not undo each other's change, and neither transaction is run
// again: neither writes what it did not change. Both orders: the module
// holding the row it read while the API writes, and the API holding it
// while the module writes. A whole-row write of a stale row still runs
// again rather than write the other's field back.
func testFieldWritesDoNotRace(t *testing.T, s eim.Store) {
	type writer struct {
		field, value string
	}
	status := writer{"hostStatus", "Running"}
	name := writer{"name", "renamed"}
	apply := func(h *eim.Host, w writer) {
		if w.field == "name" {
			h.Name = w.value
		} else {
			h.HostStatus = w.value
		}
	}
	for _, tc := range []struct {
		name         string
		first, other writer
		wholeRow     bool
		// wrote: the first writer holds its transaction open after its
		// write (its row lock, on a store that has them), not before.
		wrote bool
	}{
		{"module holds", status, name, false, false},
		{"API holds", name, status, false, false},
		{"module wrote", status, name, false, true},
		{"API wrote", name, status, false, true},
		{"whole row holds", name, status, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := project(t, s)
			h := create(t, s, p, &eim.Host{Name: "before", HostStatus: "Not Connected"}).(*eim.Host)
			var runsFirst, runsOther atomic.Int32
			read := make(chan struct{})
			errFirst := make(chan error, 1)
			go func() {
				errFirst <- s.Update(ctx(t), p, func(tx eim.Tx) error {
					r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
					if err != nil {
						return err
					}
					hold := func() {
						if runsFirst.Add(1) == 1 {
							close(read)
							// Long enough for the other writer to commit
							// here, unless the store makes it wait.
							time.Sleep(300 * time.Millisecond)
						}
					}
					if !tc.wrote {
						hold()
					}
					apply(r.(*eim.Host), tc.first)
					if tc.wholeRow {
						err = tx.Update(ctx(t), r)
					} else {
						err = tx.UpdateFields(ctx(t), r, tc.first.field)
					}
					if tc.wrote {
						hold()
					}
					return err
				})
			}()
			<-read
			err := s.Update(ctx(t), p, func(tx eim.Tx) error {
				runsOther.Add(1)
				r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
				if err != nil {
					return err
				}
				apply(r.(*eim.Host), tc.other)
				return tx.UpdateFields(ctx(t), r, tc.other.field)
			})
			if err != nil {
				t.Fatalf("second writer: %v", err)
			}
			if err := <-errFirst; err != nil {
				t.Fatalf("first writer: %v", err)
			}
			got, err := get(t, s, p, eim.KindHost, h.ResourceID)
			if err != nil {
				t.Fatal(err)
			}
			if g := got.(*eim.Host); g.Name != "renamed" || g.HostStatus != "Running" {
				t.Fatalf("host after both writers: name %q, status %q; want renamed and Running (a change was lost)", g.Name, g.HostStatus)
			}
			if runsOther.Load() != 1 {
				t.Errorf("the second writer ran %d times, want once", runsOther.Load())
			}
			if !tc.wholeRow && runsFirst.Load() != 1 {
				t.Errorf("the first writer ran %d times, want once: it writes its own field only", runsFirst.Load())
			}
			t.Logf("the first writer ran %d time(s)", runsFirst.Load())
		})
	}
}

// testStaleRowNotWritten: a whole row read before another writer's change
// (here in an earlier transaction, as a row kept across transactions
// would be) is not written back over it, on every engine: the write names
// the version it read, and a transaction that keeps writing the stale row
// gives up. Read afresh, it is written.
func testStaleRowNotWritten(t *testing.T, s eim.Store) {
	p := project(t, s)
	h := create(t, s, p, &eim.Host{Name: "h"}).(*eim.Host)
	stale, err := get(t, s, p, eim.KindHost, h.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer, in the same millisecond as likely as not.
	update(t, s, p, func(tx eim.Tx) error {
		return tx.UpdateFields(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, Note: "noted"}, "note")
	})
	stale.(*eim.Host).Name = "stale"
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Update(ctx(t), stale) })
	wantCode(t, err, eim.EUNAVAILABLE)
	got, _ := get(t, s, p, eim.KindHost, h.ResourceID)
	if g := got.(*eim.Host); g.Name != "h" || g.Note != "noted" {
		t.Fatalf("host after a stale write: name %q, note %q; want h and noted", g.Name, g.Note)
	}
	update(t, s, p, func(tx eim.Tx) error {
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		r.(*eim.Host).Name = "fresh"
		// Written twice in one transaction (and millisecond): the first
		// write gives r the new version.
		if err := tx.Update(ctx(t), r); err != nil {
			return err
		}
		return tx.Update(ctx(t), r)
	})
	got, _ = get(t, s, p, eim.KindHost, h.ResourceID)
	if g := got.(*eim.Host); g.Name != "fresh" || g.Note != "noted" {
		t.Fatalf("host after a fresh write: name %q, note %q; want fresh and noted", g.Name, g.Note)
	}
}
