package sim

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// A histogram counts durations in log-linear buckets of microseconds: exact
// below 64 µs, then 32 buckets per power of two, so a percentile is within
// 1/32 (3 %) above the true value. Recording is a few atomic adds, safe from
// any number of goroutines; memory is fixed (~15 KiB) however many values
// are recorded, which a list of 100,000 nodes' heartbeats every 30 s would
// not be.
type histogram struct {
	counts [histBuckets]atomic.Int64
	n      atomic.Int64
	sum    atomic.Int64 // µs
	max    atomic.Int64 // µs
}

const (
	histSubBits = 5 // 32 sub-buckets per power of two
	histSub     = 1 << histSubBits
	histLinear  = 2 * histSub // values below this have a bucket each
	// Enough buckets for any int64 of microseconds.
	histBuckets = histLinear + (63-histSubBits-1)*histSub
)

// bucketOf returns the bucket of v microseconds (v ≥ 0).
func bucketOf(v int64) int {
	if v < histLinear {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1)
	return histLinear + (shift-1)*histSub + int(v>>shift) - histSub
}

// bucketHigh returns the largest value (µs) of bucket i.
func bucketHigh(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	shift := (i-histLinear)/histSub + 1
	sub := int64((i-histLinear)%histSub + histSub)
	return (sub+1)<<shift - 1
}

// Record adds one duration (negative ones count as 0).
func (h *histogram) Record(d time.Duration) {
	v := max(d.Microseconds(), 0)
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Count returns how many durations were recorded.
func (h *histogram) Count() int64 { return h.n.Load() }

// Quantile returns the q-quantile (0 < q ≤ 1) as the highest value of its
// bucket, never above the largest recorded value; 0 when empty. Values
// recorded concurrently may or may not be counted.
func (h *histogram) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	mx := h.max.Load()
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(min(bucketHigh(i), mx)) * time.Microsecond
		}
	}
	return time.Duration(mx) * time.Microsecond
}

// Latency summarises a histogram, in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	Errors int64   `json:"errors"`
	Mean   float64 `json:"meanMs"`
	P50    float64 `json:"p50Ms"`
	P90    float64 `json:"p90Ms"`
	P99    float64 `json:"p99Ms"`
	P999   float64 `json:"p999Ms"`
	Max    float64 `json:"maxMs"`
}

// summary returns the histogram's Latency, with errors counted elsewhere.
func (h *histogram) summary(errors int64) Latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*1000) / 1000 }
	l := Latency{
		Count: h.n.Load(), Errors: errors,
		P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)), P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)),
		Max: ms(time.Duration(h.max.Load()) * time.Microsecond),
	}
	if l.Count > 0 {
		l.Mean = ms(time.Duration(h.sum.Load()/l.Count) * time.Microsecond)
	}
	return l
}
