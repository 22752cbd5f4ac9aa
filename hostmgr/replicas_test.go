package hostmgr_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// Replica timing in these tests: leases of a second (real time), flushes
// every second (the tests flush each simulated second too), so a deadline
// carries 0.5 s + 2 s of slack while the fleet is shared.
const (
	leaseTTL  = time.Second
	flushTick = time.Second
	slack     = leaseTTL/4 + 2*flushTick
	interval  = 10 * time.Second
	timeout   = 3 * interval
)

// replica is one process's host module sharing e's fleet: its own store
// on e's database (through awayStore, so that it can die), its
// announcement and its Run.
type replica struct {
	id   string
	st   *awayStore
	svc  *hostmgr.Service
	stop func()
}

// startReplica starts a replica; sharded false gives it no Members, as if
// it were alone (to show what sharing prevents).
func startReplica(t testing.TB, e *env, id string, sharded bool) *replica {
	t.Helper()
	st, err := sqlstore.Open(e.ctx, e.dsn, sqlstore.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	r := &replica{id: id, st: &awayStore{Store: st}}
	opts := e.opts
	opts.Store, opts.Batcher = r.st, nil
	opts.FlushInterval, opts.LeaseTTL = flushTick, leaseTTL
	if sharded {
		opts.Replica = id
		opts.Members = func(ctx context.Context) ([]string, error) { return coord.Members(ctx, r.st, "host") }
	}
	r.svc = hostmgr.New(opts)
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := coord.Announce(ctx, coord.Options{Store: r.st, Holder: id, TTL: leaseTTL}, []string{"host"}); err != nil {
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

// crash ends r as a killed process ends: nothing it has not written yet
// reaches the store (its last-seen times, the release of its leases, its
// leaving).
func (r *replica) crash() {
	r.st.away.Store(true)
	r.stop()
}

// fleet is the simulation: hosts beating every interval at their own
// phase, through the live replicas, on the test clock.
type fleet struct {
	t        *testing.T
	e        *env
	replicas []*replica // live
	hosts    []*eim.Host
	sticky   []bool // beats always through the same replica (else round robin)
	stopped  []bool
	beats    []int
	last     []time.Time // last heartbeat sent
	flagged  map[string]time.Time
	start    time.Time
	// falseFlags are "No Connection" flags of running hosts heard from
	// within their timeout (stopped ones are checked by the test).
	falseFlags []string
}

func newFleet(t *testing.T, e *env, rs []*replica, n int) *fleet {
	f := &fleet{t: t, e: e, replicas: rs, flagged: map[string]time.Time{}, start: e.clock.Now()}
	for i := range n {
		f.hosts = append(f.hosts, e.host(nil))
		f.sticky = append(f.sticky, i%2 == 0)
		f.stopped = append(f.stopped, false)
		f.beats = append(f.beats, 0)
		f.last = append(f.last, time.Time{})
	}
	return f
}

// through returns the replica host i's next heartbeat goes to.
func (f *fleet) through(i int) *replica {
	if f.sticky[i] {
		return f.replicas[i%len(f.replicas)]
	}
	return f.replicas[(i+f.beats[i])%len(f.replicas)]
}

func (f *fleet) beat(i int, r *replica) {
	f.e.beat(r.svc, f.hosts[i], nil)
	f.beats[i]++
	f.last[i] = f.e.clock.Now()
}

// step advances the clock a second: every live replica checks its
// deadlines, the hosts due beat, and every live replica flushes. Hosts
// newly "No Connection" are recorded, and the flag of a host heard from
// within its timeout is a false one.
func (f *fleet) step() {
	f.t.Helper()
	f.e.clock.Add(time.Second)
	now := f.e.clock.Now()
	for _, r := range f.replicas {
		r.svc.CheckTimeouts(f.e.ctx)
	}
	f.record(now)
	sec := int(now.Sub(f.start) / time.Second)
	for i := range f.hosts {
		if !f.stopped[i] && sec%10 == i%10 {
			f.beat(i, f.through(i))
		}
	}
	for _, r := range f.replicas {
		r.svc.Flush(f.e.ctx)
	}
}

// record notes the hosts flagged now.
func (f *fleet) record(now time.Time) {
	f.t.Helper()
	var flagged []eim.Resource
	err := f.e.store.View(f.e.ctx, f.e.proj, func(tx eim.Tx) error {
		var err error
		flagged, _, err = tx.List(f.e.ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "hostStatus", Value: "No Connection"}}})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range flagged {
		id := r.Base().ResourceID
		if _, ok := f.flagged[id]; ok {
			continue
		}
		f.flagged[id] = now
		i := slices.IndexFunc(f.hosts, func(h *eim.Host) bool { return h.ResourceID == id })
		if !f.stopped[i] && now.Sub(f.last[i]) < timeout {
			f.falseFlags = append(f.falseFlags, fmt.Sprintf("%s (heard %v before)", id, now.Sub(f.last[i])))
		}
	}
}

// run steps the fleet for d.
func (f *fleet) run(d time.Duration) {
	for range int(d / time.Second) {
		f.step()
	}
}

// startReplicas starts n replicas and, when sharded, waits until they
// hold the shards rendezvous hashing gives them, and for as long as a
// shard gained must wait to be watched from the store's times.
func startReplicas(t testing.TB, e *env, n int, sharded bool) []*replica {
	var rs []*replica
	for i := range n {
		rs = append(rs, startReplica(t, e, fmt.Sprintf("eim-%d", i), sharded))
	}
	if sharded {
		waitBalanced(t, rs)
		time.Sleep(leaseTTL/3 + 2*flushTick)
	}
	return rs
}

// waitBalanced waits until each replica owns the shards rendezvous
// hashing gives it among rs.
func waitBalanced(t testing.TB, rs []*replica) {
	t.Helper()
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.id)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, r := range rs {
			want := 0
			for i := range 64 {
				if coord.Owner(ids, i) == r.id {
					want++
				}
			}
			if r.svc.OwnedShards() != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var got []int
			for _, r := range rs {
				got = append(got, r.svc.OwnedShards())
			}
			t.Fatalf("replicas %v own %v shards 20 s after their start", ids, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three replicas share a fleet whose heartbeats land on any of them
// (half the hosts always on the same one, half round robin): no host is
// flagged while it beats. The replica with the most shards dies, together with some nodes,
// one of which it had just heard without saving it: the survivors take
// its shards over within seconds, flag the stopped nodes within their
// timeout and the slack (none early, beyond the one heartbeat the dead
// replica took with it), and flag no live node. A node flagged by its
// shard's owner and heard by another replica is "Running" again at once.
// A replica stopping hands its shards over without a false flag either.
func TestReplicasShareLiveness(t *testing.T) {
	e := newEnv(t, storetest.PostgresURL(t))
	rs := startReplicas(t, e, 3, true)
	f := newFleet(t, e, rs, 60)
	f.run(3 * timeout)
	if len(f.falseFlags) > 0 || len(f.flagged) > 0 {
		t.Fatalf("flags while every node beats: %v", f.falseFlags)
	}

	// Some nodes stop as replica 2 dies: nodes of its shards, among them
	// one whose last heartbeat only the dying replica heard, and nodes of
	// other shards; and two nodes of its shards stop 15 s earlier (a
	// takeover must not pardon them a timeout from then).
	ids := []string{"eim-0", "eim-1", "eim-2"}
	dying := rs[2]
	for _, r := range rs { // the one with the most shards
		if r.svc.OwnedShards() > dying.svc.OwnedShards() {
			dying = r
		}
	}
	var live []*replica
	for _, r := range rs {
		if r != dying {
			live = append(live, r)
		}
	}
	var stop, others []int
	for i, h := range f.hosts {
		owner := coord.Owner(ids, coord.ShardOf(h.ResourceID, 64))
		switch {
		case owner == dying.id && len(stop) < 5:
			stop = append(stop, i)
		case owner != dying.id && len(others) < 2 && f.sticky[i] && rs[i%3].id != owner:
			// Heard only by a replica that does not own it.
			others = append(others, i)
		}
	}
	if len(stop) < 5 || len(others) < 2 {
		t.Fatalf("the fleet has too few hosts of the kinds the test stops: %d, %d", len(stop), len(others))
	}
	early, stop := stop[3:5], append(stop[:3:3], others...)
	for _, i := range early {
		f.stopped[i] = true
	}
	f.run(15 * time.Second)
	stop = append(stop, early...)
	f.e.clock.Add(time.Second)
	f.start = f.start.Add(time.Second) // keep the phases
	f.beat(stop[0], dying)
	for _, i := range stop {
		f.stopped[i] = true
	}
	crashed := time.Now()
	dying.crash()
	f.replicas = live
	waitFor(t, func() bool { return live[0].svc.OwnedShards()+live[1].svc.OwnedShards() == 64 })
	t.Logf("the dead replica's shards were taken over in %v", time.Since(crashed))

	f.run(timeout + interval)
	if len(f.falseFlags) > 0 {
		t.Fatalf("false flags after a replica died: %v", f.falseFlags)
	}
	for _, i := range stop {
		id := f.hosts[i].ResourceID
		at, ok := f.flagged[id]
		switch {
		case !ok:
			t.Fatalf("stopped node %s (last heartbeat %v ago) not flagged", id, f.e.clock.Now().Sub(f.last[i]))
		case at.After(f.last[i].Add(timeout + slack + time.Second)):
			t.Errorf("stopped node %s flagged %v after its last heartbeat, want within %v", id, at.Sub(f.last[i]), timeout+slack+time.Second)
		case at.Before(f.last[i].Add(timeout - interval)):
			t.Errorf("stopped node %s flagged %v after its last heartbeat, before its timeout less the heartbeat lost", id, at.Sub(f.last[i]))
		}
	}
	if len(f.flagged) != len(stop) {
		t.Fatalf("%d hosts flagged, want the %d stopped", len(f.flagged), len(stop))
	}

	// A flagged node heard by a replica that does not own its shard: that
	// replica learns of the flag through the feed and writes "Running".
	i := stop[1]
	var other *replica
	for _, r := range live {
		if coord.Owner([]string{live[0].id, live[1].id}, coord.ShardOf(f.hosts[i].ResourceID, 64)) != r.id {
			other = r
		}
	}
	waitFor(t, func() bool {
		f.beat(i, other)
		return e.getHost(f.hosts[i].ResourceID).HostStatus == "Running"
	})
	f.stopped[i] = false
	delete(f.flagged, f.hosts[i].ResourceID)
	f.run(2 * interval)
	if _, ok := f.flagged[f.hosts[i].ResourceID]; ok || len(f.falseFlags) > 0 {
		t.Fatalf("the node back was flagged again: %v", f.falseFlags)
	}

	// Another replica stops cleanly: the last one is handed its shards
	// and watches their hosts from the store's times, without a false
	// flag.
	live[1].stop()
	f.replicas = live[:1]
	waitFor(t, func() bool { return live[0].svc.OwnedShards() == 64 })
	f.run(timeout + interval)
	if len(f.falseFlags) > 0 {
		t.Fatalf("false flags after a replica stopped: %v", f.falseFlags)
	}
}

// The same fleet on replicas that do not share it (each alone, as before
// replicas): each flags the hosts whose heartbeats reach the others. The
// scenario above can fail.
func TestReplicasWithoutSharingFlagFalsely(t *testing.T) {
	e := newEnv(t, storetest.PostgresURL(t))
	rs := startReplicas(t, e, 3, false)
	f := newFleet(t, e, rs, 30)
	f.run(3 * timeout)
	if len(f.falseFlags) == 0 {
		t.Fatal("no false flags from replicas that do not share the fleet; the fleet simulation does not test sharing")
	}
}

// A heartbeat that reaches a replica just before the host's timeout, and
// the store only at that replica's next flush, keeps the shard's owner
// from flagging the host: deadlines carry the slack of the store's
// staleness. Once silent for its timeout (and the slack), it is flagged.
func TestReplicasLateHeartbeat(t *testing.T) {
	e := newEnv(t, storetest.PostgresURL(t))
	rs := startReplicas(t, e, 2, true)
	ids := []string{rs[0].id, rs[1].id}
	var h *eim.Host
	for h == nil || coord.Owner(ids, coord.ShardOf(h.ResourceID, 64)) != rs[0].id {
		h = e.host(nil)
	}
	owner, other := rs[0].svc, rs[1].svc
	check := func() {
		owner.CheckTimeouts(e.ctx)
		other.CheckTimeouts(e.ctx)
	}
	// Heard once by its owner (which then watches it), then only by the
	// other replica.
	e.beat(owner, h, nil)
	owner.Flush(e.ctx)
	last := e.clock.Now()
	for range 3 {
		// A second before the timeout, and not saved yet.
		e.clock.Add(last.Add(timeout - time.Second).Sub(e.clock.Now()))
		e.beat(other, h, nil)
		last = e.clock.Now()
		e.clock.Add(time.Second + slack/2)
		check()
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		other.Flush(e.ctx)
		e.clock.Add(slack / 2)
		check()
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
	}
	e.clock.Add(timeout + slack)
	check()
	e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
}

// A replica judges the hosts of the shards it owns by their project's
// timeout also when their nodes call only other replicas, so that it never
// read their project for a heartbeat of its own: not by the server's
// default, shorter here (30 s) than the project's (3 × 60 s).
func TestReplicasProjectTimeoutOfHostsOthersHear(t *testing.T) {
	e := newEnv(t, storetest.PostgresURL(t))
	iv := uint32(60)
	if _, _, err := e.inv.UpdateProjectSettings(e.ctx, e.proj, inventory.SettingsChange{HeartbeatIntervalSeconds: &iv}); err != nil {
		t.Fatal(err)
	}
	rs := startReplicas(t, e, 2, true)
	ids := []string{rs[0].id, rs[1].id}
	var h *eim.Host
	for h == nil || coord.Owner(ids, coord.ShardOf(h.ResourceID, 64)) != rs[0].id {
		h = e.host(nil)
	}
	owner, other := rs[0].svc, rs[1].svc
	second := func() {
		e.clock.Add(time.Second)
		owner.CheckTimeouts(e.ctx)
		other.CheckTimeouts(e.ctx)
		owner.Flush(e.ctx)
		other.Flush(e.ctx)
	}
	var last time.Time
	for i := range 3 {
		if resp := e.beat(other, h, nil); resp.IntervalSeconds != 60 {
			t.Fatalf("interval %d, want the project's 60", resp.IntervalSeconds)
		}
		last = e.clock.Now()
		if i == 0 { // the owner learns of the host through the feed
			waitFor(t, func() bool { return owner.Tracked() == 1 })
		}
		for range 60 {
			second()
		}
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
	}
	// Silent: flagged once the project's timeout (and the slack) passed,
	// not before.
	for e.clock.Now().Before(last.Add(3 * time.Minute)) {
		if e.getHost(h.ResourceID).HostStatus == "No Connection" {
			t.Fatalf("flagged %v after its last heartbeat, before the project's timeout of 3 min", e.clock.Now().Sub(last))
		}
		second()
	}
	for e.clock.Now().Before(last.Add(3*time.Minute + slack + time.Second)) {
		second()
	}
	e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
}
