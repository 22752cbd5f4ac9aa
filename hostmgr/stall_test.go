package hostmgr_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/internal/syncbuf"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// The stall test's timing, in real time: leases of 2 s (renewed every
// 0.67 s, a claim given up after as long), flushes every 250 ms, so a
// deadline carries 0.5 s + 0.5 s of slack; nodes beat every 2 s and
// time out after 14 s.
const (
	stallLease    = 2 * time.Second
	stallFlush    = 250 * time.Millisecond
	stallSlack    = stallLease/4 + 2*stallFlush
	stallInterval = 2 * time.Second
	stallTimeout  = 14 * time.Second
)

// stallFleet is three replicas, each on its own connection to the
// database through a proxy that can stall it, and nodes beating through
// them in real time; a monitor reads the hosts flagged straight from the
// database.
type stallFleet struct {
	t        *testing.T
	e        *env
	replicas []*replica
	proxies  []*storetest.Proxy
	hosts    []*eim.Host
	log      syncbuf.Buffer // the replicas'

	mu       sync.Mutex
	stopped  []bool
	lastSent []time.Time // of each node's last heartbeat that was answered or is still waiting
	flagged  map[string]time.Time
	errs     []string
}

// startStallReplica starts a replica on the real clock whose store
// reaches the database through proxy.
func startStallReplica(t *testing.T, e *env, id string, proxy *storetest.Proxy, log *syncbuf.Buffer) *replica {
	t.Helper()
	st, err := sqlstore.Open(e.ctx, proxy.URL(t, e.dsn), sqlstore.Options{MaxConns: 6})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	r := &replica{id: id, st: &awayStore{Store: st}}
	opts := e.opts
	opts.Store, opts.Batcher, opts.Now = r.st, nil, time.Now
	opts.Interval, opts.Timeout = stallInterval, stallTimeout
	opts.CheckInterval, opts.FlushInterval, opts.LeaseTTL = 100*time.Millisecond, stallFlush, stallLease
	lg := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})).With("replica", id)
	opts.Logger = lg
	opts.Replica = id
	opts.Members = func(ctx context.Context) ([]string, error) { return coord.Members(ctx, r.st, "host") }
	r.svc = hostmgr.New(opts)
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := coord.Announce(ctx, coord.Options{Store: r.st, Holder: id, TTL: stallLease, Logger: lg}, []string{"host"}); err != nil {
			t.Errorf("Announce: %v", err)
		}
	})
	wg.Go(func() {
		if err := r.svc.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			st.Close()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func newStallFleet(t *testing.T, n int) *stallFleet {
	dsn := storetest.PostgresURL(t)
	e := newEnv(t, dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	f := &stallFleet{t: t, e: e, flagged: map[string]time.Time{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' log:\n%s", f.log.String())
		}
	})
	for i := range 3 {
		p := storetest.NewProxy(t, u.Host)
		f.proxies = append(f.proxies, p)
		f.replicas = append(f.replicas, startStallReplica(t, e, fmt.Sprintf("eim-%d", i), p, &f.log))
	}
	waitBalanced(t, f.replicas)
	for range n {
		f.hosts = append(f.hosts, e.host(nil))
	}
	f.stopped = make([]bool, n)
	f.lastSent = make([]time.Time, n)
	return f
}

// run beats every node every interval (half of them always through the
// same replica, half round robin), each call in its own goroutine so
// that one waiting for a stalled store does not hold the node's next
// ones back, and records the hosts flagged, until ctx ends. The nodes
// start one after another over a timeout, so that the owners' deadlines
// of the hosts others hear are spread over it, as in a fleet running for
// a while.
func (f *stallFleet) run(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range f.hosts {
		wg.Go(func() {
			next := start.Add(time.Duration(i) * stallTimeout / time.Duration(len(f.hosts)))
			for k := 0; ; k++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(stallInterval)
				f.mu.Lock()
				stopped := f.stopped[i]
				if !stopped {
					f.lastSent[i] = time.Now()
				}
				f.mu.Unlock()
				if stopped {
					continue
				}
				r := f.replicas[i%3]
				if i%2 == 1 {
					r = f.replicas[(i+k)%3]
				}
				wg.Go(func() { f.beat(ctx, i, r) })
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			f.record(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return &wg
}

// beat sends node i's heartbeat to r. A call the server does not answer
// within the node's patience fails, as it would for a node; the server
// heard it all the same.
func (f *stallFleet) beat(ctx context.Context, i int, r *replica) {
	cctx, cancel := context.WithTimeout(f.e.node(f.hosts[i]), 3*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	_, err := r.svc.Heartbeat(cctx, connect.NewRequest(&hostv1.HeartbeatRequest{}))
	if err != nil && ctx.Err() == nil && cctx.Err() == nil {
		f.mu.Lock()
		f.errs = append(f.errs, err.Error())
		f.mu.Unlock()
	}
}

// record notes the hosts "No Connection" now, read from the database
// itself (not through a proxy).
func (f *stallFleet) record(ctx context.Context) {
	var flagged []eim.Resource
	err := f.e.store.View(ctx, f.e.proj, func(tx eim.Tx) error {
		var err error
		flagged, _, err = tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "hostStatus", Value: "No Connection"}}})
		return err
	})
	if err != nil {
		return // the test is ending
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range flagged {
		if _, ok := f.flagged[r.Base().ResourceID]; !ok {
			f.flagged[r.Base().ResourceID] = now
		}
	}
}

// falseFlags returns the hosts flagged whose nodes were beating, or that
// were flagged before a timeout after their node's last heartbeat.
func (f *stallFleet) falseFlags() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, h := range f.hosts {
		at, ok := f.flagged[h.ResourceID]
		if !ok {
			continue
		}
		if !f.stopped[i] || at.Before(f.lastSent[i].Add(stallTimeout)) {
			if f.stopped[i] {
				out = append(out, fmt.Sprintf("%s (node %d, stopped, flagged %v after its last heartbeat)", h.ResourceID, i, at.Sub(f.lastSent[i]).Round(time.Millisecond)))
			} else {
				out = append(out, fmt.Sprintf("%s (node %d, beating, flagged at %s)", h.ResourceID, i, at.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// stall holds the database traffic of the replicas given by index for d;
// the first one's traffic flows again lag before the others'.
func (f *stallFleet) stall(d, lag time.Duration, which ...int) {
	f.t.Logf("stalling the database traffic of replicas %v for %v (the first one's %v less)", which, d, lag)
	for _, i := range which {
		f.proxies[i].Stall()
	}
	time.Sleep(d - lag)
	f.proxies[which[0]].Resume()
	time.Sleep(lag)
	for _, i := range which[1:] {
		f.proxies[i].Resume()
	}
}

// The database stalls under the replicas — every statement waits, as
// on a machine so loaded that lease renewals time out — for all of them
// or some, shorter and longer than the nodes' timeout. Every node keeps
// calling, and no host is ever flagged "No Connection": not by a
// replica that lost its shards and took them back (or took another's)
// with last-seen times the store did not have yet, nor by one that saw
// the others' memberships lapse and judged alone. Nodes that stop
// afterwards are flagged within their timeout and the slack.
func TestReplicasDatabaseStall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas in real time for about a minute and a half")
	}
	f := newStallFleet(t, 240)
	ctx, cancel := context.WithCancel(f.e.ctx)
	wg := f.run(ctx)
	defer func() {
		cancel()
		wg.Wait()
	}()
	reported := 0
	phase := func(name string) {
		t.Helper()
		if ff := f.falseFlags(); len(ff) > reported {
			t.Errorf("%s: %d false \"No Connection\" in all: %s", name, len(ff), strings.Join(ff, "; "))
			reported = len(ff)
		}
	}
	time.Sleep(stallTimeout + 2*stallInterval)
	phase("warming up")

	// Two replicas' stores stall for longer than a lease and the time the
	// third waits before it takes itself to be alone (a lease and two
	// thirds): the third sees their memberships lapse and takes their
	// shards, and must flag none of the nodes that call them, of those
	// shards or of its own.
	f.stall(stallLease+2*stallLease/3+2*stallLease, 0, 1, 2)
	time.Sleep(stallTimeout + stallInterval)
	phase("after the stall of two replicas' stores")

	// Every replica's store stalls for two leases: each loses its shards
	// and its membership lapses; then they take the shards back.
	f.stall(2*stallLease, 0, 0, 1, 2)
	time.Sleep(stallTimeout + stallInterval)
	phase("after the stall of every replica's store for two leases")

	// Every replica's store stalls for longer than the nodes' timeout,
	// and answers one replica a second before the others: it takes its
	// shards back before the others could save what they heard meanwhile.
	// As when the store is away, nobody is flagged, and deadlines count
	// from its return.
	f.stall(stallTimeout+4*time.Second, time.Second, 0, 1, 2)
	time.Sleep(stallTimeout + stallInterval)
	phase("after the stall of every replica's store for longer than the timeout")

	// Nodes that stop now are flagged within their timeout and the slack
	// (and the check's tick, the write and the monitor's read: 2 s).
	var stop []int
	for i := range f.hosts {
		if i%40 == 0 || i%40 == 1 {
			stop = append(stop, i)
		}
	}
	f.mu.Lock()
	for _, i := range stop {
		f.stopped[i] = true
	}
	f.mu.Unlock()
	time.Sleep(stallTimeout + stallSlack + 3*time.Second)
	phase("after some nodes stopped")
	f.mu.Lock()
	defer f.mu.Unlock()
	bound := stallTimeout + stallSlack + 2*time.Second
	for _, i := range stop {
		id := f.hosts[i].ResourceID
		at, ok := f.flagged[id]
		switch {
		case !ok:
			t.Errorf("stopped node %d (%s) not flagged %v after its last heartbeat", i, id, time.Since(f.lastSent[i]).Round(time.Millisecond))
		case at.After(f.lastSent[i].Add(bound)):
			t.Errorf("stopped node %d (%s) flagged %v after its last heartbeat, want within %v", i, id, at.Sub(f.lastSent[i]).Round(time.Millisecond), bound)
		}
	}
	if n := len(f.flagged); n != len(stop) {
		t.Errorf("%d hosts flagged, want the %d stopped", n, len(stop))
	}
	t.Logf("heartbeats that failed (a node's patience of 3 s while a store stalled): %d", len(f.errs))
}
