package hostmgr_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim/hostmgr"
)

// TestHeartbeatMetrics: every heartbeat counts; one that comes its
// interval (10 s) after the node's last call is on time, one 25 s after
// is 15 s late.
func TestHeartbeatMetrics(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		reg := prometheus.NewRegistry()
		opts := e.opts
		opts.Metrics = reg
		svc := hostmgr.New(opts)
		h := e.host(nil)
		e.beat(svc, h, nil) // the first: nothing heard before
		e.clock.Add(10 * time.Second)
		e.beat(svc, h, nil)
		e.clock.Add(25 * time.Second)
		e.beat(svc, h, nil)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, f := range fams {
			switch f.GetName() {
			case "eim_heartbeats_total":
				found++
				if got := f.Metric[0].Counter.GetValue(); got != 3 {
					t.Errorf("eim_heartbeats_total: got %v, want 3", got)
				}
			case "eim_heartbeat_lateness_seconds":
				found++
				hst := f.Metric[0].Histogram
				if hst.GetSampleCount() != 2 || hst.GetSampleSum() != 15 {
					t.Errorf("lateness: %d observations summing %v s, want 2 summing 15 s", hst.GetSampleCount(), hst.GetSampleSum())
				}
			}
		}
		if found != 2 {
			t.Errorf("%d of the 2 heartbeat families gathered", found)
		}
	})
}
