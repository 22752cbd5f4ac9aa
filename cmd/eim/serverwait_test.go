package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func TestServerWait(t *testing.T) {
	down := eim.Errorf(eim.EUNAVAILABLE, "cannot reach http://127.0.0.1:1: connection refused")
	refused := eim.Errorf(eim.EINVALID, "name: too long")
	for _, tt := range []struct {
		name     string
		bound    time.Duration
		fails    int   // calls that fail with failWith before one succeeds; -1: all
		failWith error // the error of the failing calls
		cancel   bool  // cancel the context at the first failure
		want     error // errors.Is the result
		calls    int   // fn called this many times (0: not checked)
		says     []string
		silent   bool
	}{
		{name: "up", bound: time.Minute, fails: 0, calls: 1, silent: true},
		{name: "back after a while", bound: time.Minute, fails: 3, failWith: down, calls: 4,
			says: []string{"the server is unavailable (cannot reach http://127.0.0.1:1: connection refused); waiting up to 1m0s for it to come back (--wait)", "the server is back after"}},
		{name: "a refusal is not waited out", bound: time.Minute, fails: -1, failWith: refused, want: refused, calls: 1, silent: true},
		{name: "gone for longer than the bound", bound: 300 * time.Millisecond, fails: -1, failWith: down, want: errServerGone,
			says: []string{"waiting up to 300ms"}},
		{name: "no waiting", bound: 0, fails: -1, failWith: down, want: errServerGone, calls: 1, silent: true},
		{name: "interrupted while waiting", bound: time.Minute, fails: -1, failWith: down, cancel: true, want: errWaitInterrupted, calls: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := &serverWait{bound: tt.bound, out: &out, now: time.Now}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			start := time.Now()
			err := w.do(ctx, func() error {
				calls++
				if tt.fails >= 0 && calls > tt.fails {
					return nil
				}
				if tt.cancel {
					cancel()
				}
				return tt.failWith
			})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if tt.calls != 0 && calls != tt.calls {
				t.Errorf("fn called %d times, want %d", calls, tt.calls)
			}
			if errors.Is(tt.want, errServerGone) && time.Since(start) < tt.bound {
				t.Errorf("gave up after %s, before the bound %s", time.Since(start), tt.bound)
			}
			for _, s := range tt.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stderr %q does not say %q", out.String(), s)
				}
			}
			if tt.silent && out.Len() > 0 {
				t.Errorf("stderr %q, want nothing", out.String())
			}
		})
	}
}
