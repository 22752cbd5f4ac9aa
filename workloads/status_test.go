package workloads_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
)

// TestStatusWanted checks when heartbeats ask a device for its full
// status: not while the stored status is current; once (per process,
// until StatusGrace passed) when the device applied a version whose status
// the store lacks (a restored database: its version is newer than the
// server's) or when its version moved long ago without a report; never
// again once its report came.
func TestStatusWanted(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		d1 := e.device(p, "", "x86_64", "line", "1")
		d2 := e.device(p, "", "x86_64", "line", "1")
		e.want(e.call(p, "POST", "", camera("registry.example:5000/cam:1.0")), 201, "create")
		e.reconcile(p)
		v1 := ""
		eventually(t, "d1's version in the heartbeats' cache", func() bool { v1 = e.svc.Version(e.ctx, p, d1.id); return v1 != "" })
		report := func(d *device, version string) {
			t.Helper()
			_, err := d.client.ReportStatus(e.ctx, connect.NewRequest(&workloadsv1.ReportStatusRequest{Version: version, Workloads: []*workloadsv1.WorkloadStatus{{
				Name: "camera", Revision: 1, Phase: workloadsv1.WorkloadStatus_PHASE_RUNNING}}}))
			if err != nil {
				t.Fatalf("ReportStatus %s: %v", d.id, err)
			}
		}
		e.get(d1, "")
		report(d1, v1)
		if e.svc.StatusWanted(e.ctx, p, d1.id) || e.svc.StatusWanted(e.ctx, p, d2.id) {
			t.Fatal("a status is wanted while every stored status is current")
		}

		// The device has applied a version the store never gave (the
		// database was restored from an older copy): it is told to keep
		// what runs, and its full status is wanted.
		_, err := d1.client.GetWorkloads(e.ctx, connect.NewRequest(&workloadsv1.GetWorkloadsRequest{Version: "99"}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Fatalf("a version newer than the server's: got %v, want FailedPrecondition", err)
		}
		eventually(t, "d1's status wanted", func() bool { return e.svc.StatusWanted(e.ctx, p, d1.id) })
		if e.svc.StatusWanted(e.ctx, p, d1.id) {
			t.Fatal("asked twice in a row: want once, until StatusGrace passed")
		}
		e.advance(3 * time.Minute)
		if !e.svc.StatusWanted(e.ctx, p, d1.id) {
			t.Fatal("not asked again after StatusGrace without a report")
		}
		// Its full report clears it, here and in the store.
		report(d1, "99")
		eventually(t, "d1's status no longer wanted", func() bool {
			dw, err := e.store.DeviceWorkloads(e.ctx, p, d1.id)
			return err == nil && !dw.StatusWanted && dw.StatusVersion == 99
		})
		e.advance(3 * time.Minute)
		eventually(t, "the cache sees d1's report", func() bool { return !e.svc.StatusWanted(e.ctx, p, d1.id) })
		// The same version again asks nothing more.
		if _, err := d1.client.GetWorkloads(e.ctx, connect.NewRequest(&workloadsv1.GetWorkloadsRequest{Version: "99"})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Fatalf("again: got %v, want FailedPrecondition", err)
		}
		if dw, _ := e.store.DeviceWorkloads(e.ctx, p, d1.id); dw.StatusWanted {
			t.Fatal("a device whose status is stored was marked again")
		}

		// d2 never reported its version: after the grace, the targets
		// loop's sweep (here the store's statement it runs) marks it.
		n, err := e.store.WantStaleEdgeDeviceStatus(e.ctx, time.Now().Add(time.Minute))
		if err != nil || n < 1 {
			t.Fatalf("sweep: %d marked, %v; want d2", n, err)
		}
		eventually(t, "d2's status wanted", func() bool { return e.svc.StatusWanted(e.ctx, p, d2.id) })
		if e.svc.StatusWanted(e.ctx, p, d1.id) {
			t.Fatal("d1, which reported, is asked too")
		}
		e.get(d2, "")
		report(d2, e.svc.Version(e.ctx, p, d2.id))
		e.advance(3 * time.Minute)
		eventually(t, "d2's report seen", func() bool { return !e.svc.StatusWanted(e.ctx, p, d2.id) })

		// A version that is not a number is refused.
		_, err = d2.client.ReportStatus(e.ctx, connect.NewRequest(&workloadsv1.ReportStatusRequest{Version: "x"}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("report of version x: got %v, want InvalidArgument", err)
		}
	})
}
