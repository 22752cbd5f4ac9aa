package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// errRebooted is the cause a node's Provisioner is cancelled with when the
// simulated machine "reboots" mid-workflow.
var errRebooted = errors.New("simulated reboot")

// Executor is the simulated agent.Executor of one node: every action sleeps
// for Delay and prints a few lines; nothing is touched. Faults: with Fail,
// the stream-image action (or the second action when there is none) fails;
// with Reboot, the first write-file action (or the third) calls OnReboot
// once, which abandons the node's Provisioner, and then blocks until its
// context ends, as a machine losing power would.
type Executor struct {
	Delay    time.Duration
	Fail     bool
	Reboot   bool
	OnReboot func()

	rebooted bool // only touched by Run, which a Provisioner calls serially
	failed   atomic.Bool
}

// Failed tells whether the injected failure has happened.
func (e *Executor) Failed() bool { return e.failed.Load() }

// Run implements agent.Executor.
func (e *Executor) Run(ctx context.Context, a *provisioningv1.Action, out io.Writer) error {
	fmt.Fprintf(out, "sim: %s: started\n", a.GetName())
	if e.Delay > 0 {
		t := time.NewTimer(e.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if e.Fail && failsAt(a) {
		e.failed.Store(true)
		fmt.Fprintf(out, "sim: %s: injected failure\n", a.GetName())
		return fmt.Errorf("simulated failure of %s", a.GetName())
	}
	if e.Reboot && !e.rebooted && rebootsAt(a) {
		e.rebooted = true
		fmt.Fprintf(out, "sim: %s: power lost\n", a.GetName())
		if e.OnReboot != nil {
			e.OnReboot()
		}
		<-ctx.Done()
		return ctx.Err()
	}
	switch s := a.GetSpec().(type) {
	case *provisioningv1.Action_StreamImage:
		fmt.Fprintf(out, "sim: streamed %s (sha256 %s)\n", s.StreamImage.GetUrl(), s.StreamImage.GetSha256())
	case *provisioningv1.Action_WriteFile:
		fmt.Fprintf(out, "sim: wrote %d bytes to %s\n", len(s.WriteFile.GetContent()), s.WriteFile.GetPath())
	}
	fmt.Fprintf(out, "sim: %s: done\n", a.GetName())
	return nil
}

func failsAt(a *provisioningv1.Action) bool {
	if _, ok := a.GetSpec().(*provisioningv1.Action_StreamImage); ok {
		return true
	}
	return a.GetSpec() == nil && a.GetIndex() == 1
}

func rebootsAt(a *provisioningv1.Action) bool {
	if _, ok := a.GetSpec().(*provisioningv1.Action_WriteFile); ok {
		return true
	}
	return a.GetSpec() == nil && a.GetIndex() == 2
}
