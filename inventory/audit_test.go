package inventory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// TestAuditRetention: the retention loop deletes the records older than
// the retention, and only those.
func TestAuditRetention(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.create(&eim.Region{Name: "r"})
		count := func() int {
			_, n, err := e.svc.Audit(e.ctx, e.proj, inventory.AuditQuery{})
			noErr(t, err)
			return n
		}
		if n := count(); n < 2 {
			t.Fatalf("records before: got %d, want the project's and the region's creation", n)
		}
		// loop runs the retention loop, as if at now, until done says so (or 5 s).
		loop := func(now time.Time, done func() bool) {
			t.Helper()
			svc := inventory.New(e.store, inventory.Options{Now: func() time.Time { return now }})
			ctx, cancel := context.WithCancel(e.ctx)
			var wg sync.WaitGroup
			wg.Go(func() { noErr(t, svc.AuditRetention(ctx, 90*24*time.Hour, 10*time.Millisecond)) })
			for deadline := time.Now().Add(5 * time.Second); !done() && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			wg.Wait()
		}
		// 89 days on, for some rounds of the loop: nothing goes.
		rounds := 0
		loop(time.Now().Add(89*24*time.Hour), func() bool { rounds++; return rounds > 10 })
		if n := count(); n < 2 {
			t.Errorf("after 89 days with a retention of 90: got %d records, want them kept", n)
		}
		loop(time.Now().Add(91*24*time.Hour), func() bool { return count() == 0 })
		if n := count(); n != 0 {
			t.Errorf("after 91 days with a retention of 90: got %d records, want none", n)
		}
	})
}

// TestAuditQueryLimits: the audit log's paging and filter are checked
// before the store is asked.
func TestAuditQueryLimits(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		for _, q := range []inventory.AuditQuery{{PageSize: 101}, {Offset: -1}, {Offset: 10001}, {Filter: string(make([]byte, 1001))}} {
			if _, _, err := e.svc.Audit(e.ctx, e.proj, q); eim.ErrorCode(err) != eim.EINVALID {
				t.Errorf("Audit(%+v): got %v, want EINVALID", q, err)
			}
		}
		if _, _, err := e.svc.Audit(e.ctx, "", inventory.AuditQuery{}); eim.ErrorCode(err) != eim.EINVALID {
			t.Errorf("Audit without a project: got %v, want EINVALID", err)
		}
	})
}
