package inventory_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// gone polls until the resource no longer exists.
func (e *env) gone(k eim.Kind, id string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := e.svc.Get(e.ctx, e.proj, k, id)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s %s: still there after 10 s (err %v)", k, id, err)
		}
		time.Sleep(10 * time.Millisecond) // polling, not waiting for timing
	}
}

func TestReaper(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		o := e.os("ubuntu")
		// A delete pending before the reaper starts: found by its first re-list.
		early := e.host("early", "")
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, early.ResourceID))

		before := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		// A long interval: the deletes below must come from the change feed.
		r := inventory.NewReaper(e.svc, inventory.ReaperOptions{Interval: time.Hour})
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: got %v, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return after cancel")
			}
			// Run's goroutines are gone once it returned.
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("goroutines: got %d after Run returned, want ≤ %d", n, before)
			}
		}()
		e.gone(eim.KindHost, early.ResourceID)

		h := e.host("h", "")
		in := e.instance(h.ResourceID, o.ResourceID)
		keep := e.host("keep", "")
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindInstance, in.ResourceID))
		e.gone(eim.KindInstance, in.ResourceID)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		e.gone(eim.KindHost, h.ResourceID)
		// A host deleted with its instance: both go, from the feed alone.
		h = e.host("h2", "")
		in = e.instance(h.ResourceID, o.ResourceID)
		noErr(t, e.svc.Delete(e.ctx, e.proj, eim.KindHost, h.ResourceID))
		e.gone(eim.KindInstance, in.ResourceID)
		e.gone(eim.KindHost, h.ResourceID)
		if got := e.get(eim.KindHost, keep.ResourceID).(*eim.Host).DesiredState; got != eim.HostStateOnboarded {
			t.Errorf("untouched host: got %s", got)
		}
	})
}

func TestReaperRelist(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		done := make(chan error, 1)
		r := inventory.NewReaper(e.svc, inventory.ReaperOptions{Interval: 20 * time.Millisecond})
		go func() { done <- r.Run(ctx) }()
		// Written behind the service's back (a manager) — the feed sees
		// it too, and the periodic re-list would find it regardless.
		h := e.host("h", "")
		e.manager(eim.KindHost, h.ResourceID, func(r eim.Resource) { r.(*eim.Host).DesiredState = eim.HostStateDeleted })
		e.gone(eim.KindHost, h.ResourceID)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: got %v, want nil", err)
		}
	})
}

// A delete among a burst of status writes (a fleet's managers at work)
// arrives in a batch of events: it is confirmed, and nothing else is.
func TestReaperBatch(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		var hosts []*eim.Host
		for i := range 150 {
			hosts = append(hosts, e.host(fmt.Sprintf("h%03d", i), ""))
		}
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		r := inventory.NewReaper(e.svc, inventory.ReaperOptions{Interval: time.Hour})
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		doomed := hosts[117]
		// One transaction: the events are in the feed together, more than
		// one batch of them.
		noErr(t, e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			for _, h := range hosts {
				h.HostStatus, h.HostStatusIndicator = "Running", eim.StatusIdle
				if h == doomed {
					h.DesiredState = eim.HostStateDeleted
				}
				if err := tx.Update(e.ctx, h); err != nil {
					return err
				}
			}
			return nil
		}))
		e.gone(eim.KindHost, doomed.ResourceID)
		page, err := e.svc.List(e.ctx, e.proj, eim.KindHost, inventory.ListQuery{PageSize: 100})
		noErr(t, err)
		if page.Total != 149 {
			t.Errorf("hosts left: got %d, want 149", page.Total)
		}
	})
}
