package server

import (
	"context"
	"fmt"
	"github.com/eimhq/eim"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Loop states, as /readyz shows them.
const (
	loopStarting = "starting"
	loopRunning  = "running"
	loopStandby  = "standby" // a run-once loop another process runs
	loopFailed   = "failed"  // ended with an error or a panic; run again soon
)

// loopRestart is the pause before a loop that failed runs again.
const loopRestart = 2 * time.Second

// runningLoop is a loop of this process and its state.
type runningLoop struct {
	module string
	Loop
	state atomic.Value // string
}

func (l *runningLoop) name() string { return l.module + "/" + l.Name }

func (l *runningLoop) setState(s string) { l.state.Store(s) }

func (l *runningLoop) State() string {
	s, _ := l.state.Load().(string)
	if s == "" {
		s = loopStarting
	}
	return s
}

// ready reports whether the loop does its job: running (and ready, when it
// says), or standing by for a lease another process holds.
func (l *runningLoop) ready() bool {
	switch l.State() {
	case loopStandby:
		return true
	case loopRunning:
		return l.Ready == nil || l.Ready()
	}
	return false
}

// Singleton runs fn while this process holds the lease name (fn's context
// ends when the lease is lost), claims it again after, and returns when ctx
// ends.
type Singleton func(ctx context.Context, name string, fn func(context.Context) error) error

// alone is the Singleton of a process that is the whole deployment (SQLite):
// the lease is always its own.
func alone(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}

// run runs l until ctx ends: a per-process loop at once, a run-once loop
// under the lease once. A failure (an error, a panic, or a return before
// ctx ended) is logged and the loop is run again after a pause.
func (l *runningLoop) run(ctx context.Context, once Singleton, log *slog.Logger) {
	// What the loop writes is the module's decision (the audit log's
	// principal).
	ctx = eim.WithActor(ctx, eim.ModuleActor(l.module))
	runOnce := func(ctx context.Context) error {
		for {
			l.setState(loopRunning)
			err := protect(ctx, l.Run)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("stopped by itself")
			}
			l.setState(loopFailed)
			log.Error("module loop failed; running it again", "loop", l.name(), "err", err, "retry_in", loopRestart)
			t := time.NewTimer(loopRestart)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
	if !l.Once {
		_ = runOnce(ctx)
		return
	}
	l.setState(loopStandby)
	held := func(ctx context.Context) error {
		defer l.setState(loopStandby) // the lease is lost: another process runs it
		return runOnce(ctx)
	}
	if err := once(ctx, "loop/"+l.name(), held); err != nil && ctx.Err() == nil {
		log.Error("module loop: lease", "loop", l.name(), "err", err)
	}
}

// protect runs fn, turning a panic into an error with its stack.
func protect(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx)
}
