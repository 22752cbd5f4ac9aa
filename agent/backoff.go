package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Backoff bounds the waits between retries: a wait starts at Min and
// doubles up to Max, plus up to 50% random jitter so a fleet that lost its
// server does not come back in lockstep. Transient errors (Unavailable and
// the like) start at a quarter of Min.
type Backoff struct {
	Min, Max time.Duration
}

// DefaultBackoff is the original agent's: 2 s → 32 s.
var DefaultBackoff = Backoff{Min: 2 * time.Second, Max: 32 * time.Second}

func (b Backoff) orDefault() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBackoff.Min
	}
	if b.Max < b.Min {
		b.Max = max(b.Min, DefaultBackoff.Max)
	}
	return b
}

// retrier counts consecutive failures of one kind of call.
type retrier struct {
	b     Backoff
	fails int
}

// next returns how long to wait after a failure with err: the server's
// hint when it gave one (RetryHint), else the back-off.
func (r *retrier) next(err error) time.Duration {
	if h := RetryHint(err); h > 0 {
		r.fails++
		return HintedWait(h)
	}
	b := r.b.orDefault()
	d := b.Min
	if transient(err) {
		d = max(b.Min/4, time.Millisecond)
	}
	for i := 0; i < r.fails && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	r.fails++
	return d + rand.N(d/2+1)
}

func (r *retrier) reset() { r.fails = 0 }

// transient tells whether err is worth retrying soon: the server is
// overloaded, restarting or unreachable.
func transient(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return true // network errors and the like
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted,
		connect.CodeDeadlineExceeded, connect.CodeInternal, connect.CodeUnknown, connect.CodeUnauthenticated:
		return true
	}
	return false
}

// RetryHint is how long the server asked to wait before trying again
// (the Retry-After of a token endpoint that admits no more for now: a
// fleet back after a server restart), found in err's chain; 0 when it
// gave none.
func RetryHint(err error) time.Duration {
	var h interface{ RetryAfter() time.Duration }
	if errors.As(err, &h) {
		return max(h.RetryAfter(), 0)
	}
	return 0
}

// HintedWait is the wait after a server's hint h: h, plus up to a quarter
// of it (at least a second, the header's grain) at random, so that the
// nodes told the same time do not come back together.
func HintedWait(h time.Duration) time.Duration {
	return h + rand.N(max(h/4, time.Second))
}

// ParseRetryAfter reads a Retry-After header in seconds (the HTTP-date
// form, which our servers do not send, reads as none: 0).
func ParseRetryAfter(v string) time.Duration {
	secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || secs <= 0 || secs > 3600 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
