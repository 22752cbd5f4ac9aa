package storetest

import (
	"context"
	"testing"

	"github.com/eimhq/eim"
)

// updateGrouped runs fn grouped and waits for its events to be in the feed.
func updateGrouped(ctx context.Context, s eim.Store, project string, fn func(eim.Tx) error) error {
	sequenced, err := s.UpdateGrouped(ctx, project, fn)
	if err == nil {
		sequenced()
	}
	return err
}

// testGroupedCreates: creates held back by a grouped transaction store
// every field of every kind as a lone create does, are seen by the
// transaction's later statements, keep their order (a create may refer to
// an earlier one), and fail the transaction as a whole, leaving nothing
// behind and the creates fit to be run again.
func testGroupedCreates(t *testing.T, s eim.Store) {
	p := project(t, s)

	// Every kind, two of each, in one transaction.
	var made []eim.Resource
	for _, k := range eim.Kinds() {
		for range 2 {
			r := eim.NewResource(k)
			fill(t, s, p, r)
			made = append(made, r)
		}
	}
	err := updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		for _, r := range made {
			if err := tx.Create(ctx(t), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("grouped creates of every kind: %v", err)
	}
	for _, r := range made {
		got, err := get(t, s, p, r.ResourceKind(), r.Base().ResourceID)
		if err != nil {
			t.Fatalf("get %s: %v", r.ResourceKind(), err)
		}
		sameStored(t, got, r)
	}

	// In order, and visible to the transaction's later statements.
	h := &eim.Host{Name: "grouped"}
	inst := &eim.Instance{Name: "on grouped"}
	err = updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), h); err != nil {
			return err
		}
		inst.HostID = h.ResourceID
		if err := tx.Create(ctx(t), inst); err != nil {
			return err
		}
		r, err := tx.Get(ctx(t), eim.KindHost, h.ResourceID)
		if err != nil {
			return err
		}
		r.(*eim.Host).Note = "updated in the same transaction"
		return tx.Update(ctx(t), r)
	})
	if err != nil {
		t.Fatalf("create, refer, read and update in one grouped transaction: %v", err)
	}
	if r, err := get(t, s, p, eim.KindHost, h.ResourceID); err != nil || r.(*eim.Host).Note != "updated in the same transaction" {
		t.Fatalf("after the grouped transaction: %v, %v", r, err)
	}

	// A conflict fails the whole transaction.
	uuid := "5eed0000-0000-4000-8000-000000000001"
	first, dup := &eim.Host{Name: "first", UUID: uuid}, &eim.Host{Name: "dup", UUID: uuid}
	other := &eim.Host{Name: "other"}
	err = updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		for _, r := range []eim.Resource{first, other, dup} {
			if err := tx.Create(ctx(t), r); err != nil {
				return err
			}
		}
		return nil
	})
	wantCode(t, err, eim.ECONFLICT)
	if dup.ResourceID != "" {
		t.Errorf("dup: generated ID %s kept after the failed write", dup.ResourceID)
	}
	var n int
	err = s.View(ctx(t), p, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{})
		for _, r := range items {
			if name := r.(*eim.Host).Name; name == "first" || name == "other" || name == "dup" {
				n++
			}
		}
		return err
	})
	if err != nil || n != 0 {
		t.Fatalf("after the failed grouped transaction: %d of its hosts stored, %v", n, err)
	}
	// The innocent creates, re-run without the culprit as the Batcher
	// does, commit.
	err = updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), first); err != nil {
			return err
		}
		return tx.Create(ctx(t), other)
	})
	if err != nil {
		t.Fatalf("re-run without the conflicting create: %v", err)
	}
	for _, h := range []*eim.Host{first, other} {
		if _, err := get(t, s, p, eim.KindHost, h.ResourceID); err != nil {
			t.Fatalf("%s after the re-run: %v", h.Name, err)
		}
	}

	// An ID taken already fails the whole transaction too, also when it is
	// nothing but creates (on PostgreSQL one statement, its own commit).
	taken := create(t, s, p, &eim.Host{Name: "taken"}).Base().ResourceID
	innocent := &eim.Host{Name: "innocent"}
	err = updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), innocent); err != nil {
			return err
		}
		return tx.Create(ctx(t), &eim.Host{Meta: eim.Meta{ResourceID: taken}, Name: "again"})
	})
	wantCode(t, err, eim.ECONFLICT)
	err = s.View(ctx(t), p, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx(t), eim.KindHost, eim.Query{})
		for _, r := range items {
			if r.(*eim.Host).Name == "innocent" {
				t.Errorf("the other create of a transaction that failed on a taken ID was stored (%s)", r.Base().ResourceID)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Their events are in the feed, as a lone create's.
	rev, err := s.Revision(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := &eim.Region{Name: "a"}, &eim.Region{Name: "b"}
	err = updateGrouped(ctx(t), s, p, func(tx eim.Tx) error {
		if err := tx.Create(ctx(t), a); err != nil {
			return err
		}
		return tx.Create(ctx(t), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx(t), rev, 10, eim.KindRegion)
	if err != nil || len(evs) != 2 || evs[0].ID != a.ResourceID || evs[1].ID != b.ResourceID || evs[0].Op != eim.OpCreated {
		t.Fatalf("events: %+v, %v; want the creates of %s and %s", evs, err, a.ResourceID, b.ResourceID)
	}
}
