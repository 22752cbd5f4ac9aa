package inventory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

type updateRunner struct{ st eim.Store }

func (r updateRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return r.st.Update(ctx, project, fn)
}

// A hardware report is written once: the same report again writes
// nothing; a bad one is refused naming the field; an unknown host is not
// found.
func TestReportHardware(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := ok(e.svc.Create(e.ctx, e.proj, &eim.Host{Name: "h", UUID: newUUID()})).get(t).(*eim.Host)
		r := inventory.NewHostReports(updateRunner{e.store})
		digest := "sha256:" + strings.Repeat("b", 64)
		now := eim.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
		applied := 0
		apply := func(h *eim.Host) { applied++; h.ProductName, h.MemoryBytes = "PowerEdge XR11", 64<<30 }
		for i, want := range []bool{true, false} {
			wrote, err := r.ReportHardware(e.ctx, e.proj, h.ResourceID, digest, now, apply)
			if err != nil || wrote != want {
				t.Fatalf("report %d: got wrote %v, %v; want %v", i, wrote, err, want)
			}
		}
		if applied != 1 {
			t.Errorf("apply ran %d times, want once", applied)
		}
		got := ok(e.svc.Get(e.ctx, e.proj, eim.KindHost, h.ResourceID)).get(t).(*eim.Host)
		if got.HardwareDigest != digest || got.ProductName != "PowerEdge XR11" || got.MemoryBytes != 64<<30 || got.Name != "h" {
			t.Errorf("stored: digest %q product %q memory %d name %q", got.HardwareDigest, got.ProductName, got.MemoryBytes, got.Name)
		}
		_, err := r.ReportHardware(e.ctx, e.proj, h.ResourceID, "md5:1", now, apply)
		if eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), "hardwareDigest:") {
			t.Errorf("bad digest: got %v, want EINVALID naming hardwareDigest", err)
		}
		_, err = r.ReportHardware(e.ctx, e.proj, "host-0000abcd", digest, now, apply)
		if eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Errorf("unknown host: got %v, want ENOTFOUND", err)
		}
	})
}
