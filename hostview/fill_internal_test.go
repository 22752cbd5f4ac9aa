package hostview

import (
	"context"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
)

// A page read ahead is kept only when no host was dropped while it was
// read: the dropped host may be in it, with what it was before. Hosts the
// view holds already are left as they are.
func TestFillStalePage(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), ":memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := New(Options{Store: st})
	old := eim.StatusValue{Text: "old"}
	page := []eim.HostRow{
		{ID: "host-00000001", Project: "p", Status: old},
		{ID: "host-00000002", Project: "p", Status: old},
	}
	held := func(id string) *Host {
		sh := v.shard(id)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if e := sh.m[id]; e != nil {
			return e.h
		}
		return nil
	}
	mark := v.changes.Load()
	v.changed([]eim.Event{{Kind: eim.KindHost, ID: "host-00000001"}})
	if v.fill(mark, page, nil) {
		t.Fatal("a page read while a host changed was kept")
	}
	if held("host-00000001") != nil || held("host-00000002") != nil {
		t.Fatal("hosts kept from a stale page")
	}
	// Events of other kinds do not make a page stale.
	mark = v.changes.Load()
	v.changed([]eim.Event{{Kind: eim.KindInstance, ID: "inst-00000001"}})
	if !v.fill(mark, page, nil) || held("host-00000002") == nil {
		t.Fatal("a page was refused for an instance's change")
	}
	// What the view holds is at least as new as a page.
	newer := eim.HostRow{ID: "host-00000003", Project: "p", Status: eim.StatusValue{Text: "new"}}
	v.fill(v.changes.Load(), []eim.HostRow{newer}, nil)
	older := eim.HostRow{ID: "host-00000003", Project: "p", Status: old}
	v.fill(v.changes.Load(), []eim.HostRow{older}, nil)
	if got := held("host-00000003").HostStatus(); got != "new" {
		t.Fatalf("a page replaced a held host: %q, want new", got)
	}
}
