package oscatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/inventory"
)

// Options configure a Manager. Store and Catalog are required; zero values
// select defaults.
type Options struct {
	Store eim.Store
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
	Catalog *Catalog
	// Reload, when set, reads the manifests again at every refresh; a
	// failed reload keeps the catalog as it was (and is logged).
	Reload func() (*Catalog, error)
	Logger *slog.Logger
	// Refresh is how often every project is brought in line with the
	// catalog again (default 12 h; negative: never, only at the start).
	Refresh time.Duration
	// RetryWait is the first pause before Run follows the change feed
	// again after it failed (default 1 s, growing with failures in a row:
	// see feed.Options.MinWait).
	RetryWait time.Duration
}

// DefaultRefresh is how often the manifests are read again, as the
// original refreshed its catalog.
const DefaultRefresh = 12 * time.Hour

// Manager loads the catalog into projects and keeps instances'
// osUpdateAvailable. See the package documentation.
type Manager struct {
	metrics prometheus.Registerer
	store   eim.Store
	cat     atomic.Pointer[Catalog]
	reload  func() (*Catalog, error)
	log     *slog.Logger
	refresh time.Duration
	retry   time.Duration
	runOnce sync.Once

	mu     sync.Mutex          // one reconciliation at a time; guards the maps
	index  map[string]*osIndex // by project, dropped when its OSes change
	failed map[string]bool     // projects to reconcile again soon
	ready  map[string]bool     // projects whose condition this Manager recorded
}

// failedRetry is how often projects whose reconciliation failed are tried
// again (a new project must not wait for the next refresh).
const failedRetry = 30 * time.Second

// Stats count what a pass or a reconciliation did.
type Stats struct {
	Projects  int // projects reconciled
	Created   int // OS resources created
	Updated   int // OS resources changed to follow their manifest
	Conflicts int // profiles not loaded: their OS name is taken by another OS
	Instances int // instances whose osUpdateAvailable was written
	Failed    int // projects that failed (logged; retried at the next pass)
}

func (s *Stats) add(o Stats) {
	s.Projects += o.Projects
	s.Created += o.Created
	s.Updated += o.Updated
	s.Conflicts += o.Conflicts
	s.Instances += o.Instances
	s.Failed += o.Failed
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.Store == nil || opts.Catalog == nil {
		panic("oscatalog.New: Store and Catalog are required")
	}
	m := &Manager{store: opts.Store, metrics: opts.Metrics, reload: opts.Reload, log: opts.Logger,
		refresh: opts.Refresh, retry: opts.RetryWait, index: map[string]*osIndex{}, failed: map[string]bool{}, ready: map[string]bool{}}
	m.cat.Store(opts.Catalog)
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.refresh == 0 {
		m.refresh = DefaultRefresh
	}
	return m
}

// Catalog returns the catalog in use.
func (m *Manager) Catalog() *Catalog { return m.cat.Load() }

// watched: projects (a new one gets the catalog), OS resources (their
// versions decide osUpdateAvailable) and instances (their OS).
var watched = []eim.Kind{eim.KindProject, eim.KindOS, eim.KindInstance}

// maxBatch bounds the events handled together (within the lists SQLite
// takes as parameters).
const maxBatch = 500

// feedConsumer names the manager's position in the change feed (see
// feed.Options.Durable): it runs once per deployment, and the replica
// that takes it over resumes where the last one stopped.
const feedConsumer = "oscatalog"

// Run loads the catalog into every project, then follows the change feed
// and refreshes every interval, until ctx is done (it then returns nil).
// It may be called once.
func (m *Manager) Run(ctx context.Context) error {
	first := false
	m.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("oscatalog: Run called twice")
	}
	m.logOverrides(m.cat.Load())
	var refreshed time.Time
	return feed.New(feed.Options{Store: m.store, Name: feedConsumer, Logger: m.log, Metrics: m.metrics, Durable: true, MinWait: m.retry,
		Kinds: watched, MaxBatch: maxBatch,
		Handle: func(ctx context.Context, evs []eim.Event) error {
			b := newBatch()
			for _, ev := range evs {
				b.add(ev)
			}
			m.handle(ctx, b)
			return nil
		},
		// A pass at the start; then, every failedRetry, the projects that
		// failed, or a refresh once one is due.
		Relist: func(ctx context.Context) error {
			switch {
			case refreshed.IsZero():
				m.Pass(ctx)
			case m.refresh > 0 && time.Since(refreshed) >= m.refresh:
				m.Refresh(ctx)
			default:
				m.retryFailed(ctx)
				return nil
			}
			refreshed = time.Now()
			return nil
		},
		RelistEvery: failedRetry,
	}).Run(ctx)
}

// isCancel reports whether err is the end of a context (the server
// stopping).
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// batch is what a run of feed events asks for, by project.
type batch struct {
	created   map[string]bool
	deleted   map[string]bool
	osChanged map[string]bool
	instances map[string]map[string]bool
}

func newBatch() *batch {
	return &batch{created: map[string]bool{}, deleted: map[string]bool{}, osChanged: map[string]bool{}, instances: map[string]map[string]bool{}}
}

func (b *batch) add(ev eim.Event) {
	switch ev.Kind {
	case eim.KindProject:
		if ev.Op == eim.OpDeleted {
			b.deleted[ev.Project] = true
			delete(b.created, ev.Project)
		} else {
			b.created[ev.Project] = true
			delete(b.deleted, ev.Project)
		}
	case eim.KindOS:
		b.osChanged[ev.Project] = true
	case eim.KindInstance:
		if ev.Op == eim.OpDeleted {
			return
		}
		if b.instances[ev.Project] == nil {
			b.instances[ev.Project] = map[string]bool{}
		}
		b.instances[ev.Project][ev.ID] = true
	}
}

// handle reconciles what a batch of events touched: a created project in
// full (catalog and instances), a project whose OSes changed its
// instances, and otherwise the instances named.
func (m *Manager) handle(ctx context.Context, b *batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range b.deleted {
		delete(m.index, p)
		delete(m.failed, p)
		delete(m.ready, p)
	}
	for p := range b.created {
		st, err := m.reconcile(ctx, p, true)
		m.logProject(p, "project created", st, err)
	}
	for p := range b.osChanged {
		if b.created[p] || b.deleted[p] {
			continue
		}
		delete(m.index, p)
		st, err := m.reconcile(ctx, p, false)
		m.logProject(p, "OS resources changed", st, err)
	}
	for p, set := range b.instances {
		if b.created[p] || b.osChanged[p] || b.deleted[p] {
			continue
		}
		ids := make([]string, 0, len(set))
		for id := range set {
			ids = append(ids, id)
		}
		idx, err := m.indexOf(ctx, p)
		if err == nil {
			var n int
			n, err = m.updateInstances(ctx, p, idx, ids)
			if n > 0 {
				m.log.Debug("os catalog: osUpdateAvailable written", "project", p, "instances", n)
			}
		}
		if err != nil && !isCancel(err) && eim.ErrorCode(err) != eim.ENOTFOUND {
			m.failed[p] = true
			m.log.Warn("os catalog: instances changed", "project", p, "err", err, "retry_in", failedRetry)
		}
	}
}

// retryFailed reconciles again the projects that failed before.
func (m *Manager) retryFailed(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.failed {
		st, err := m.reconcile(ctx, p, true)
		m.logProject(p, "an earlier failure", st, err)
	}
}

// logProject logs what reconciling a project did, and remembers it for a
// retry when it failed. The caller holds m.mu.
func (m *Manager) logProject(project, why string, st Stats, err error) {
	if err != nil && isCancel(err) {
		return
	}
	delete(m.failed, project)
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return // the project is gone
		}
		m.failed[project] = true
		m.log.Warn("os catalog: reconcile project", "project", project, "after", why, "err", err, "retry_in", failedRetry)
		return
	}
	if why != "pass" && st.Created+st.Updated+st.Instances+st.Conflicts > 0 {
		m.log.Info("os catalog: project reconciled", "project", project, "after", why,
			"created", st.Created, "updated", st.Updated, "conflicts", st.Conflicts, "instances", st.Instances)
	}
}

// indexOf returns the project's cached index, reading it when missing.
func (m *Manager) indexOf(ctx context.Context, project string) (*osIndex, error) {
	if idx := m.index[project]; idx != nil {
		return idx, nil
	}
	var oses []*eim.OS
	err := m.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		oses, err = listOS(ctx, tx, []eim.Cond{{Field: "osType", Value: string(osTypeImmutable)}})
		return err
	})
	if err != nil {
		return nil, err
	}
	idx := newIndex(oses)
	m.index[project] = idx
	return idx, nil
}

// Refresh reads the manifests again (when the Manager has Reload) and
// runs a pass. Run calls it every refresh interval.
func (m *Manager) Refresh(ctx context.Context) Stats {
	if m.reload != nil {
		c, err := m.reload()
		switch {
		case err != nil:
			m.log.Error("os catalog: reading the manifests again failed; keeping the catalog loaded before", "err", err)
		case c.Digest() != m.cat.Load().Digest():
			m.log.Info("os catalog: manifests changed", "profiles", len(c.Profiles()))
			m.logOverrides(c)
			m.cat.Store(c)
		}
	}
	return m.Pass(ctx)
}

func (m *Manager) logOverrides(c *Catalog) {
	for _, o := range c.Overrides {
		m.log.Info("os catalog: a local manifest replaces a shipped one", "profile", o.Key.ProfileName, "version", o.Key.Version, "manifest", o.Local, "shipped", o.Shipped)
	}
}

// Pass brings every project in line with the catalog: creates the OS
// resources it misses, updates those of the catalog whose manifest
// changed, and writes the osUpdateAvailable of its instances that are
// wrong. A project that fails is logged and left to the next pass.
func (m *Manager) Pass(ctx context.Context) Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	var total Stats
	projects, err := m.store.ListProjects(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("os catalog: list projects", "err", err)
		}
		return total
	}
	for _, p := range projects {
		if ctx.Err() != nil {
			return total
		}
		if p.Deleting {
			continue // its OS resources are on their way out
		}
		delete(m.index, p.Name)
		st, err := m.reconcile(ctx, p.Name, true)
		if err != nil {
			st.Failed++
		}
		m.logProject(p.Name, "pass", st, err)
		total.add(st)
	}
	m.log.Info("os catalog: pass", "projects", total.Projects, "profiles", len(m.cat.Load().Profiles()),
		"created", total.Created, "updated", total.Updated, "conflicts", total.Conflicts,
		"instances", total.Instances, "failed", total.Failed, "took", time.Since(start).Round(time.Millisecond))
	return total
}

// reconcile brings one project in line: the catalog's OS resources when
// sync, then its instances' osUpdateAvailable. The caller holds m.mu.
func (m *Manager) reconcile(ctx context.Context, project string, sync bool) (Stats, error) {
	st := Stats{Projects: 1}
	cat := m.cat.Load()
	var oses []*eim.OS
	err := m.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		oses, err = listOS(ctx, tx, nil)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("read OS resources: %w", err)
	}
	if sync {
		if p := plan(cat, oses); len(p.create)+len(p.update) > 0 {
			// Planned again inside the write: another replica may have
			// loaded the project meanwhile.
			err := m.store.Update(ctx, project, func(tx eim.Tx) error {
				cur, err := listOS(ctx, tx, nil)
				if err != nil {
					return err
				}
				p = plan(cat, cur)
				for _, o := range p.create {
					if err := inventory.CreateCatalogOS(ctx, tx, o); err != nil {
						return fmt.Errorf("create OS %q: %w", o.Name, err)
					}
				}
				for _, o := range p.update {
					if err := inventory.UpdateCatalogOS(ctx, tx, o); err != nil {
						return fmt.Errorf("update OS %s: %w", o.ResourceID, err)
					}
				}
				oses = p.after
				return nil
			})
			if err != nil {
				return st, err
			}
			st.Created, st.Updated = len(p.create), len(p.update)
		}
		for _, c := range plan(cat, oses).conflicts {
			st.Conflicts++
			m.log.Warn("os catalog: profile not loaded: another OS resource has its name", "project", project,
				"profile", c.ProfileName, "version", c.ImageVersion, "name", c.Name)
		}
		if !m.ready[project] {
			if err := m.recordReady(ctx, project, len(cat.Profiles()), st.Conflicts); err != nil {
				return st, err
			}
		}
	}
	idx := newIndex(oses)
	m.index[project] = idx
	n, err := m.updateInstances(ctx, project, idx, nil)
	st.Instances = n
	return st, err
}

// conditionModule is the module whose readiness condition the Manager
// records on a project (eim.Condition): the os module's.
const conditionModule = "os"

// recordReady records that the catalog is loaded into the project (its
// readiness condition), once per project for the Manager's life. The
// caller holds m.mu.
func (m *Manager) recordReady(ctx context.Context, project string, profiles, conflicts int) error {
	msg := fmt.Sprintf("OS catalog loaded (%d profiles)", profiles)
	if conflicts > 0 {
		msg += fmt.Sprintf("; %d not loaded: another OS resource has their name", conflicts)
	}
	err := m.store.SetCondition(ctx, project, eim.Condition{Module: conditionModule, Ready: true, Message: msg})
	if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		return fmt.Errorf("record the condition: %w", err)
	}
	m.ready[project] = true
	return nil
}

// listOS reads a project's OS resources matching where.
func listOS(ctx context.Context, tx eim.Tx, where []eim.Cond) ([]*eim.OS, error) {
	items, _, err := tx.List(ctx, eim.KindOS, eim.Query{Where: where, NoTotal: true})
	if err != nil {
		return nil, err
	}
	out := make([]*eim.OS, len(items))
	for i, r := range items {
		out[i] = r.(*eim.OS)
	}
	return out, nil
}

// syncPlan is what loading the catalog into a project takes.
type syncPlan struct {
	create    []*eim.OS  // new OS resources
	update    []*eim.OS  // the catalog's, changed to follow their manifest
	conflicts []*Profile // not loaded: another OS has the name
	after     []*eim.OS  // the project's OS resources once done
}

// plan compares a project's OS resources with the catalog. An OS matches a
// profile by profile name and image version (imageId), as the original
// matched them. An OS with a profileVersion was made by the catalog (the
// API cannot set that field) and follows its manifest; one without it is
// a user's and is left alone, and no catalog OS is added beside it.
func plan(cat *Catalog, oses []*eim.OS) syncPlan {
	var p syncPlan
	byKey := map[Key]*eim.OS{}
	names := map[string]bool{}
	for _, o := range oses {
		names[o.Name] = true
		if o.ProfileName == "" || o.ImageID == "" {
			continue
		}
		k := Key{o.ProfileName, o.ImageID}
		if prev := byKey[k]; prev == nil || (prev.ProfileVersion == "" && o.ProfileVersion != "") {
			byKey[k] = o
		}
	}
	changed := map[string]*eim.OS{}
	for _, pr := range cat.Profiles() {
		o := byKey[pr.Key()]
		switch {
		case o == nil:
			if names[pr.Name] {
				p.conflicts = append(p.conflicts, pr)
				continue
			}
			n := pr.OS()
			names[n.Name] = true
			p.create = append(p.create, n)
		case o.ProfileVersion == "":
			// A user's OS of this profile and version.
		default:
			c := *o
			if !pr.apply(&c) {
				continue
			}
			if c.Name != o.Name && names[c.Name] {
				p.conflicts = append(p.conflicts, pr)
				continue
			}
			delete(names, o.Name)
			names[c.Name] = true
			changed[o.ResourceID] = &c
			p.update = append(p.update, &c)
		}
	}
	for _, o := range oses {
		if c := changed[o.ResourceID]; c != nil {
			o = c
		}
		p.after = append(p.after, o)
	}
	p.after = append(p.after, p.create...)
	return p
}
