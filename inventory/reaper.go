package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// ReaperOptions configure a Reaper. Zero values select defaults.
type ReaperOptions struct {
	Logger *slog.Logger
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
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
	metrics  prometheus.Registerer
	svc      *Service
	log      *slog.Logger
	interval time.Duration
}

// NewReaper returns a Reaper working through svc.
func NewReaper(svc *Service, opts ReaperOptions) *Reaper {
	r := &Reaper{svc: svc, log: opts.Logger, interval: opts.Interval, metrics: opts.Metrics}
	if r.log == nil {
		r.log = svc.logger
	}
	if r.interval <= 0 {
		r.interval = 30 * time.Second
	}
	return r
}

// reaperConsumer names the reaper's position in the change feed (see
// feed.Options.Durable): it runs once per deployment, and the replica
// that takes it over resumes where the last one stopped.
const reaperConsumer = "reaper"

// Run reconciles until ctx is done, then returns nil. It follows the
// change feed of hosts and instances and re-lists every interval.
func (r *Reaper) Run(ctx context.Context) error {
	return feed.New(feed.Options{Store: r.svc.store, Name: reaperConsumer, Logger: r.log, Metrics: r.metrics, Durable: true,
		Kinds: []eim.Kind{eim.KindHost, eim.KindInstance}, MaxBatch: maxReapBatch, Handle: r.handle,
		Relist: r.relist, RelistEvery: r.interval,
	}).Run(ctx)
}

// handle reconciles a batch of events: the resources updated, by project
// and kind. Only an update can set desired DELETED: creating a resource
// never does, so creates (the bulk of a fleet import) cost nothing.
func (r *Reaper) handle(ctx context.Context, evs []eim.Event) error {
	updated := map[reapTarget]map[string]bool{}
	for _, ev := range evs {
		if ev.Op != eim.OpUpdated {
			continue
		}
		t := reapTarget{ev.Project, ev.Kind}
		if updated[t] == nil {
			updated[t] = map[string]bool{}
		}
		updated[t][ev.ID] = true
	}
	// Instances first: a host deleted with its instance goes once the
	// instance is gone.
	for _, k := range []eim.Kind{eim.KindInstance, eim.KindHost} {
		for t, ids := range updated {
			if t.kind == k {
				r.reconcile(ctx, t, ids)
			}
		}
	}
	return nil
}

// maxReapBatch bounds the events the reaper reconciles together (within
// the lists SQLite takes as parameters, see sqlstore).
const maxReapBatch = 100

// reapTarget is a kind of resource in a project.
type reapTarget struct {
	project string
	kind    eim.Kind
}

// reconcile confirms the deletes wanted among the resources ids of t: one
// query that returns only those whose desired state is DELETED, which is
// usually none (most updates are managers writing status).
func (r *Reaper) reconcile(ctx context.Context, t reapTarget, ids map[string]bool) {
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	var deleting []eim.Resource
	err := r.svc.store.View(ctx, t.project, func(tx eim.Tx) error {
		var err error
		deleting, _, err = tx.List(ctx, t.kind, eim.Query{Where: []eim.Cond{
			{Field: "resourceId", Value: list},
			{Field: "desiredState", Value: deletedState(t.kind)},
		}, NoTotal: true})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reaper: read", "kind", t.kind, "project", t.project, "err", err)
		}
		return
	}
	for _, res := range deleting {
		r.confirm(ctx, t.project, t.kind, res.Base().ResourceID)
	}
}

// deletedState is the desired state of a k (host or instance) to delete.
func deletedState(k eim.Kind) string {
	if k == eim.KindInstance {
		return string(eim.InstanceStateDeleted)
	}
	return string(eim.HostStateDeleted)
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
func (r *Reaper) relist(ctx context.Context) error {
	for _, k := range []eim.Kind{eim.KindInstance, eim.KindHost} {
		var items []eim.Resource
		err := r.svc.store.View(ctx, "", func(tx eim.Tx) error {
			var err error
			items, _, err = tx.List(ctx, k, eim.Query{Where: []eim.Cond{{Field: "desiredState", Value: deletedState(k)}}})
			return err
		})
		if err != nil {
			return fmt.Errorf("re-list %s: %w", k, err)
		}
		for _, it := range items {
			r.confirm(ctx, it.Base().Project, k, it.Base().ResourceID)
		}
	}
	return nil
}
