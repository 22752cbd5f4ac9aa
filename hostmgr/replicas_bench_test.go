package hostmgr_test

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// What a heartbeat costs one process alone (the cheap path), one replica
// alone (every lease held; it saves and checks as any replica does: it
// cannot know that no other hears its hosts), and three replicas sharing the fleet in one
// process (each with its own store on one PostgreSQL), heartbeats round
// robin or each host's always to the same replica: the handler and, amortised, the checks and flushes of every
// simulated second, on the test clock. saved/beat is last-seen rows
// written per heartbeat, read/beat rows read back by ID.
//
//	go test -run '^$' -bench HeartbeatReplicas -benchtime 5s ./hostmgr
func BenchmarkHeartbeatReplicas(b *testing.B) {
	for _, c := range []struct {
		name     string
		replicas int
		sharded  bool
		sticky   bool // a host's heartbeats always reach the same replica
	}{{"alone", 1, false, false}, {"1-replica", 1, true, false}, {"3-replicas", 3, true, false}, {"3-replicas-sticky", 3, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, storetest.PostgresURL(b))
			rs := startReplicas(b, e, c.replicas, c.sharded)
			const hosts = 2000
			hs := make([]*eim.Host, hosts)
			for i := range hs {
				hs[i] = e.host(nil)
				e.beat(rs[i%len(rs)].svc, hs[i], nil) // the first heartbeat writes "Running"
			}
			second := func() {
				for _, r := range rs {
					r.svc.CheckTimeouts(e.ctx)
					r.svc.Flush(e.ctx)
				}
			}
			second()
			var saved0, read0 int64
			for _, r := range rs {
				saved0 += r.st.saved.Load()
				read0 += r.st.readBack.Load()
			}
			step := interval / hosts
			n := 0
			for b.Loop() {
				e.clock.Add(step)
				h, round := n%hosts, n/hosts
				if c.sticky {
					round = 0
				}
				e.beat(rs[(h+round)%len(rs)].svc, hs[h], nil)
				n++
				if n%(hosts/10) == 0 {
					second()
				}
			}
			var saved, read int64
			for _, r := range rs {
				saved += r.st.saved.Load()
				read += r.st.readBack.Load()
			}
			b.ReportMetric(float64(saved-saved0)/float64(n), "saved/beat")
			b.ReportMetric(float64(read-read0)/float64(n), "read/beat")
			b.ReportMetric(float64(n)*float64(step)/float64(time.Second), "simulated-s")
		})
	}
}
