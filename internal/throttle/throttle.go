// Package throttle bounds the bandwidth of a stream: the agent's data
// paths send (upload) and receive (download) at most at their rate.
package throttle

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// NewLimiter is a limiter of bytesPerSecond (nil when it is 0 or less: no
// bound), with a burst of 64 KiB or a second's worth, whichever is
// smaller, so that the average stays at the bound.
func NewLimiter(bytesPerSecond int64) *rate.Limiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(bytesPerSecond), int(min(bytesPerSecond, 64<<10)))
}

// Reader reads from r at most at lim's rate (r itself when lim is nil);
// a wait ends with ctx.
func Reader(ctx context.Context, r io.Reader, lim *rate.Limiter) io.Reader {
	if lim == nil {
		return r
	}
	return &limited{ctx: ctx, r: r, lim: lim}
}

type limited struct {
	ctx context.Context
	r   io.Reader
	lim *rate.Limiter
}

func (l *limited) Read(p []byte) (int, error) {
	if len(p) > l.lim.Burst() {
		p = p[:l.lim.Burst()]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		if werr := l.lim.WaitN(l.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
