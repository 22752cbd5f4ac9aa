package sim

import (
	"context"
	"sync"
	"time"
)

// schedule hands out items when they are due: a min-heap of due times that
// one goroutine (run) drains into a channel read by a bounded pool of
// workers. A fleet of 100,000 nodes then costs a heap entry per node and a
// few goroutines, not a goroutine and a timer per node.
type schedule[T any] struct {
	mu   sync.Mutex
	h    []entry[T]
	seq  uint64
	wake chan struct{}
}

// entry is an item due at at (time since the schedule's clock started);
// seq keeps items due at the same time in the order they were added.
type entry[T any] struct {
	at  time.Duration
	seq uint64
	v   T
}

func newSchedule[T any]() *schedule[T] {
	return &schedule[T]{wake: make(chan struct{}, 1)}
}

// Len returns the number of items waiting.
func (s *schedule[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h)
}

// Add schedules v at at.
func (s *schedule[T]) Add(v T, at time.Duration) {
	s.mu.Lock()
	s.seq++
	s.h = append(s.h, entry[T]{at: at, seq: s.seq, v: v})
	s.up(len(s.h) - 1)
	first := s.h[0].seq == s.seq
	s.mu.Unlock()
	if first { // run may be sleeping until a later item
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// pop removes and returns the first item if it is due at now; otherwise
// it returns when the first item is due (ok false, next < 0 when empty).
func (s *schedule[T]) pop(now time.Duration) (e entry[T], ok bool, next time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.h) == 0 {
		return e, false, -1
	}
	if s.h[0].at > now {
		return e, false, s.h[0].at
	}
	e = s.h[0]
	last := len(s.h) - 1
	s.h[0] = s.h[last]
	s.h[last] = entry[T]{}
	s.h = s.h[:last]
	if last > 0 {
		s.down(0)
	}
	return e, true, 0
}

// minWait bounds how often run wakes: items due within a millisecond of
// each other go out together.
const minWait = time.Millisecond

// run sends every item to out when it is due, until ctx ends. clock returns
// the time since the schedule's start, the unit of Add's at.
func (s *schedule[T]) run(ctx context.Context, clock func() time.Duration, out chan<- entry[T]) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		e, ok, next := s.pop(clock())
		if ok {
			select {
			case out <- e:
				continue
			case <-ctx.Done():
				return
			}
		}
		wait := time.Hour
		if next >= 0 {
			wait = max(next-clock(), minWait)
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-s.wake:
		case <-ctx.Done():
			return
		}
	}
}

func (s *schedule[T]) less(i, j int) bool {
	a, b := &s.h[i], &s.h[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (s *schedule[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.h[i], s.h[p] = s.h[p], s.h[i]
		i = p
	}
}

func (s *schedule[T]) down(i int) {
	n := len(s.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.h[i], s.h[m] = s.h[m], s.h[i]
		i = m
	}
}
