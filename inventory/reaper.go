package inventory

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// ReaperOptions configure a Reaper. Zero values select defaults.
type ReaperOptions struct {
	Logger *slog.Logger
	// Interval between full re-lists (default 30 s). The change feed makes
	// the reaper prompt; the re-list makes it correct even if it missed an
	// event or a confirmation failed.
	Interval time.Duration
}

// Reaper is the built-in second phase of host and instance deletes: a
// level-based reconciler that removes hosts and instances whose desired
// state is DELETED (via Service.ConfirmDeleted).
//
// Today no node-side cleanup exists, so the reaper confirms every such
// delete at once. When the onboarding and host managers arrive they take
// over the hosts and instances that need cleanup first (revoking the node's
// credentials, wiping the disk) and confirm the delete themselves; the
// reaper will then only handle what needs no cleanup.
type Reaper struct {
	svc      *Service
	log      *slog.Logger
	interval time.Duration
}

// NewReaper returns a Reaper working through svc.
func NewReaper(svc *Service, opts ReaperOptions) *Reaper {
	r := &Reaper{svc: svc, log: opts.Logger, interval: opts.Interval}
	if r.log == nil {
		r.log = svc.logger
	}
	if r.interval <= 0 {
		r.interval = 30 * time.Second
	}
	return r
}

type feedItem struct {
	ev  eim.Event
	err error
}

// Run reconciles until ctx is done, then returns nil. It watches the change
// feed of hosts and instances and re-lists every interval.
func (r *Reaper) Run(ctx context.Context) error {
	store := r.svc.store
	rev, err := store.Revision(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("reaper: read revision", "err", err)
	}
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()

	var (
		wg     sync.WaitGroup
		stop   context.CancelFunc = func() {}
		feed   chan feedItem
		lastOK = rev
	)
	startWatch := func(after int64) {
		wctx, cancel := context.WithCancel(ctx)
		ch := make(chan feedItem)
		stop, feed = cancel, ch
		wg.Go(func() {
			for ev, err := range store.Watch(wctx, after, eim.KindHost, eim.KindInstance) {
				select {
				case ch <- feedItem{ev, err}:
				case <-wctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	startWatch(rev)
	r.relist(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if feed == nil { // the watch failed: resume it where it stopped
				startWatch(lastOK)
			}
			r.relist(ctx)
		case it := <-feed:
			if it.err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.log.Warn("reaper: change feed", "err", it.err)
				stop()
				wg.Wait()
				feed = nil
				continue
			}
			lastOK = it.ev.Revision
			// Only an update can set desired DELETED: creating a resource
			// never does, so creates (the bulk of a fleet import) cost nothing.
			if it.ev.Op == eim.OpUpdated {
				r.reconcile(ctx, it.ev.Project, it.ev.Kind, it.ev.ID)
			}
		}
	}
}

// reconcile confirms the delete of one host or instance if it is wanted.
func (r *Reaper) reconcile(ctx context.Context, project string, k eim.Kind, id string) {
	var deleting bool
	err := r.svc.store.View(ctx, project, func(tx eim.Tx) error {
		res, err := tx.Get(ctx, k, id)
		if err != nil {
			return err
		}
		deleting = desiredDeleted(res)
		return nil
	})
	if err != nil {
		if eim.ErrorCode(err) != eim.ENOTFOUND && ctx.Err() == nil {
			r.log.Warn("reaper: read", "kind", k, "id", id, "err", err)
		}
		return
	}
	if deleting {
		r.confirm(ctx, project, k, id)
	}
}

func (r *Reaper) confirm(ctx context.Context, project string, k eim.Kind, id string) {
	if err := r.svc.ConfirmDeleted(ctx, project, k, id); err != nil && ctx.Err() == nil {
		r.log.Warn("reaper: confirm delete", "kind", k, "id", id, "err", err)
		return
	}
	r.log.Debug("reaper: deleted", "project", project, "kind", k, "id", id)
}

// relist confirms every pending delete of every project: instances first,
// since a host goes only after its instance.
func (r *Reaper) relist(ctx context.Context) {
	for _, c := range []struct {
		k     eim.Kind
		state string
	}{{eim.KindInstance, string(eim.InstanceStateDeleted)}, {eim.KindHost, string(eim.HostStateDeleted)}} {
		var items []eim.Resource
		err := r.svc.store.View(ctx, "", func(tx eim.Tx) error {
			var err error
			items, _, err = tx.List(ctx, c.k, eim.Query{Where: []eim.Cond{{Field: "desiredState", Value: c.state}}})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reaper: re-list", "kind", c.k, "err", err)
			}
			return
		}
		for _, it := range items {
			r.confirm(ctx, it.Base().Project, c.k, it.Base().ResourceID)
		}
	}
}

func desiredDeleted(r eim.Resource) bool {
	switch r := r.(type) {
	case *eim.Host:
		return r.DesiredState == eim.HostStateDeleted
	case *eim.Instance:
		return r.DesiredState == eim.InstanceStateDeleted
	}
	return false
}
