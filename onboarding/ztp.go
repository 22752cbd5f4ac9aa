package onboarding

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/inventory"
)

// ztpWorkers bound how many hosts the reconciler handles at once; their
// writes share batches.
const ztpWorkers = 16

// hostKey names a host.
type hostKey struct{ project, id string }

// Run is the reconciler of hosts: an invalidated host (desired UNTRUSTED)
// loses its node credentials and turns current UNTRUSTED, "Invalidated";
// and, zero-touch provisioning (nZTP), a host onboarded
// (desired and current ONBOARDED) without an instance, in a project whose
// settings name a default OS, gets an instance with that OS, local account
// and custom configurations. It is level-based: a changed host is checked
// (in a project without zero-touch, only invalidations can need work, and
// one query finds them rather than a read of each changed host), and
// everything is re-listed every Resync. It returns when ctx ends.
func (s *Service) Run(ctx context.Context) error {
	q := newQueue()
	var wg sync.WaitGroup
	for range ztpWorkers {
		wg.Go(func() {
			for {
				k, ok := q.get()
				if !ok {
					return
				}
				if err := s.reconcileHost(ctx, k); err != nil && ctx.Err() == nil {
					s.log.Warn("zero-touch provisioning", "project", k.project, "host", k.id, "err", err)
				}
				q.done(k)
			}
		})
	}
	wg.Go(func() { s.scanInvalidations(ctx) })
	defer func() {
		q.close()
		wg.Wait()
	}()
	r := feed.New(feed.Options{Store: s.store, Name: feedConsumer, Logger: s.log, Metrics: s.metrics, Kinds: []eim.Kind{eim.KindHost}, Durable: true,
		Handle: func(_ context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				// A new host is neither onboarded nor invalidated: only
				// a change can make it need either.
				if ev.Op == eim.OpUpdated {
					q.add(hostKey{ev.Project, ev.ID})
				}
			}
			return nil
		},
		Relist:      func(ctx context.Context) error { return s.resyncAll(ctx, q) },
		RelistEvery: s.resync,
	})
	return r.Run(ctx)
}

// feedConsumer names the reconciler's position in the change feed (see
// feed.Options.Durable).
const feedConsumer = "onboarding"

// finishInvalidations finishes the invalidations not finished yet, found
// by one query over every project (few hosts: an invalidation is finished
// moments after it is asked for).
func (s *Service) finishInvalidations(ctx context.Context) error {
	var untrusted []hostKey
	err := s.store.View(ctx, "", func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "desiredState", Value: string(eim.HostStateUntrusted)}}})
		for _, r := range items {
			if inventory.InvalidationPending(r.(*eim.Host)) {
				untrusted = append(untrusted, hostKey{r.Base().Project, r.Base().ResourceID})
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, k := range untrusted {
		if err := s.finishInvalidation(ctx, k); err != nil && ctx.Err() == nil {
			s.log.Warn("invalidation", "project", k.project, "host", k.id, "err", err)
		}
	}
	return nil
}

// resyncAll queues every host whose invalidation is not finished, and every
// onboarded host without an instance in the projects with a default OS.
func (s *Service) resyncAll(ctx context.Context, q *queue) error {
	if err := s.finishInvalidations(ctx); err != nil {
		return err
	}
	projects, err := s.store.ListProjects(ctx)
	if err != nil {
		return err
	}
	const page = 1000
	for _, p := range projects {
		if p.Settings.DefaultOSID == "" {
			continue
		}
		for offset := 0; ; offset += page {
			var todo []hostKey
			n := 0
			err := s.store.View(ctx, p.Name, func(tx eim.Tx) error {
				items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{
					{Field: "desiredState", Value: string(eim.HostStateOnboarded)},
					{Field: "currentState", Value: string(eim.HostStateOnboarded)},
				}, Limit: page, Offset: offset})
				if err != nil {
					return err
				}
				n = len(items)
				ids := make([]string, len(items))
				for i, r := range items {
					ids[i] = r.Base().ResourceID
				}
				if len(ids) == 0 {
					return nil
				}
				insts, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: ids}}})
				if err != nil {
					return err
				}
				has := map[string]bool{}
				for _, r := range insts {
					has[r.(*eim.Instance).HostID] = true
				}
				for _, id := range ids {
					if !has[id] {
						todo = append(todo, hostKey{p.Name, id})
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("project %s: %w", p.Name, err)
			}
			for _, k := range todo {
				q.add(k)
			}
			if n < page {
				break
			}
		}
	}
	return nil
}

// reconcileHost finishes the host's invalidation, or gives the host its
// instance if it should have one.
func (s *Service) reconcileHost(ctx context.Context, k hostKey) error {
	p, err := s.store.FindProject(ctx, k.project)
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil
		}
		return err
	}
	set := p.Settings
	if set.DefaultOSID == "" {
		// Only an invalidation can need finishing here. Rather than read
		// every changed host (a fleet's status changes, a bulk import),
		// one query over all projects finds the few that do, at most once
		// per scanPause whatever the rate of events.
		s.invalidations.poke()
		return nil
	}
	// Read-only first: most events need nothing, and a refusal must not
	// make a batch re-run.
	var need, invalidate bool
	err = s.store.View(ctx, k.project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, k.id)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil
		}
		if err != nil {
			return err
		}
		if invalidate = inventory.InvalidationPending(r.(*eim.Host)); invalidate || set.DefaultOSID == "" {
			return nil
		}
		need, err = needsInstance(ctx, tx, k, set)
		return err
	})
	if err != nil {
		return err
	}
	if invalidate {
		return s.finishInvalidation(ctx, k)
	}
	if !need {
		return nil
	}
	// A device enrolled with its OS installed (eim-agent enroll) runs
	// that OS: it gets no instance to provision.
	switch req, err := s.store.FindEnrollmentRequestOfHost(ctx, k.project, k.id); {
	case err == nil && req.Installed:
		return nil
	case err != nil && eim.ErrorCode(err) != eim.ENOTFOUND:
		return err
	}
	var created *eim.Instance
	err = s.batch.Do(ctx, func(tx eim.Tx) error {
		created = nil
		need, err := needsInstance(ctx, tx, k, set)
		if err != nil || !need {
			return err
		}
		r, err := tx.Get(ctx, eim.KindHost, k.id)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		in := &eim.Instance{
			Meta:            eim.Meta{Project: k.project},
			Kind:            eim.InstanceKindMetal,
			Name:            h.Name,
			HostID:          h.ResourceID,
			OSID:            set.DefaultOSID,
			LocalAccountID:  set.DefaultLocalAccountID,
			CustomConfigIDs: set.DefaultCustomConfigIDs,
		}
		if in.Name == "" || !eim.ValidName(in.Name) {
			in.Name = h.ResourceID
		}
		if set.OSSecurityFeatureEnable {
			// The OS's security feature (secure boot and full-disk
			// encryption where the profile has it), as the original did.
			r, err := tx.Get(ctx, eim.KindOS, set.DefaultOSID)
			if err != nil {
				return err
			}
			in.SecurityFeature = r.(*eim.OS).SecurityFeature
		}
		created, err = inventory.CreateInstance(ctx, tx, in)
		return err
	})
	if err == nil && created != nil {
		s.log.Info("zero-touch provisioning: instance created", "project", k.project, "host", k.id, "instance", created.ResourceID, "os", set.DefaultOSID)
	}
	return err
}

// finishInvalidation revokes an invalidated host's node credentials and
// shows it UNTRUSTED and "Invalidated", as the original's onboarding
// manager did.
func (s *Service) finishInvalidation(ctx context.Context, k hostKey) error {
	var done bool
	err := s.batch.DoIn(ctx, k.project, func(tx eim.Tx) error {
		var err error
		done, err = inventory.FinishInvalidation(ctx, tx, k.id, s.now())
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil
		}
		return err
	})
	if err == nil && done {
		s.log.Info("host invalidated: node credentials revoked", "project", k.project, "host", k.id)
	}
	return err
}

// needsInstance reports whether the host is onboarded, has no instance,
// and the settings' references exist in its project (an error names the
// missing one). tx may be unscoped.
func needsInstance(ctx context.Context, tx eim.Tx, k hostKey, set eim.ProjectSettings) (bool, error) {
	r, err := tx.Get(ctx, eim.KindHost, k.id)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h := r.(*eim.Host)
	if h.Project != k.project || h.DesiredState != eim.HostStateOnboarded || h.CurrentState != eim.HostStateOnboarded {
		return false, nil
	}
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: k.id}}, Limit: 1, NoTotal: true})
	if err != nil || len(items) > 0 {
		return false, err
	}
	refs := []struct {
		kind eim.Kind
		id   string
	}{{eim.KindOS, set.DefaultOSID}}
	if set.DefaultLocalAccountID != "" {
		refs = append(refs, struct {
			kind eim.Kind
			id   string
		}{eim.KindLocalAccount, set.DefaultLocalAccountID})
	}
	for _, id := range set.DefaultCustomConfigIDs {
		refs = append(refs, struct {
			kind eim.Kind
			id   string
		}{eim.KindCustomConfig, id})
	}
	for _, ref := range refs {
		r, err := tx.Get(ctx, ref.kind, ref.id)
		if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && r.Base().Project != k.project) {
			return false, eim.Errorf(eim.EPRECONDITION, "project %s: default %s %s does not exist", k.project, ref.kind, ref.id)
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// queue is a set of hosts to reconcile: a host queued again while waiting
// is handled once, and one being handled is queued again after it.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	order   []hostKey
	waiting map[hostKey]bool
	busy    map[hostKey]bool
	again   map[hostKey]bool
	closed  bool
}

func newQueue() *queue {
	q := &queue{waiting: map[hostKey]bool{}, busy: map[hostKey]bool{}, again: map[hostKey]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) add(k hostKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed || q.waiting[k]:
	case q.busy[k]:
		q.again[k] = true
	default:
		q.waiting[k] = true
		q.order = append(q.order, k)
		q.cond.Signal()
	}
}

// get blocks for the next host; false once closed.
func (q *queue) get() (hostKey, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return hostKey{}, false
	}
	k := q.order[0]
	q.order = q.order[1:]
	delete(q.waiting, k)
	q.busy[k] = true
	return k, true
}

func (q *queue) done(k hostKey) {
	q.mu.Lock()
	delete(q.busy, k)
	again := q.again[k]
	delete(q.again, k)
	q.mu.Unlock()
	if again {
		q.add(k)
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// invalidationScan is the most often the hosts whose invalidation is not
// finished are looked for after host changes, and scanShare the most of its
// time the looking may take: on SQLite the query walks an index of every
// host (its statistics say the desired state picks out little, because
// nearly every host is onboarded), about 20 ms at 100,000 hosts, and while
// the whole fleet changes (a heartbeat storm that writes every host) a scan
// every 200 ms took a tenth of a core. Slower scans are spaced out.
const (
	invalidationScan = 200 * time.Millisecond
	scanShare        = 0.02
)

// scanPause is the pause after a scan that took took.
func scanPause(took time.Duration) time.Duration {
	return max(invalidationScan, time.Duration(float64(took)/scanShare))
}

// scanInvalidations finishes the invalidations not finished each time it is
// poked (a host changed in a project without zero-touch), at most once per
// scanPause, until ctx ends.
func (s *Service) scanInvalidations(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.invalidations.c:
		}
		start := time.Now()
		if err := s.finishInvalidations(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("invalidations: look for hosts to finish", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(scanPause(time.Since(start))):
		}
	}
}

// poker coalesces pokes: any number of them before the next wait is one.
type poker struct{ c chan struct{} }

func newPoker() poker { return poker{c: make(chan struct{}, 1)} }

func (p poker) poke() {
	select {
	case p.c <- struct{}{}:
	default:
	}
}
