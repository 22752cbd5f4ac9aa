package oob_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// slowFleet is a fleet whose power state reads take a BMC's latency, and
// which counts the reads under way.
type slowFleet struct {
	*fleet
	latency        time.Duration
	inflight, peak atomic.Int64
	reads          atomic.Int64
}

func (f *slowFleet) Open(ctx context.Context, t oob.Target) (oob.Conn, error) {
	c, err := f.fleet.Open(ctx, t)
	return slowConn{Conn: c, f: f}, err
}

type slowConn struct {
	oob.Conn
	f *slowFleet
}

func (c slowConn) PowerState(ctx context.Context) (oob.PowerState, error) {
	n := c.f.inflight.Add(1)
	defer c.f.inflight.Add(-1)
	for p := c.f.peak.Load(); n > p && !c.f.peak.CompareAndSwap(p, n); p = c.f.peak.Load() {
	}
	c.f.reads.Add(1)
	t := time.NewTimer(c.f.latency) // the BMC's latency, not a wait for an event
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
	}
	return c.Conn.PowerState(ctx)
}

// TestPollSizedToTheFleet: the poll reads as many BMCs at once as finish
// a round within 3/4 of --oob-poll-every, between Workers and
// PollWorkers. 300 BMCs answering in 100 ms each, a round of 3 s: 30 s
// of reads need 14 at once (2, the workers, would take 15 s); with
// PollWorkers 4, never more than 4.
func TestPollSizedToTheFleet(t *testing.T) {
	const n, latency = 300, 100 * time.Millisecond
	for _, tc := range []struct {
		name              string
		pollWorkers       int
		leastPeak, atMost int64
	}{
		// The need is 14 at the start and grows as the round goes on;
		// 8 leaves room for reads slowed by the store's writes.
		{"sized", 0, 8, 256},
		{"bounded", 4, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "sqlite", t.TempDir()+"/eim.db")
			var sf *slowFleet
			st := newSite(t, e, n, func(o *oob.Options) {
				sf = &slowFleet{fleet: &fleet{m: map[string]*fakeBMC{}}, latency: latency}
				o.Drivers = map[eim.BMCProtocol]oob.Driver{eim.BMCIPMI: sf}
				o.Workers, o.PollWorkers, o.PollEvery = 2, tc.pollWorkers, 3*time.Second
			})
			if err := st.svc.PollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := sf.reads.Load(); got != n {
				t.Fatalf("reads: got %d, want %d", got, n)
			}
			if got := sf.peak.Load(); got < tc.leastPeak || got > tc.atMost {
				t.Fatalf("most reads at once: got %d, want %d to %d", got, tc.leastPeak, tc.atMost)
			}
		})
	}
}
