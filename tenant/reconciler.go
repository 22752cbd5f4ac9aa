package tenant

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/inventory"
)

// Module is the name of the tenant module, under which it records its
// readiness condition on a project.
const Module = "tenant"

// Options configure the tenant's loops. Store and Inventory are required.
type Options struct {
	Store     eim.Store
	Inventory *inventory.Service
	Logger    *slog.Logger
	// Defaults is the definition applied (zero: Builtin()).
	Defaults Defaults
	// Relist is how often every project is checked against the definition
	// again (default 1 min): what failed is retried then.
	Relist time.Duration
	// Poll is how often the deletions under way are looked for, and a
	// deletion waiting for the managers looked at again (default 250 ms):
	// a DELETE may reach another process. One small read each.
	Poll time.Duration
	// Batch bounds the resources a deletion's transaction deletes
	// (default 100).
	Batch int
	// RetryWait is the first pause after a failure (default 1 s).
	RetryWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.Store == nil || o.Inventory == nil {
		panic("tenant: Store and Inventory are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Defaults.Version == 0 {
		o.Defaults = Builtin()
	}
	if o.Relist <= 0 {
		o.Relist = time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	return o
}

// Reconciler brings every project to the current definition of the
// defaults and records the tenant's readiness condition on it.
type Reconciler struct {
	o   Options
	log *slog.Logger
}

// NewReconciler returns a Reconciler.
func NewReconciler(o Options) *Reconciler {
	o = o.withDefaults()
	return &Reconciler{o: o, log: o.Logger}
}

// feedConsumer names the reconciler's position in the change feed: it
// runs once per deployment, and the process taking it over resumes there.
const feedConsumer = "tenant"

// Run follows the projects created and checks every project at the start
// and every Relist, until ctx ends (then it returns nil).
func (r *Reconciler) Run(ctx context.Context) error {
	return feed.New(feed.Options{Store: r.o.Store, Name: feedConsumer, Logger: r.log, Durable: true, MinWait: r.o.RetryWait,
		Kinds: []eim.Kind{eim.KindProject},
		Handle: func(ctx context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				if ev.Op != eim.OpCreated {
					continue
				}
				if err := r.Reconcile(ctx, ev.Project); err != nil && !gone(err) {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					// The re-list tries again.
					r.log.Warn("tenant: defaults of a new project", "project", ev.Project, "err", err, "retry_in", r.o.Relist)
				}
			}
			return nil
		},
		Relist:      r.Pass,
		RelistEvery: r.o.Relist,
	}).Run(ctx)
}

// gone reports whether err says the project no longer exists.
func gone(err error) bool { return eim.ErrorCode(err) == eim.ENOTFOUND }

// Pass brings every project that is behind the definition to it. A
// project that fails is logged and left to the next pass.
func (r *Reconciler) Pass(ctx context.Context) error {
	ps, err := r.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	var failed int
	for _, p := range ps {
		if p.Deleting {
			continue
		}
		if err := r.Reconcile(ctx, p.Name); err != nil && !gone(err) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed++
			r.log.Warn("tenant: defaults", "project", p.Name, "err", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d projects of %d failed", failed, len(ps))
	}
	return nil
}

// Reconcile brings the project to the definition, if it is behind.
func (r *Reconciler) Reconcile(ctx context.Context, project string) error {
	def := r.o.Defaults
	version, applied, err := r.o.Inventory.AppliedDefaults(ctx, project)
	if err != nil {
		return err
	}
	if version >= def.Version {
		return r.ensureCondition(ctx, project, version)
	}
	p, err := r.o.Store.FindProject(ctx, project)
	if err != nil {
		return err
	}
	if p.Deleting {
		return nil
	}
	byKey := map[string]eim.AppliedDefault{}
	for _, a := range applied {
		byKey[a.Key] = a
	}
	var created, updated int
	for _, g := range def.Groups {
		a, did, err := r.applyGroup(ctx, project, g, byKey)
		if err != nil {
			return fmt.Errorf("telemetry group %s: %w", g.Name, err)
		}
		byKey[a.Key] = a
		switch did {
		case "created":
			created++
		case "updated":
			updated++
		}
	}
	if def.Provider {
		if _, ok := byKey[providerKey]; !ok {
			// Created with the project (inventory.CreateProject); made here
			// for a project older than that. Once recorded it is never made
			// again: a user who deleted it meant it.
			id, err := r.o.Inventory.EnsureDefaultProvider(ctx, project)
			if err != nil {
				return fmt.Errorf("default provider: %w", err)
			}
			byKey[providerKey] = eim.AppliedDefault{Key: providerKey, ResourceID: id, Digest: "settings"}
		}
	}
	tc, err := r.applyTemplates(ctx, project, def, byKey)
	if err != nil {
		return err
	}
	created += tc
	// The record, then the condition: the project shows ready once what
	// it holds is known to be its defaults (a delete without force counts
	// them out). A crash in between leaves the condition to the next
	// pass (ensureCondition).
	out := make([]eim.AppliedDefault, 0, len(byKey))
	for _, a := range byKey {
		out = append(out, a)
	}
	if err := r.o.Inventory.SaveAppliedDefaults(ctx, project, def.Version, out); err != nil {
		return err
	}
	if err := r.setReady(ctx, project, def.Version); err != nil {
		return err
	}
	r.log.Info("tenant: defaults applied", "project", project, "version", def.Version, "from", version, "created", created, "updated", updated)
	return nil
}

// setReady records the tenant's condition: the defaults of version
// applied.
func (r *Reconciler) setReady(ctx context.Context, project string, version int) error {
	msg := fmt.Sprintf("defaults of version %d applied", version)
	return r.o.Inventory.SetCondition(ctx, project, eim.Condition{Module: Module, Ready: true, Message: msg})
}

// ensureCondition records the condition of a project brought to version
// whose condition is missing (a crash between the two writes).
func (r *Reconciler) ensureCondition(ctx context.Context, project string, version int) error {
	cs, err := r.o.Inventory.Conditions(ctx, project)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(cs, func(c eim.Condition) bool { return c.Module == Module && c.Ready }) {
		return nil
	}
	return r.setReady(ctx, project, version)
}

// applyGroup applies a default group to the project and returns its
// record and what was done ("created", "updated" or "").
func (r *Reconciler) applyGroup(ctx context.Context, project string, g Group, byKey map[string]eim.AppliedDefault) (eim.AppliedDefault, string, error) {
	inv := r.o.Inventory
	want := g.digest()
	a, ok := byKey[g.Key()]
	if !ok {
		// Never applied: a group of that name and type is adopted (ours
		// when it is as the definition has it: a run that crashed before
		// its record was saved made it; else the project's own), else
		// made.
		page, err := inv.List(ctx, project, eim.KindTelemetryGroup, inventory.ListQuery{Variant: string(g.Type), PageSize: 1,
			Where: []eim.Cond{{Field: "name", Value: g.Name}}})
		if err != nil {
			return a, "", err
		}
		if len(page.Items) == 1 {
			cur := page.Items[0].(*eim.TelemetryGroup)
			d := ""
			if groupDigest(cur) == want {
				d = want
			}
			return eim.AppliedDefault{Key: g.Key(), ResourceID: cur.ResourceID, Digest: d}, "", nil
		}
		res, err := inv.Create(ctx, project, g.resource())
		if err != nil {
			return a, "", err
		}
		return eim.AppliedDefault{Key: g.Key(), ResourceID: res.Base().ResourceID, Digest: want}, "created", nil
	}
	if a.Digest == "" || a.Digest == want {
		return a, "", nil // the project's own, or as the definition has it
	}
	// As written: it follows the definition. Deleted by a user (gone) or
	// changed by one (another digest): theirs now, left alone.
	wrote, err := inv.FollowTelemetryGroup(ctx, project, a.ResourceID,
		func(cur *eim.TelemetryGroup) bool { return groupDigest(cur) == a.Digest }, g.resource())
	if err != nil || !wrote {
		return a, "", err
	}
	a.Digest = want
	return a, "updated", nil
}

func (g Group) resource() *eim.TelemetryGroup {
	return &eim.TelemetryGroup{Type: g.Type, Name: g.Name, CollectorKind: g.Collector, Groups: append([]string(nil), g.Items...)}
}

// applyTemplates makes the default cluster templates the project has
// never had (a template is never changed: one the user deleted is theirs
// to have deleted), and makes the default template the project's default
// once, when it has none. It returns how many it made.
func (r *Reconciler) applyTemplates(ctx context.Context, project string, def Defaults, byKey map[string]eim.AppliedDefault) (int, error) {
	if len(def.ClusterTemplates) == 0 {
		return 0, nil
	}
	have, err := r.o.Store.ClusterTemplates(ctx, project)
	if err != nil {
		return 0, fmt.Errorf("cluster templates: %w", err)
	}
	exists := func(name, version string) bool {
		return slices.ContainsFunc(have, func(t *eim.ClusterTemplate) bool { return t.Name == name && t.Version == version })
	}
	created := 0
	for _, t := range def.ClusterTemplates {
		key := templateKey(t)
		if _, ok := byKey[key]; ok {
			continue
		}
		if !exists(t.Name, t.Version) {
			t.Project = project
			if err := r.o.Store.CreateClusterTemplate(ctx, &t); err != nil && eim.ErrorCode(err) != eim.ECONFLICT {
				return created, fmt.Errorf("cluster template %s: %w", t.Name, err)
			}
			created++
		}
		byKey[key] = eim.AppliedDefault{Key: key, ResourceID: eim.ClusterTemplateKey(t.Name, t.Version), Digest: t.Version}
	}
	if _, ok := byKey[defaultTemplateKey]; !ok && def.DefaultTemplate != "" {
		if !slices.ContainsFunc(have, func(t *eim.ClusterTemplate) bool { return t.Default }) {
			for _, t := range def.ClusterTemplates {
				if t.Name == def.DefaultTemplate {
					if err := r.o.Store.SetDefaultClusterTemplate(ctx, project, t.Name, t.Version); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
						return created, fmt.Errorf("default cluster template: %w", err)
					}
				}
			}
		}
		byKey[defaultTemplateKey] = eim.AppliedDefault{Key: defaultTemplateKey, ResourceID: def.DefaultTemplate, Digest: "set"}
	}
	return created, nil
}
