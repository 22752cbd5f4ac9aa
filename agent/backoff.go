package agent

import (
	"context"
	"errors"
	"math/rand/v2"
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

// next returns how long to wait after a failure with err.
func (r *retrier) next(err error) time.Duration {
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
