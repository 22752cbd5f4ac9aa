package oob

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// A site's power-on slots: at most SiteLimit power-ons (and power
// cycles) start per site per SiteWindow across the deployment. A slot is
// a lease of the store's ("oob-power-on:SITE:I"), taken for a window
// before the send and held again until a window after the BMC answered.
//
// Waiting is made cheap in each process: the jobs of the process that
// wait for a site's slots queue in arrival order, and only the first of
// the queue tries the slots' leases; the others sleep until they are
// first (renewing their own jobs' leases meanwhile). The first knows
// when each slot this process holds runs out (it took or renewed it) and
// tries that slot only then; a slot it could not take (another
// process's) is tried again every SiteWindow/4. So a site at its limit
// costs about one lease statement per power-on in a process alone, and
// a few a second with replicas, not one per slot per waiting job.
//
// The time a job waits in the queue does not count against its
// deadline: the deadline moves on by it, and the waiting step shows its
// place ("waiting for a site slot: N ahead"). A waiting job's row says
// which site's slots it waits for and since when (PowerJob.QueuedFor),
// so N counts every process's jobs: each waiting job counts the jobs of
// the deployment that wait for the site since before it (one indexed
// read, at most once per SiteWindow; a process has at most Workers jobs
// waiting), and until its first count, or when its own process's queue
// says more, its place in that queue. The row is saved when N changes.

// slot is a power-on slot of a site that a job holds: the store's lease
// name, held by holder.
type slot struct {
	key, name, holder string
	i                 int
}

// slotQueues are the process's queues of jobs waiting for site slots.
type slotQueues struct {
	mu    sync.Mutex
	sites map[string]*slotQueue
}

// slotQueue is one site's: the waiting jobs, first first, and for each
// slot when it is worth trying its lease again.
type slotQueue struct {
	waiting []*slotWaiter
	next    []time.Time
}

// slotWaiter is a job in a queue; first is closed when it becomes first.
type slotWaiter struct{ first chan struct{} }

func (q *slotQueues) join(key string, limit int) *slotWaiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sites == nil {
		q.sites = map[string]*slotQueue{}
	}
	sq := q.sites[key]
	if sq == nil {
		sq = &slotQueue{next: make([]time.Time, limit)}
		q.sites[key] = sq
	}
	w := &slotWaiter{first: make(chan struct{})}
	sq.waiting = append(sq.waiting, w)
	if len(sq.waiting) == 1 {
		close(w.first)
	}
	return w
}

// leave takes w out of its queue; the next job becomes first. A site
// with no job waiting and no slot held by the process is forgotten.
func (q *slotQueues) leave(key string, w *slotWaiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sq := q.sites[key]
	i := slices.Index(sq.waiting, w)
	if i < 0 {
		return
	}
	sq.waiting = slices.Delete(sq.waiting, i, i+1)
	if i == 0 && len(sq.waiting) > 0 {
		close(sq.waiting[0].first)
	}
	if len(sq.waiting) == 0 {
		now := time.Now()
		if !slices.ContainsFunc(sq.next, func(t time.Time) bool { return t.After(now) }) {
			delete(q.sites, key)
		}
	}
}

// ahead is how many of the process's jobs wait before w.
func (q *slotQueues) ahead(key string, w *slotWaiter) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(slices.Index(q.sites[key].waiting, w), 0)
}

// due returns the slots worth trying now, and when the next of the others
// is (zero when none).
func (q *slotQueues) due(key string) ([]int, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var due []int
	var next time.Time
	for i, t := range q.sites[key].next {
		switch {
		case !t.After(now):
			due = append(due, i)
		case next.IsZero() || t.Before(next):
			next = t
		}
	}
	return due, next
}

// retry records when slot i of key is worth trying again.
func (q *slotQueues) retry(key string, i int, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if sq := q.sites[key]; sq != nil {
		sq.next[i] = at
	}
}

func (s *Service) slotName(key string, i int) string {
	return fmt.Sprintf("oob-power-on:%s:%d", key, i)
}

// otherPoll is how often the first of a queue tries a slot that another
// process holds.
func (s *Service) otherPoll() time.Duration { return max(s.o.SiteWindow/4, 10*time.Millisecond) }

// take tries the due slots' leases; nil when none was free, and when to
// try again.
func (s *Service) take(ctx context.Context, key, holder string) (*slot, time.Time, error) {
	due, next := s.slots.due(key)
	for _, i := range due {
		name := s.slotName(key, i)
		ok, err := s.o.Store.Claim(ctx, name, holder, s.o.SiteWindow)
		if err != nil {
			return nil, time.Time{}, err
		}
		now := time.Now()
		if ok {
			s.slots.retry(key, i, now.Add(s.o.SiteWindow))
			return &slot{key: key, name: name, holder: holder, i: i}, time.Time{}, nil
		}
		at := now.Add(s.otherPoll())
		s.slots.retry(key, i, at)
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return nil, next, nil
}

// siteSlot waits for one of the SiteLimit power-on slots of the job's
// site (nil when there is no limit).
func (s *Service) siteSlot(ctx context.Context, r *run, send int) (*slot, error) {
	if s.o.SiteLimit <= 0 {
		return nil, nil
	}
	key := "no-site:" + r.j.Project
	if r.site != "" {
		key = r.j.Project + ":" + r.site
	}
	holder := fmt.Sprintf("%s#%d", r.j.ID, send)
	w := s.slots.join(key, s.o.SiteLimit)
	defer s.slots.leave(key, w)
	st := &r.j.Steps[r.j.Step]
	defer func() { st.Queued, r.j.QueuedFor, r.j.QueuedSince = "", "", eim.Time{} }()
	var since time.Time     // queued since (zero: not waiting yet)
	var countedAt time.Time // when the deployment's jobs ahead were counted
	before := 0             // how many there were then
	for {
		var next time.Time
		first := w.first // nil once this job is first: then only the timer wakes it
		select {
		case <-w.first:
			first = nil
			sl, at, err := s.take(ctx, key, holder)
			if err != nil {
				return nil, err
			}
			if sl != nil {
				if !since.IsZero() {
					r.queued(since)
					r.log.Info("power-on slot of the site free", "site", r.site)
				}
				return sl, nil
			}
			next = at
		default:
		}
		if !since.IsZero() && time.Since(countedAt) >= s.o.SiteWindow {
			// Waiting, and recorded so: every process's jobs that wait
			// longer.
			countedAt = time.Now()
			if n, err := s.o.Store.CountQueuedPowerJobs(ctx, r.j.Project, key, r.j.QueuedSince, r.j.ID); err == nil {
				before = n
			} else if ctx.Err() == nil {
				r.log.Info("jobs waiting for the site's slots not counted", "site", r.site, "err", err)
			}
		}
		ahead := max(before, s.slots.ahead(key, w))
		queued := fmt.Sprintf("waiting for a site slot: %d ahead (%d power-ons per %s at site %s)", ahead, s.o.SiteLimit, s.o.SiteWindow, orNone(r.site))
		moved := queued != st.Queued
		st.Queued = queued
		if since.IsZero() {
			since = time.Now()
			r.j.QueuedFor, r.j.QueuedSince = key, eim.NewTime(since)
			r.log.Info("waiting for a power-on slot of the site", "site", r.site, "ahead", ahead, "limit", s.o.SiteLimit, "window", s.o.SiteWindow)
			if err := r.save(ctx); err != nil {
				return nil, err
			}
		} else {
			since = r.queued(since)
			save := r.renew
			if moved {
				save = r.save
			}
			if err := save(ctx); err != nil {
				return nil, err
			}
		}
		// Sleep until a slot is worth trying, or this job becomes first,
		// and at most a quarter lease (the job's lease is renewed).
		d := s.o.Lease / 4
		if !next.IsZero() {
			d = min(d, max(time.Until(next), time.Millisecond))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		case <-first:
			t.Stop()
		}
	}
}

// queued moves the job's deadline on by the time queued since since; it
// returns now, to count from next.
func (r *run) queued(since time.Time) time.Time {
	now := time.Now()
	r.j.Deadline = eim.NewTime(r.j.Deadline.Add(now.Sub(since)))
	return now
}

func orNone(site string) string {
	if site == "" {
		return "(none)"
	}
	return site
}

// holdSlot holds sl for SiteWindow from now; it reports false when the
// slot's lease ran out and another job took it.
func (s *Service) holdSlot(ctx context.Context, sl *slot) (bool, error) {
	if sl == nil {
		return true, nil
	}
	ok, err := s.o.Store.Claim(ctx, sl.name, sl.holder, s.o.SiteWindow)
	if err != nil {
		return false, err
	}
	at := time.Now().Add(s.otherPoll())
	if ok {
		at = time.Now().Add(s.o.SiteWindow)
	}
	s.slots.retry(sl.key, sl.i, at)
	return ok, nil
}
