package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// testOnCommit: a hook registered with OnCommit hears every committed
// change, with its events, before the write returns, through Update and
// UpdateGrouped alike; a rolled-back write and a read call nothing.
func testOnCommit(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	var mu sync.Mutex
	var heard []string
	s.OnCommit(func(evs []eim.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			heard = append(heard, fmt.Sprintf("%s %s %s", ev.Op, ev.Kind, ev.Project))
		}
	})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := heard
		heard = nil
		return out
	}
	r := &eim.Region{Name: "r"}
	update(t, s, p, func(tx eim.Tx) error {
		if err := tx.Create(c, r); err != nil {
			return err
		}
		r.Name = "r2"
		return tx.Update(c, r)
	})
	want := []string{"CREATED region " + p, "UPDATED region " + p}
	if got := take(); !slices.Equal(got, want) {
		t.Fatalf("after Update: heard %v, want %v", got, want)
	}
	err := s.Update(c, p, func(tx eim.Tx) error {
		if err := tx.Create(c, &eim.Region{Name: "gone"}); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the write that failed committed")
	}
	if err := s.View(c, p, func(tx eim.Tx) error { _, err := tx.Get(c, eim.KindRegion, r.ResourceID); return err }); err != nil {
		t.Fatal(err)
	}
	if got := take(); len(got) != 0 {
		t.Fatalf("a rolled-back write and a read: heard %v, want nothing", got)
	}
	if err := updateGrouped(c, s, p, func(tx eim.Tx) error {
		if err := tx.Create(c, &eim.Region{Name: "a"}); err != nil {
			return err
		}
		return tx.Create(c, &eim.Region{Name: "b"})
	}); err != nil {
		t.Fatal(err)
	}
	want = []string{"CREATED region " + p, "CREATED region " + p}
	if got := take(); !slices.Equal(got, want) {
		t.Fatalf("after UpdateGrouped: heard %v, want %v", got, want)
	}
}
