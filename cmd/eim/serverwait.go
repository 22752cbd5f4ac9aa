package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// serverWait lets a long-running command (a bulk import) ride out a
// server that went away — restarted, killed, or answering 503 while its
// database is down — for a bounded time, saying so on stderr. It is shared
// by the command's workers: the outage starts at the first request that
// could not reach the server and ends at the first that did, whichever
// worker sent them.
type serverWait struct {
	bound time.Duration // 0: do not wait
	out   io.Writer
	now   func() time.Time

	mu    sync.Mutex
	since time.Time // when the server went away; zero while it answers
}

// errServerGone is returned once the server has been away longer than the
// bound: the command stops instead of failing line after line.
var errServerGone = errors.New("the server did not come back")

// errWaitInterrupted is returned when the command was interrupted while
// it waited for the server.
var errWaitInterrupted = errors.New("interrupted while waiting for the server")

// unavailable reports whether err says the server could not be reached or
// could not serve (connection refused, 502/503/504, a 429 whose retries ran
// out): worth waiting out.
func unavailable(err error) bool {
	return err != nil && eim.ErrorCode(err) == eim.EUNAVAILABLE
}

// ok notes that the server answered (with a result or a refusal).
func (w *serverWait) ok() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.since.IsZero() {
		fmt.Fprintf(w.out, "the server is back after %s; carrying on\n", w.now().Sub(w.since).Round(100*time.Millisecond))
		w.since = time.Time{}
	}
}

// away notes that a request could not reach the server and reports how
// long the outage has lasted; the first worker to see it says so.
func (w *serverWait) away(err error) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.since.IsZero() {
		w.since = now
		if w.bound > 0 {
			fmt.Fprintf(w.out, "the server is unavailable (%s); waiting up to %s for it to come back (--wait)\n", eim.ErrorMessage(err), w.bound)
		}
	}
	return now.Sub(w.since)
}

// pause is called after a request could not reach the server (err is
// unavailable): it waits a little (attempt counts the pauses of this
// request, for the back-off) and returns nil to try again, or an error
// when the outage has outlasted the bound (errServerGone) or ctx ended.
func (w *serverWait) pause(ctx context.Context, err error, attempt int) error {
	if d := w.away(err); d >= w.bound {
		return fmt.Errorf("%w within %s (--wait): %s", errServerGone, w.bound, eim.ErrorMessage(err))
	}
	// 100 ms doubling to 2 s, with up to a fifth more so that the workers
	// do not all come back at the same instant.
	d := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
	d += rand.N(d/5 + 1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: %s", errWaitInterrupted, eim.ErrorMessage(err))
	case <-t.C:
		return nil
	}
}

// do runs fn again and again while the server is away (within the bound),
// and returns what fn returned once the server answered. Only for requests
// that may be repeated: reads, a PATCH setting the same fields, a delete.
func (w *serverWait) do(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if !unavailable(err) {
			w.ok()
			return err
		}
		if err := w.pause(ctx, err, attempt); err != nil {
			return err
		}
	}
}
