package tenant

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// Deleter runs the deletions of projects under way (see
// inventory.DeletionPhases), one process of the deployment at a time.
type Deleter struct {
	o   Options
	log *slog.Logger
}

// NewDeleter returns a Deleter.
func NewDeleter(o Options) *Deleter {
	o = o.withDefaults()
	return &Deleter{o: o, log: o.Logger}
}

// Run runs the deletions under way until ctx ends (then it returns nil):
// each in turn a batch at a time, so that one large project does not hold
// up the others; a deletion waiting for the managers (hosts and instances
// deleted in two phases) is looked at again at the next poll.
func (d *Deleter) Run(ctx context.Context) error {
	fails := 0
	for {
		busy, err := d.Step(ctx)
		wait := d.o.Poll
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fails++
			wait = backoff(d.o.RetryWait, fails)
			d.log.Warn("tenant: project deletions", "err", err, "retry_in", wait.Round(time.Millisecond))
		case busy:
			fails = 0
			continue
		default:
			fails = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backoff doubles first with each failure in a row, up to 8 s (as the feed
// runner's), plus up to a fifth at random.
func backoff(first time.Duration, fails int) time.Duration {
	w := first << min(fails-1, 5)
	w = min(w, 8*time.Second)
	return w + rand.N(w/5+1)
}

// Step advances every deletion under way by one batch and reports whether
// any made progress (it may be called again at once). A deletion that
// fails records its error (shown in the project's status) and is tried
// again at the next step; the error returned is the store's when the
// deletions cannot be read.
func (d *Deleter) Step(ctx context.Context) (busy bool, err error) {
	dels, err := d.o.Inventory.ProjectDeletions(ctx)
	if err != nil {
		return false, err
	}
	for _, del := range dels {
		if ctx.Err() != nil {
			return false, nil
		}
		progressed, err := d.advance(ctx, del)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("tenant: project deletion", "project", del.Project, "phase", del.Phase, "err", err)
			if del.Error != err.Error() {
				del.Error = err.Error()
				if serr := d.o.Inventory.SaveProjectDeletion(ctx, del); serr != nil && !gone(serr) {
					return busy, serr
				}
			}
			continue
		}
		busy = busy || progressed
	}
	return busy, nil
}

// advance does one batch of a deletion's phase, or moves it to the next
// phase once nothing of it is left; it reports whether anything was done.
func (d *Deleter) advance(ctx context.Context, del *eim.ProjectDeletion) (bool, error) {
	phase, ok := inventory.PhaseOf(del.Phase)
	if !ok {
		// A phase of another release: start over (every phase is
		// idempotent).
		phase = inventory.DeletionPhases[0]
	}
	inv := d.o.Inventory
	// Still this deletion's project? A deleter that read the deletions
	// before another (a replica during a lease's hand-over) finished this
	// one must not work on a project that took the name since. (The last
	// step checks it again in its transaction.)
	cur, err := inv.FindProjectDeletion(ctx, del.Project)
	if gone(err) || (err == nil && !cur.Started.Equal(del.Started.Time)) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if phase.Name == inventory.PhaseProject {
		if err := inv.FinishProjectDeletion(ctx, del); err != nil {
			return false, err
		}
		d.log.Info("tenant: project deleted", "project", del.Project, "took", time.Since(del.Started.Time).Round(time.Millisecond))
		return true, nil
	}
	remaining, did, err := d.batch(ctx, del.Project, phase)
	if err != nil {
		return false, err
	}
	next := phase.Name
	if remaining == 0 {
		next = inventory.NextPhase(phase.Name)
		d.log.Debug("tenant: project deletion phase done", "project", del.Project, "phase", phase.Name, "next", next)
	}
	if next == del.Phase && remaining == del.Remaining && del.Error == "" {
		return did, nil // waiting: nothing to record
	}
	del.Phase, del.Remaining, del.Error = next, remaining, ""
	if remaining == 0 {
		del.Remaining = -1 // not counted yet
	}
	if err := inv.SaveProjectDeletion(ctx, del); err != nil {
		return false, err
	}
	return true, nil
}

// batch does one batch of a phase: the first of its kinds with something
// left, except that the hosts and instances being deleted by their
// managers are waited for alongside the rest. It returns what is left of
// the phase and whether it wrote anything.
func (d *Deleter) batch(ctx context.Context, project string, phase inventory.DeletionPhase) (remaining int, did bool, err error) {
	inv := d.o.Inventory
	if phase.Name == inventory.PhaseClusters {
		// One transaction each: a project's clusters are few.
		return 0, true, inv.DeleteClustersOf(ctx, project)
	}
	if phase.Name == inventory.PhaseDeauthorize {
		// One statement a host, after a read of them all: larger batches.
		done, left, err := inv.DeauthorizeHosts(ctx, project, 10*d.o.Batch)
		return left, done > 0, err
	}
	for _, k := range phase.Kinds {
		done, left, err := inv.DeleteAllOf(ctx, project, k, d.o.Batch)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", k, err)
		}
		remaining += left
		did = did || done > 0
		if left > 0 && k != eim.KindInstance && k != eim.KindHost {
			return remaining, did, nil
		}
	}
	return remaining, did, nil
}
