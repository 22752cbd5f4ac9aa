package storetest

import (
	"fmt"
	"testing"

	"github.com/eimhq/eim"
)

func testCRUD(t *testing.T, s eim.Store) {
	p := project(t, s)
	for _, k := range eim.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			r := eim.NewResource(k)
			fill(t, s, p, r)
			create(t, s, p, r)
			id := r.Base().ResourceID
			if !eim.ValidID(k, id) {
				t.Fatalf("generated ID %q: not a valid %s ID", id, k)
			}
			if r.Base().Project != p {
				t.Errorf("Project after Create: got %q, want %q", r.Base().Project, p)
			}
			got, err := get(t, s, p, k, id)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			sameStored(t, got, r)

			// Update replaces every stored field.
			upd := eim.NewResource(k)
			fill(t, s, p, upd)
			upd.Base().ResourceID = id
			update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), upd) })
			if upd.Base().Timestamps.CreatedAt != r.Base().Timestamps.CreatedAt {
				t.Errorf("CreatedAt after Update: got %v, want %v", upd.Base().Timestamps.CreatedAt, r.Base().Timestamps.CreatedAt)
			}
			if upd.Base().Timestamps.UpdatedAt.Before(r.Base().Timestamps.UpdatedAt.Time) {
				t.Errorf("UpdatedAt went back: %v before %v", upd.Base().Timestamps.UpdatedAt, r.Base().Timestamps.UpdatedAt)
			}
			got, err = get(t, s, p, k, id)
			if err != nil {
				t.Fatalf("Get after Update: %v", err)
			}
			sameStored(t, got, upd)

			update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), k, id) })
			_, err = get(t, s, p, k, id)
			wantCode(t, err, eim.ENOTFOUND)
			err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), k, id) })
			wantCode(t, err, eim.ENOTFOUND)
		})
	}
}

func testRoundTrip(t *testing.T, s eim.Store) {
	p := project(t, s)
	// Zero values: every field empty.
	for _, k := range eim.Kinds() {
		r := create(t, s, p, eim.NewResource(k))
		got, err := get(t, s, p, k, r.Base().ResourceID)
		if err != nil {
			t.Fatalf("Get %s: %v", k, err)
		}
		sameStored(t, got, r)
		ts := got.Base().Timestamps
		if ts.CreatedAt.IsZero() || ts.UpdatedAt != ts.CreatedAt {
			t.Errorf("%s timestamps: got %+v, want createdAt set and equal to updatedAt", k, ts)
		}
	}
	// Extremes.
	h := &eim.Host{MemoryBytes: 1<<63 - 1, CPUCores: 1<<32 - 1, Metadata: eim.Metadata{{Key: "", Value: ""}}, Name: "'; DROP TABLE hosts; --"}
	create(t, s, p, h)
	got, err := get(t, s, p, eim.KindHost, h.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	sameStored(t, got, h)
	site := &eim.Site{SiteLat: -900000000, SiteLng: 1800000000}
	create(t, s, p, site)
	got, err = get(t, s, p, eim.KindSite, site.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	sameStored(t, got, site)
	// Too large for the column: EINVALID naming the field, nothing stored.
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{MemoryBytes: 1 << 63}) })
	wantCode(t, err, eim.EINVALID)
	mustContain(t, err, "memoryBytes")
}

func testUpdateMissing(t *testing.T, s eim.Store) {
	p := project(t, s)
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		return tx.Update(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: "host-0000beef"}})
	})
	wantCode(t, err, eim.ENOTFOUND)
	_, err = get(t, s, p, eim.KindHost, "host-0000beef")
	wantCode(t, err, eim.ENOTFOUND)
	err = s.Update(ctx(t), p, func(tx eim.Tx) error {
		return tx.Create(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: "site-00000001"}})
	})
	wantCode(t, err, eim.EINVALID)
}

func testUniqueness(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	tests := []struct {
		name   string
		first  eim.Resource
		second eim.Resource
		secP   string
		want   string // "" = allowed; else the field the conflict names
	}{
		{"host uuid, same project", &eim.Host{UUID: "u1"}, &eim.Host{UUID: "u1"}, p1, "uuid"},
		// A UUID is claimed per project (onboarding settles a machine
		// claimed in several).
		{"host uuid, other project", &eim.Host{UUID: "u2"}, &eim.Host{UUID: "u2"}, p2, ""},
		{"host serial without uuid", &eim.Host{SerialNumber: "S1"}, &eim.Host{SerialNumber: "S1"}, p1, "serialNumber"},
		{"host serial, other project", &eim.Host{SerialNumber: "S2"}, &eim.Host{SerialNumber: "S2"}, p2, ""},
		{"host serial with distinct uuids", &eim.Host{SerialNumber: "S3", UUID: "u3"}, &eim.Host{SerialNumber: "S3", UUID: "u4"}, p1, ""},
		{"host empty uuid and serial", &eim.Host{}, &eim.Host{}, p1, ""},
		{"os name", &eim.OS{Name: "ubuntu"}, &eim.OS{Name: "ubuntu"}, p1, "name"},
		{"os name, other project", &eim.OS{Name: "ubuntu2"}, &eim.OS{Name: "ubuntu2"}, p2, ""},
		{"provider name", &eim.Provider{Name: "prov"}, &eim.Provider{Name: "prov"}, p1, "name"},
		{"custom config name", &eim.CustomConfig{Name: "cc"}, &eim.CustomConfig{Name: "cc"}, p1, "name"},
		{"local account username", &eim.LocalAccount{Username: "bob"}, &eim.LocalAccount{Username: "bob"}, p1, "username"},
		{"site name is not unique", &eim.Site{Name: "s"}, &eim.Site{Name: "s"}, p1, ""},
		{"explicit resource id", &eim.Region{Meta: eim.Meta{ResourceID: "region-00c0ffee"}}, &eim.Region{Meta: eim.Meta{ResourceID: "region-00c0ffee"}}, p2, "resourceId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create(t, s, p1, tt.first)
			err := s.Update(ctx(t), tt.secP, func(tx eim.Tx) error { return tx.Create(ctx(t), tt.second) })
			if tt.want == "" {
				if err != nil {
					t.Fatalf("second Create: got %v, want success", err)
				}
				return
			}
			wantCode(t, err, eim.ECONFLICT)
			mustContain(t, err, tt.want)
		})
	}
	// Update into a conflict, too.
	a := create(t, s, p1, &eim.Provider{Name: "a"}).(*eim.Provider)
	create(t, s, p1, &eim.Provider{Name: "b"})
	a.Name = "b"
	err := s.Update(ctx(t), p1, func(tx eim.Tx) error { return tx.Update(ctx(t), a) })
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "name", "b")
}

func testReferences(t *testing.T, s eim.Store) {
	p := project(t, s)
	// A reference to nothing is EINVALID naming the field.
	err := s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Host{SiteID: "site-00000000"}) })
	wantCode(t, err, eim.EINVALID)
	mustContain(t, err, "siteId", "site-00000000")

	site := create(t, s, p, &eim.Site{}).(*eim.Site)
	host := create(t, s, p, &eim.Host{SiteID: site.ResourceID}).(*eim.Host)
	// Deleting what is referenced is EPRECONDITION naming the referrer.
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
	mustContain(t, err, site.ResourceID)
	// Clearing the reference (empty string) frees it.
	host.SiteID = ""
	update(t, s, p, func(tx eim.Tx) error { return tx.Update(ctx(t), host) })
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })

	// Regions nest: a parent with children cannot go.
	parent := create(t, s, p, &eim.Region{Name: "parent"}).(*eim.Region)
	create(t, s, p, &eim.Region{Name: "child", ParentID: parent.ResourceID})
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindRegion, parent.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)

	// A host has at most one instance.
	create(t, s, p, &eim.Instance{HostID: host.ResourceID})
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Instance{HostID: host.ResourceID}) })
	wantCode(t, err, eim.ECONFLICT)
	mustContain(t, err, "hostID")
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, host.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
}

func testCascade(t *testing.T, s eim.Store) {
	p := project(t, s)
	host := create(t, s, p, &eim.Host{}).(*eim.Host)
	site := create(t, s, p, &eim.Site{}).(*eim.Site)
	ss := create(t, s, p, &eim.SingleSchedule{TargetHostID: host.ResourceID})
	rs := create(t, s, p, &eim.RepeatedSchedule{TargetHostID: host.ResourceID})
	other := create(t, s, p, &eim.SingleSchedule{TargetSiteID: site.ResourceID})
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, host.ResourceID) })
	for _, r := range []eim.Resource{ss, rs} {
		_, err := get(t, s, p, r.ResourceKind(), r.Base().ResourceID)
		wantCode(t, err, eim.ENOTFOUND)
	}
	if _, err := get(t, s, p, eim.KindSingleSchedule, other.Base().ResourceID); err != nil {
		t.Fatalf("schedule of a site after deleting a host: %v", err)
	}
	evs, err := s.Events(ctx(t), rev, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]eim.Op{}
	for _, e := range evs {
		got[e.ID] = e.Op
	}
	for _, id := range []string{host.ResourceID, ss.Base().ResourceID, rs.Base().ResourceID} {
		if got[id] != eim.OpDeleted {
			t.Errorf("event of %s: got %q, want DELETED (events %+v)", id, got[id], evs)
		}
	}
	// Site targets restrict.
	err = s.Update(ctx(t), p, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindSite, site.ResourceID) })
	wantCode(t, err, eim.EPRECONDITION)
}

func testAbort(t *testing.T, s eim.Store) {
	p := project(t, s)
	create(t, s, p, &eim.OS{Name: "dup"})
	before, _ := s.Revision(ctx(t))
	// fn ignores the failed Create and returns nil: nothing of the
	// transaction may be written.
	err := s.Update(ctx(t), p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), &eim.Region{Name: "kept?"}); err != nil {
			return err
		}
		_ = tx.Create(ctx(t), &eim.OS{Name: "dup"})
		return nil
	})
	if err == nil {
		t.Fatal("Update after an ignored failed statement: got nil error, want the failure")
	}
	n := count(t, s, p, eim.KindRegion, eim.Query{})
	if n != 0 {
		t.Errorf("regions after aborted tx: got %d, want 0", n)
	}
	after, _ := s.Revision(ctx(t))
	if after != before {
		t.Errorf("revision after aborted tx: got %d, want %d", after, before)
	}
}

func testReadOnly(t *testing.T, s eim.Store) {
	p := project(t, s)
	err := s.View(ctx(t), p, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Region{}) })
	if err == nil {
		t.Fatal("Create in View: got nil error")
	}
	if n := count(t, s, p, eim.KindRegion, eim.Query{}); n != 0 {
		t.Fatalf("regions after Create in View: got %d, want 0", n)
	}
}

func testIDs(t *testing.T, s eim.Store) {
	p := project(t, s)
	seen := map[string]bool{}
	update(t, s, p, func(tx eim.Tx) error {
		for i := range 300 {
			r := &eim.Region{Name: fmt.Sprint(i)}
			if err := tx.Create(ctx(t), r); err != nil {
				return err
			}
			if !eim.ValidID(eim.KindRegion, r.ResourceID) || seen[r.ResourceID] {
				return fmt.Errorf("ID %q: invalid or repeated", r.ResourceID)
			}
			seen[r.ResourceID] = true
		}
		return nil
	})
	// A caller-chosen ID is kept.
	r := create(t, s, p, &eim.Region{Meta: eim.Meta{ResourceID: "region-12345678"}})
	if r.Base().ResourceID != "region-12345678" {
		t.Fatalf("explicit ID: got %q", r.Base().ResourceID)
	}
}

func count(t *testing.T, s eim.Store, p string, k eim.Kind, q eim.Query) int {
	t.Helper()
	var n int
	err := s.View(ctx(t), p, func(tx eim.Tx) error {
		var err error
		n, err = tx.Count(ctx(t), k, q)
		return err
	})
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return n
}

func list(t *testing.T, s eim.Store, p string, k eim.Kind, q eim.Query) ([]eim.Resource, int) {
	t.Helper()
	var (
		items []eim.Resource
		total int
	)
	err := s.View(ctx(t), p, func(tx eim.Tx) error {
		var err error
		items, total, err = tx.List(ctx(t), k, q)
		return err
	})
	if err != nil {
		t.Fatalf("List %s %+v: %v", k, q, err)
	}
	return items, total
}
