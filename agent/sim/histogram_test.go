package sim

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 1<<40 + 12345, 1<<62 + 1}
	for range 10000 {
		vals = append(vals, r.Int64N(1<<30))
	}
	for _, v := range vals {
		i := bucketOf(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, outside 0..%d", v, i, histBuckets-1)
		}
		hi := bucketHigh(i)
		if hi < v || (i > 0 && bucketHigh(i-1) >= v) {
			t.Fatalf("value %d: bucket %d spans (%d, %d], want it inside", v, i, bucketHigh(i-1), hi)
		}
		if float64(hi-v) > float64(v)/histSub {
			t.Fatalf("value %d: bucket top %d more than 1/%d above it", v, hi, histSub)
		}
	}
	if got := bucketOf(1<<63 - 1); got != histBuckets-1 {
		t.Errorf("largest value: bucket %d, want the last, %d", got, histBuckets-1)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	if h.Quantile(0.99) != 0 || h.summary(0) != (Latency{}) {
		t.Fatalf("empty histogram: got p99 %v, summary %+v", h.Quantile(0.99), h.summary(0))
	}
	// 1..1000 ms, recorded from several goroutines.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for v := g + 1; v <= 1000; v += 4 {
				h.Record(time.Duration(v) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {1, time.Second}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got-c.want) > float64(c.want)/histSub {
			t.Errorf("q%v: got %v, want %v (at most 1/%d above)", c.q, got, c.want, histSub)
		}
	}
	s := h.summary(7)
	if s.Count != 1000 || s.Errors != 7 || s.Max != 1000 || s.Mean != 500.5 || s.P50 < 500 || s.P50 > s.P90 || s.P90 > s.P99 || s.P99 > s.P999 || s.P999 > s.Max {
		t.Errorf("summary: got %+v, want 1000 values, 7 errors, max 1000 ms, mean 500.5 ms, ordered percentiles", s)
	}
	h.Record(-time.Second) // a clock step: counted as 0
	if h.Count() != 1001 || h.Quantile(0.0001) != 0 {
		t.Errorf("negative duration: count %d, min %v; want 1001 and 0", h.Count(), h.Quantile(0.0001))
	}
}
