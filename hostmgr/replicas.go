package hostmgr

import (
	"context"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
)

// Replicas of the host module share a fleet (docs/architecture.md,
// "Replicas"): a node's heartbeats may reach any of them, and a host is
// "No Connection" only when none heard it for its timeout.
//
// The hosts are divided into shards by ID; the replicas divide the shards
// among themselves (coord.Shards: a lease per shard, its desired owner
// chosen by rendezvous hashing over the live replicas). Only the owner of
// a host's shard flags it, times its reboot and its update out. Every
// replica records the hosts it hears and saves a host's time whenever the
// store's may be older than w, so the store is never more than w and a
// flush behind what any replica heard (while the store answers: what a
// replica heard while it stalled is saved once it answers again, and
// shards gained until a while after that count from the gain).
// An owner whose local deadline for a host passed (its own heartbeats and
// the slack w + 2 flushes) reads the store's time of the host, and flags
// it only when that too is past the deadline.

// shards is the number of shards of the fleet: enough for an even spread
// over a few replicas, few enough that a replica renews its leases in one
// short round.
const shards = coord.DefaultShards

// leasePrefix names the shards' leases ("host/shard/NN").
const leasePrefix = "host/shard"

// shardOf returns a host's shard.
func shardOf(id string) int { return coord.ShardOf(id, shards) }

// OwnedShards returns how many of the fleet's shards this replica owns:
// all of them without replicas.
func (s *Service) OwnedShards() int {
	if s.shards == nil {
		return shards
	}
	return s.shards.Owned()
}

// owns reports whether this replica may flag the host now: it holds the
// lease of the host's shard, and recently enough renewed it that no other
// replica can hold it (coord.Shards.Owns).
func (s *Service) owns(id string) bool {
	return s.shards == nil || s.shards.Owns(shardOf(id))
}

// ownsForFlag reports whether this replica may flag the host now: it
// owns the host's shard, and will for a third of a lease more, so that
// the flag decided now is written before the lease could pass to
// another replica (unless the write itself takes that long).
func (s *Service) ownsForFlag(id string) bool {
	return s.shards == nil || s.shards.OwnsFor(shardOf(id), s.leaseTTL/3)
}

// sharing is a replica's view of the others, kept by the shard loop.
type sharing struct {
	// since is when this replica started seeing other replicas (zero when
	// it has not, or saw none for longer than hold); last is when it last
	// saw one.
	since, last time.Time
}

// Sharing's timing: a lease's TTL, and derived from it and the flush
// period, how stale the store may be (w), the slack of every deadline
// while the fleet is shared, how long after another replica is first
// seen the store is up to date (fresh), and how long after the last one
// is gone the fleet counts as shared still (hold).
func (s *Service) w() time.Duration     { return s.leaseTTL / 4 }
func (s *Service) slack() time.Duration { return s.w() + 2*s.flush }
func (s *Service) fresh() time.Duration { return s.leaseTTL/3 + 2*s.flush }
func (s *Service) hold() time.Duration  { return s.leaseTTL + 2*s.leaseTTL/3 }

// viewed takes the round's live replicas (this one included) and keeps
// track of how long this replica has seen others (see upToDate). When it
// first sees another, it reads the store's times of the hosts of the
// shards it owns: other replicas may hear hosts this one never did (see
// changed).
//
// What a replica saves and how it judges a silence do not depend on the
// view: a view without the others may be wrong (their announcements time
// out on a database too slow to answer, while they live and hear nodes),
// and a replica that then stopped saving what it hears, or flagged from
// its memory alone, would have the fleet's live nodes flagged.
func (s *Service) viewed(ctx context.Context, members []string) {
	now := time.Now()
	s.shareMu.Lock()
	first := false
	if len(members) > 1 {
		if s.share.since.IsZero() {
			s.share.since, first = now, true
		}
		s.share.last = now
	} else if !s.share.since.IsZero() && now.Sub(s.share.last) > s.hold() {
		s.share.since = time.Time{}
	}
	s.shareMu.Unlock()
	if first {
		s.log.Info("hostmgr: the fleet's liveness is shared with other replicas", "replicas", len(members))
		s.rescan.Store(true)
	}
	if !s.rescan.Load() {
		return
	}
	owned := s.live.ownedShards()
	if len(owned) == 0 {
		s.rescan.Store(false)
		return
	}
	all, err := s.store.LastSeen(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.troubled(err)
			s.log.Warn("hostmgr: read the last-seen times of the shards owned; retrying", "err", err)
		}
		return
	}
	// What this replica heard alone is in its tracker already: the
	// store's times only add hosts and later times.
	s.live.gain(owned, all, s.now(), true)
	s.rescan.Store(false)
}

// troubled notes a call to the store that failed or timed out.
func (s *Service) troubled(error) { s.trouble.Store(time.Now().UnixNano()) }

// quiet is how long after this replica's last trouble with the store a
// shard gained is watched from the store's times: long enough for a
// round to show the store answering again, and for every replica to
// save, in a flush or two, what it heard while the store did not answer
// (their saves waited as this replica's calls did).
func (s *Service) quiet() time.Duration { return s.fresh() + s.leaseTTL/3 }

// upToDate reports whether the store's last-seen times are as fresh as
// sharing makes them, so that a shard gained now can be watched from
// them: this replica has seen others for long enough that each of them
// saw it and saved what it heard (or has not seen them gone for long),
// the store has not been away, and none of this replica's calls to it
// failed or timed out lately (while they did, the others' saves waited
// too). Otherwise a shard gained counts its hosts' deadlines from now,
// as after a restart.
func (s *Service) upToDate() bool {
	if s.storeState.Load() != storeOK {
		return false
	}
	if t := s.trouble.Load(); t != 0 && time.Since(time.Unix(0, t)) < s.quiet() {
		return false
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	return !s.share.since.IsZero() && time.Since(s.share.since) >= s.fresh()
}

// gained takes shards over: their hosts are restored from the store's
// last-seen times and watched.
func (s *Service) gained(ctx context.Context, gained []int) error {
	all, err := s.store.LastSeen(ctx)
	if err != nil {
		s.troubled(err)
		return err
	}
	fresh := s.upToDate()
	n := s.live.gain(gained, all, s.now(), fresh)
	s.log.Info("hostmgr: watching shards", "shards", len(gained), "hosts", n, "from_store_times", fresh, "owned", s.shards.Owned()+len(gained))
	return nil
}

// releasing saves what this replica heard of the hosts of shards it is
// about to hand over, so that their next owner finds it in the store.
func (s *Service) releasing(ctx context.Context, shards []int) error {
	s.live.saveShards(shards)
	return s.flushAll(ctx)
}

// lost stops watching shards.
func (s *Service) lost(shards []int) {
	s.live.lose(shards)
	s.log.Info("hostmgr: no longer watching shards", "shards", len(shards))
}

// confirm checks hosts whose local deadline passed against the store's
// last-seen times (other replicas heard them), one query per chunk, and
// returns those that did time out; the others are queued at their new
// deadline. When the store does not answer, they are checked again at
// the next pass.
func (s *Service) confirm(ctx context.Context, due []expiry, now time.Time) []expiry {
	var out []expiry
	for len(due) > 0 {
		chunk := due[:min(len(due), maxFlush)]
		due = due[len(chunk):]
		ids := make([]string, len(chunk))
		for i, x := range chunk {
			ids[i] = x.id
		}
		seen, err := s.store.LastSeenOf(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("hostmgr: read the hosts' last-seen times", "hosts", len(ids), "err", err)
				s.storeFailed(err)
			}
			for _, rest := range [][]expiry{chunk, due} {
				for _, x := range rest {
					s.live.retry(x.id, now)
				}
			}
			return out
		}
		out = append(out, s.live.confirm(chunk, seen, now, s.settings.timeoutOf)...)
	}
	return out
}

// setShared turns sharing on or off and reports whether it was just
// turned on. Turned on, every host heard since its last save is queued:
// the store catches up with what this replica heard alone. A replica's
// tracker is shared from the start (New).
func (t *tracker) setShared(on bool, w, slack time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.shared
	t.shared, t.w, t.slack = on, w, 0
	if !on {
		return false
	}
	t.slack = slack
	if was {
		return false
	}
	for _, e := range t.hosts {
		if e.seen > e.stored {
			t.save(e)
		}
	}
	return true
}

// isShared reports whether the fleet is shared.
func (t *tracker) isShared() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.shared
}

// gain starts watching shards: the store's times of their hosts (seen)
// are merged, and every host of theirs is queued. Unless fresh, deadlines
// count from now (the store may be behind); never from before the store's
// last outage. It returns how many hosts the shards have.
func (t *tracker) gain(gained []int, seen []eim.LastSeen, now time.Time, fresh bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := make([]bool, shards)
	for _, i := range gained {
		in[i] = true
		t.owned[i] = true
	}
	for _, ls := range seen {
		if !in[shardOf(ls.HostID)] {
			continue
		}
		e := t.get(ls.Project, ls.HostID)
		t.merge(e, ls.At)
	}
	n := 0
	nowN, pardoned := nanos(now), nanos(t.pardoned)
	for _, e := range t.hosts {
		if !in[e.shard] {
			continue
		}
		n++
		if !fresh && nowN > e.restored {
			e.restored = nowN
			e.spread = true
		}
		if pardoned > e.restored {
			e.restored = pardoned
		}
		t.queue(e, now)
	}
	return n
}

// merge records a time the store holds for e.
func (t *tracker) merge(e *entry, at time.Time) {
	n := nanos(at)
	e.stored = max(e.stored, n)
	e.seen = max(e.seen, n)
}

// ownedShards returns the shards owned.
func (t *tracker) ownedShards() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for i, o := range t.owned {
		if o {
			out = append(out, i)
		}
	}
	return out
}

// lose stops watching shards; their hosts leave the heap as they come up,
// and the tracker as sweep finds them idle.
func (t *tracker) lose(lost []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range lost {
		t.owned[i] = false
	}
}

// idleAfter is how long a host of a shard this replica does not own may
// be silent here before sweep drops it.
func (s *Service) idleAfter(project string) time.Duration {
	return max(sweepIdle, 2*s.settings.timeoutOf(project))
}

// sweepEvery is how often a replica looks for entries it no longer needs.
const sweepEvery = time.Minute

// sweepIdle is the least silence after which a host of a shard this
// replica does not own is dropped (twice its timeout when longer).
const sweepIdle = 10 * time.Minute

// sweep drops the hosts of shards this replica does not own that it has
// not heard from for idle (at least twice their timeout): their nodes now
// call another replica, or are silent and the owner of their shard flags
// them. A host whose last time here is not saved yet stays until it is.
// So a replica holds the hosts whose nodes call it and those of the
// shards it owns, not the fleet; a host dropped and heard again is read
// again (the slow path of its first heartbeat). It returns how many went.
func (t *tracker) sweep(now time.Time, idle func(project string) time.Duration) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.hosts {
		if t.owned[e.shard] || e.saving || e.seen > e.stored || now.Sub(timeOf(e.seen)) < idle(e.projectName()) {
			continue
		}
		t.remove(e)
		n++
	}
	return n
}

// saveShards queues the hosts of shards heard since their last save.
func (t *tracker) saveShards(of []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := make([]bool, shards)
	for _, i := range of {
		in[i] = true
	}
	for _, e := range t.hosts {
		if in[e.shard] && e.seen > e.stored {
			t.save(e)
		}
	}
}

// confirm merges the store's times (seen) into hosts that expired and
// returns those still past their deadline; the others are queued at
// their new deadline. Hosts heard from since they expired are in the
// heap again and left to the next pass.
func (t *tracker) confirm(due []expiry, seen []eim.LastSeen, now time.Time, timeoutOf func(string) time.Duration) []expiry {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ls := range seen {
		if e := t.find(ls.HostID); e != nil {
			t.merge(e, ls.At)
		}
	}
	var out []expiry
	for _, x := range due {
		e := t.find(x.id)
		if e == nil || e.index >= 0 || e.off || !t.owned[e.shard] {
			continue
		}
		if d := t.deadline(e, timeoutOf); d.After(now) {
			t.queue(e, d)
			continue
		}
		x.seen, x.gen = timeOf(e.seen), e.gen
		out = append(out, x)
	}
	return out
}
