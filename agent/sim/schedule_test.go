package sim

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestSchedulePop(t *testing.T) {
	s := newSchedule[string]()
	if _, ok, next := s.pop(0); ok || next != -1 {
		t.Fatalf("empty: got ok %v next %v, want false -1", ok, next)
	}
	for _, e := range []struct {
		v  string
		at time.Duration
	}{{"e", 5}, {"a", 1}, {"d", 3}, {"b", 1}, {"c", 2}} {
		s.Add(e.v, e.at)
	}
	if _, ok, next := s.pop(0); ok || next != 1 {
		t.Fatalf("nothing due at 0: got ok %v next %v, want false 1", ok, next)
	}
	var got []string
	for {
		e, ok, next := s.pop(3)
		if !ok {
			if next != 5 {
				t.Errorf("after the due ones: next %v, want 5", next)
			}
			break
		}
		got = append(got, e.v)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("due at 3: got %v, want %v (ties in the order added)", got, want)
	}
	if s.Len() != 1 {
		t.Errorf("left: got %d, want 1", s.Len())
	}
}

func TestScheduleHeapOrder(t *testing.T) {
	s := newSchedule[int]()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		s.Add(i, time.Duration(r.IntN(1000)))
		if i%3 == 0 { // interleave pops with adds
			s.pop(time.Duration(r.IntN(10)))
		}
	}
	last := time.Duration(-1)
	for n := 0; ; n++ {
		e, ok, _ := s.pop(time.Hour)
		if !ok {
			break
		}
		if e.at < last {
			t.Fatalf("pop %d: at %v after %v", n, e.at, last)
		}
		last = e.at
	}
}

// run hands every item out no earlier than it is due, in order, and an
// item added before the one it sleeps for wakes it.
func TestScheduleRun(t *testing.T) {
	s := newSchedule[int]()
	start := time.Now()
	clock := func() time.Duration { return time.Since(start) }
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan entry[int])
	var wg sync.WaitGroup
	wg.Go(func() { s.run(ctx, clock, out) })
	defer func() { cancel(); wg.Wait() }()

	s.Add(-1, time.Hour)
	ats := rand.New(rand.NewPCG(5, 6)).Perm(40)
	for i, ms := range ats {
		s.Add(i, time.Duration(ms)*time.Millisecond)
	}
	last := time.Duration(-1)
	deadline := time.After(30 * time.Second)
	for range ats {
		select {
		case e := <-out:
			if now := clock(); now < e.at {
				t.Fatalf("item %d due at %v handed out at %v", e.v, e.at, now)
			}
			if e.at < last {
				t.Fatalf("item due at %v after one due at %v", e.at, last)
			}
			last = e.at
		case <-deadline:
			t.Fatal("items not handed out within 30 s")
		}
	}
	// run now sleeps until the hour-late item; an earlier one wakes it.
	s.Add(99, clock()+5*time.Millisecond)
	select {
	case e := <-out:
		if e.v != 99 {
			t.Fatalf("got item %d, want 99", e.v)
		}
	case <-deadline:
		t.Fatal("the item added while run slept was not handed out")
	}
}
