package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// deployment is this process's view of what runs in the whole deployment:
// its own modules and, on PostgreSQL, those that the other live processes
// announced. The API answers from it (501 for a module that runs nowhere,
// GET /v1/orchestrator), and the needs of the process's modules are
// checked against it.
type deployment struct {
	self []string
	// members lists the modules of every live process of the deployment
	// (this one included); nil: this process is the deployment.
	members func(ctx context.Context) ([][]string, error)
	log     *slog.Logger
	now     func() time.Time

	// refreshMu makes one Fresh read at a time; refreshed is when the
	// view was last read.
	refreshMu sync.Mutex
	mu        sync.Mutex
	modules   []string
	refreshed time.Time
	missing   string // the last needs reported missing, to log changes only
}

// deploymentRefresh is how often the view is read again.
const deploymentRefresh = 5 * time.Second

func newDeployment(self []*Module, members func(context.Context) ([][]string, error), log *slog.Logger) *deployment {
	d := &deployment{self: moduleNames(self), members: members, log: log, now: time.Now}
	d.modules = slices.Clone(d.self)
	return d
}

// Modules returns the modules running somewhere, sorted; it answers from
// memory.
func (d *deployment) Modules() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.modules
}

// freshAfter is how old a view Fresh reads again: a write refused for
// its module running nowhere costs at most four reads of the view a second.
const freshAfter = 250 * time.Millisecond

// Fresh returns the modules running somewhere, read again when the view is
// older than freshAfter: a module that seems absent (a write the API would
// refuse with 501) may have a process that started since the last
// periodic refresh. At most one read per freshAfter, whatever the callers.
func (d *deployment) Fresh(ctx context.Context) []string {
	if d.members == nil {
		return d.Modules()
	}
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	d.mu.Lock()
	stale := d.now().Sub(d.refreshed) >= freshAfter
	d.mu.Unlock()
	if stale {
		d.refresh(ctx)
	}
	return d.Modules()
}

// refresh reads the other processes' modules; when they cannot be read
// (the database is away) the last view stays.
func (d *deployment) refresh(ctx context.Context) {
	if d.members == nil {
		return
	}
	all, err := d.members(ctx)
	if err != nil {
		return
	}
	set := slices.Clone(d.self)
	for _, ms := range all {
		for _, m := range ms {
			if !slices.Contains(set, m) {
				set = append(set, m)
			}
		}
	}
	slices.Sort(set)
	d.mu.Lock()
	d.modules = set
	d.refreshed = d.now()
	d.mu.Unlock()
}

// check logs the needs of the selected modules that nothing in the
// deployment satisfies, when they change (and that they are met once they
// are).
func (d *deployment) check(selected []*Module) {
	missing := Missing(selected, d.Modules())
	text := strings.Join(missing, "; ")
	d.mu.Lock()
	changed := text != d.missing
	d.missing = text
	d.mu.Unlock()
	switch {
	case !changed:
	case len(missing) > 0:
		for _, m := range missing {
			d.log.Warn("deployment: " + m)
		}
	default:
		d.log.Info("deployment: every module's needs are met", "modules", strings.Join(d.Modules(), ","))
	}
}

// run keeps the view current until ctx ends.
func (d *deployment) run(ctx context.Context, selected []*Module) error {
	t := time.NewTicker(deploymentRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		d.refresh(ctx)
		d.check(selected)
	}
}
