package southbound

import (
	"testing"
	"time"
)

// TestAdmission: requests within the rate and burst are admitted; the
// others are given slots one after another at the rate, from the last one
// given (or now, when it has passed), never further than maxTokenRetry.
func TestAdmission(t *testing.T) {
	a := newAdmission(10, 2) // a slot every 100 ms
	t0 := time.Unix(1_700_000_000, 0)
	admit := func(at time.Time, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry := a.admit(at)
		if ok != wantOK || retry != wantRetry {
			t.Fatalf("admit at +%s: got %v, retry %s; want %v, retry %s", at.Sub(t0), ok, retry, wantOK, wantRetry)
		}
	}
	admit(t0, true, 0)
	admit(t0, true, 0) // the burst
	admit(t0, false, 100*time.Millisecond)
	admit(t0, false, 200*time.Millisecond)
	admit(t0.Add(50*time.Millisecond), false, 250*time.Millisecond) // after the slots given: t0+300 ms
	// A second later the bucket holds its burst again; the slots given
	// have passed, so the next refused is a slot from now.
	later := t0.Add(time.Second)
	admit(later, true, 0)
	admit(later, true, 0)
	admit(later, false, 100*time.Millisecond)

	// A crowd far beyond the rate is told at most maxTokenRetry.
	slow := newAdmission(1, 1)
	slow.admit(t0)
	var last time.Duration
	for range 200 {
		ok, retry := slow.admit(t0)
		if ok || retry > maxTokenRetry || retry < last {
			t.Fatalf("crowd: got %v, retry %s after %s; want refused, growing, at most %s", ok, retry, last, maxTokenRetry)
		}
		last = retry
	}
	if last != maxTokenRetry {
		t.Errorf("the crowd's last: retry %s, want %s", last, maxTokenRetry)
	}

	// No rate: everything admitted.
	none := newAdmission(0, 0)
	if ok, _ := none.admit(t0); !ok {
		t.Error("no rate: refused, want admitted")
	}
}
