package onboarding

import (
	"testing"
	"time"
)

// A scan of the invalidations takes at most scanShare of the time: a quick
// one waits the minimum, a slow one (a large fleet on SQLite) proportionally
// longer.
func TestScanPause(t *testing.T) {
	for _, c := range []struct{ took, want time.Duration }{
		{0, invalidationScan},
		{time.Millisecond, invalidationScan},
		{4 * time.Millisecond, invalidationScan},
		{20 * time.Millisecond, time.Second},
		{100 * time.Millisecond, 5 * time.Second},
	} {
		if got := scanPause(c.took); got != c.want {
			t.Errorf("scanPause(%v) = %v, want %v", c.took, got, c.want)
		}
	}
}
