package coord

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// ShardOptions configure Shards.
type ShardOptions struct {
	// Prefix names the leases: shard i is lease fmt.Sprintf("%s/%02d", Prefix, i).
	Prefix string
	// Count is the number of shards (default 64).
	Count int
	// Members returns the live members among which the shards are divided
	// (coord.Members of a module); this process counts as one even when it
	// is not listed.
	Members func(ctx context.Context) ([]string, error)
	// Viewed, when set, is called after each read of the members with the
	// list (sorted, this process included), before the round's claims.
	Viewed func(ctx context.Context, members []string)
	// Gained is called with the shards just taken, before they count as
	// owned; when it fails they are released again (and claimed again at
	// a later round).
	Gained func(ctx context.Context, shards []int) error
	// Releasing is called before shards this process holds are released:
	// handed to the member that should own them now, or given up as the
	// process stops. When it fails they are kept this round (at the stop:
	// not released, left to expire).
	Releasing func(ctx context.Context, shards []int) error
	// Lost is called with the shards no longer owned: released, taken by
	// another, or not renewed in time.
	Lost func(shards []int)
	// Failed, when set, is called when a round's call to the store fails
	// or times out (a renewal, a claim, the read of the members): the
	// store is away or too slow to answer within a tick, and what the
	// members saved meanwhile may not be in it yet.
	Failed func(err error)
	// Settle, when positive, keeps a member that joins out of the
	// division for that long after this process first saw it, and this
	// process out of it for that long after its first view when others
	// were running then (members seen at this process's first view count
	// as settled; a member alone is settled at once). A member that just
	// joined may not be ready to own shards well (the host module's
	// store times are fresh only after a while in company), so the
	// settled members keep its share — and that of a member that died —
	// until it is.
	Settle time.Duration
}

// DefaultShards is the default of ShardOptions.Count.
const DefaultShards = 64

// Shards divides work into shards among the live members of a module.
// Each shard's desired owner is chosen by rendezvous hashing over the
// members, so that a member joining or leaving moves only its share. A
// member holds the lease of each shard it is the desired owner of, renews
// it every TTL/3 and releases, after Releasing, the shards whose desired
// owner is now another. A member that dies stops renewing; once its
// membership has expired the others find themselves the desired owners of
// its shards, and take them when its leases have expired: within about one
// TTL and a round.
type Shards struct {
	o  Options
	so ShardOptions

	mu sync.Mutex
	// until is, for each shard owned, until when its lease surely holds
	// (zero: not owned): ownership lapses by itself when renewals come
	// late, whatever the rounds do.
	until []time.Time

	// The round's state; only Run (or Round) touches it.
	members     []string // the division: the settled members
	firstSeen   map[string]time.Time
	viewedOnce  bool
	held        []*lease
	lastRound   time.Duration
	failed      bool // reading the members failed (logged once per outage)
	claimFailed bool // claiming failed (logged once per outage)
}

// NewShards returns Shards for the process of o; Run drives them.
func NewShards(o Options, so ShardOptions) (*Shards, error) {
	o, err := o.check()
	if err != nil {
		return nil, err
	}
	if so.Prefix == "" || so.Members == nil || so.Gained == nil {
		return nil, eim.Errorf(eim.EINVALID, "coord: ShardOptions.Prefix, Members and Gained are required")
	}
	if so.Count <= 0 {
		so.Count = DefaultShards
	}
	if so.Viewed == nil {
		so.Viewed = func(context.Context, []string) {}
	}
	if so.Releasing == nil {
		so.Releasing = func(context.Context, []int) error { return nil }
	}
	if so.Lost == nil {
		so.Lost = func([]int) {}
	}
	if so.Failed == nil {
		so.Failed = func(error) {}
	}
	s := &Shards{o: o, so: so, until: make([]time.Time, so.Count), held: make([]*lease, so.Count)}
	for i := range s.held {
		s.held[i] = &lease{o: o, name: s.name(i), quiet: true}
	}
	return s, nil
}

func (s *Shards) name(i int) string { return fmt.Sprintf("%s/%02d", s.so.Prefix, i) }

// Count returns the number of shards.
func (s *Shards) Count() int { return s.so.Count }

// Owns reports whether this process owns shard i now: it holds the
// lease, and its last renewal was recent enough that the lease surely
// has not expired.
func (s *Shards) Owns(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.until[i])
}

// OwnsFor reports whether this process owns shard i now and will for at
// least d more without another renewal: work on the shard that must end
// before the lease could expire (a write decided now and committed a
// little later) starts only then.
func (s *Shards) OwnsFor(i int, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(d).Before(s.until[i])
}

// Owned returns how many shards this process owns.
func (s *Shards) Owned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := time.Now(), 0
	for _, u := range s.until {
		if now.Before(u) {
			n++
		}
	}
	return n
}

// setOwned records shards as owned (until their leases' expiry as known)
// or not.
func (s *Shards) setOwned(shards []int, owned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range shards {
		if owned {
			s.until[i] = s.held[i].until
		} else {
			s.until[i] = time.Time{}
		}
	}
}

// Run runs a round at once and then every TTL/3 until ctx ends; then it
// releases the shards it holds (after Releasing) and returns nil.
func (s *Shards) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.tick())
	defer t.Stop()
	for {
		s.Round(ctx)
		select {
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		break
	}
	held := s.heldShards()
	if len(held) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := s.so.Releasing(rctx, held); err != nil {
		s.o.Logger.Warn("coord: could not hand the shards over; they expire by themselves", "prefix", s.so.Prefix, "shards", len(held), "err", err)
		s.lose(held)
		return nil
	}
	s.release(rctx, held)
	return nil
}

// Round renews the leases held, reads the members, hands over the shards
// another member should own, and claims those this process should own.
//
// A lease whose renewal fails is kept only while it surely holds until
// the next round's renewal: a tick from now, plus as long as the last
// round took (rounds start every tick unless one overruns).
func (s *Shards) Round(ctx context.Context) {
	start := time.Now()
	defer func() { s.lastRound = time.Since(start) }()
	var err error
	held := s.heldShards()
	for _, i := range held {
		s.held[i].margin = s.lastRound
	}
	lost := s.claim(ctx, held, &err)
	if err != nil && ctx.Err() == nil {
		s.so.Failed(err)
	}
	if len(lost) > 0 && ctx.Err() == nil {
		s.o.Logger.Warn("coord: lost shards", "prefix", s.so.Prefix, "shards", lost)
	}
	s.lose(lost)
	s.setOwned(s.heldShards(), true) // renewed: owned for longer
	s.view(ctx)
	if s.members == nil || ctx.Err() != nil {
		return // members not known yet: claim nothing
	}
	var handOver, claim []int
	for i := range s.so.Count {
		desired := Owner(s.members, i) == s.o.Holder
		switch held := !s.held[i].until.IsZero(); {
		case held && !desired:
			handOver = append(handOver, i)
		case !held && desired:
			claim = append(claim, i)
		}
	}
	if len(handOver) > 0 {
		if herr := s.so.Releasing(ctx, handOver); herr != nil {
			// Kept, renewed above, until a later round.
			if ctx.Err() == nil {
				s.o.Logger.Warn("coord: could not hand shards over yet", "prefix", s.so.Prefix, "shards", handOver, "err", herr)
			}
		} else {
			s.release(ctx, handOver)
		}
	}
	var gained []int
	for _, i := range claim {
		if err != nil || ctx.Err() != nil {
			break
		}
		if s.held[i].claim(ctx) {
			gained = append(gained, i)
		}
		err = s.held[i].err
	}
	if err != nil && ctx.Err() == nil {
		s.so.Failed(err)
	}
	switch {
	case ctx.Err() != nil:
		return
	case err != nil && !s.claimFailed:
		s.claimFailed = true
		s.o.Logger.Warn("coord: cannot claim shards; retrying", "prefix", s.so.Prefix, "err", err, "retry_in", s.o.tick())
	case err == nil && s.claimFailed:
		s.claimFailed = false
		s.o.Logger.Info("coord: the store answers claims again", "prefix", s.so.Prefix)
	}
	if len(gained) == 0 {
		return
	}
	if err := s.so.Gained(ctx, gained); err != nil {
		if ctx.Err() == nil {
			s.o.Logger.Warn("coord: could not take the shards gained; releasing them", "prefix", s.so.Prefix, "shards", gained, "err", err)
		}
		for _, i := range gained {
			s.releaseLease(ctx, i)
		}
		return
	}
	s.setOwned(gained, true)
	for _, i := range gained {
		s.o.took(s.so.Prefix, s.name(i), true)
	}
}

// claim renews the leases of shards and returns those lost. After a
// failed call (*err) the store is not called again this round: the
// others count as failed too, so that a store that hangs does not make
// the round last a timeout per shard.
func (s *Shards) claim(ctx context.Context, shards []int, err *error) (lost []int) {
	for _, i := range shards {
		l := s.held[i]
		var held bool
		if *err == nil {
			held = l.claim(ctx)
			*err = l.err
		} else {
			held = l.result(ctx, time.Now(), false, *err)
		}
		if !held && ctx.Err() == nil {
			lost = append(lost, i)
		}
	}
	return lost
}

// view reads the members; a failed read keeps the last view.
func (s *Shards) view(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, s.o.tick())
	ms, err := s.so.Members(cctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.so.Failed(err)
		}
		if ctx.Err() == nil && !s.failed {
			s.failed = true
			s.o.Logger.Warn("coord: cannot read the members; keeping the last view", "prefix", s.so.Prefix, "err", err)
		}
		return
	}
	s.failed = false
	if !slices.Contains(ms, s.o.Holder) {
		ms = append(slices.Clone(ms), s.o.Holder)
	}
	slices.Sort(ms)
	ms = slices.Compact(ms)
	s.members = s.settled(ms, time.Now())
	s.so.Viewed(ctx, ms)
}

// settled returns the members of ms that take part in the division (see
// ShardOptions.Settle).
func (s *Shards) settled(ms []string, now time.Time) []string {
	if s.so.Settle <= 0 {
		return ms
	}
	if s.firstSeen == nil {
		s.firstSeen = map[string]time.Time{}
	}
	if !s.viewedOnce {
		s.viewedOnce = true
		for _, m := range ms {
			s.firstSeen[m] = time.Time{} // running before this process: settled
		}
		if len(ms) > 1 {
			s.firstSeen[s.o.Holder] = now // joining others: not yet
		}
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		first, ok := s.firstSeen[m]
		if !ok {
			s.firstSeen[m], first = now, now
		}
		if first.IsZero() || now.Sub(first) >= s.so.Settle {
			out = append(out, m)
		}
	}
	for m := range s.firstSeen {
		if !slices.Contains(ms, m) {
			delete(s.firstSeen, m) // gone: if it comes back, it joins anew
		}
	}
	if len(out) == 0 {
		return ms
	}
	return out
}

// heldShards returns the shards whose lease this process holds.
func (s *Shards) heldShards() []int {
	var out []int
	for i, l := range s.held {
		if !l.until.IsZero() {
			out = append(out, i)
		}
	}
	return out
}

// lose records shards no longer held (their leases were not released).
func (s *Shards) lose(shards []int) {
	if len(shards) == 0 {
		return
	}
	for _, i := range shards {
		s.held[i].until = time.Time{}
	}
	s.setOwned(shards, false)
	for _, i := range shards {
		s.o.took(s.so.Prefix, s.name(i), false)
	}
	s.so.Lost(shards)
}

// release gives shards up: no longer owned, then their leases released.
func (s *Shards) release(ctx context.Context, shards []int) {
	s.lose(shards)
	for _, i := range shards {
		s.releaseLease(ctx, i)
	}
}

func (s *Shards) releaseLease(ctx context.Context, i int) {
	s.held[i].until = time.Time{}
	if err := s.o.Store.Release(ctx, s.name(i), s.o.Holder); err != nil && ctx.Err() == nil {
		s.o.Logger.Warn("coord: could not release a shard (it expires by itself)", "lease", s.name(i), "err", err)
	}
}

// ShardOf returns the shard of key among n.
func ShardOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Owner returns the desired owner of shard i among members (rendezvous
// hashing: the member with the highest score for the shard), "" when
// there are none.
func Owner(members []string, i int) string {
	best, owner := uint64(0), ""
	for _, m := range members {
		sc := score(m, i)
		if owner == "" || sc > best || (sc == best && m < owner) {
			best, owner = sc, m
		}
	}
	return owner
}

// score mixes a member's name and a shard (FNV-1a, then a 64-bit
// finalizer so that close inputs give unrelated scores).
func score(member string, shard int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	x := h.Sum64() ^ (uint64(shard)+1)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
