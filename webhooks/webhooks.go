// Package webhooks is the webhooks module: it derives a project's events
// (host.onboarded, instance.running, project.deleted …) from the durable
// change feed and delivers them to the project's webhooks, signed, at
// least once and in order per resource, retried with exponential back-off
// for up to a day (see docs/audit.md).
//
// Two run-once loops: Follow turns changes into queued deliveries — it
// follows the change feed to learn which hosts and instances changed, and
// reads their audit records (old → new of every field written, in the
// order of the changes) after the last one it turned into events, so that
// every transition is seen, even one undone a moment later or made while
// no process followed the feed (Store.AuditAfter, Store.QueueEvents);
// Deliver sends what is due, a worker per webhook at a
// time, each attempt bounded by a timeout, so that a receiver that hangs
// or is down delays only its own deliveries — never the API, whose writes
// only append to the feed.
package webhooks

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/seal"
)

// Options configure a Service.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	Now    func() time.Time
	// URLs is what receivers' addresses may be (checked again when a name
	// is resolved, before each connection).
	URLs eim.URLPolicy
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
	// Poll is how often Deliver looks for due deliveries when not woken
	// (default 1 s).
	Poll time.Duration
	// MinBackoff is the pause after a first failed attempt (default 5 s);
	// it doubles with each failure, up to MaxBackoff (default 1 h).
	MinBackoff, MaxBackoff time.Duration
	// MaxAge is how long a delivery is retried (default eim.MaxDeliveryAge).
	MaxAge time.Duration
	// Secrets opens the webhooks' sealed secrets: the key the API sealed
	// them with (the deployment's --secrets-key).
	Secrets *seal.Key
}

// Service is the webhooks module.
type Service struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}
}

// New returns a Service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	if o.MaxAge <= 0 {
		o.MaxAge = eim.MaxDeliveryAge
	}
	return &Service{o: o, log: o.Logger, wake: make(chan struct{}, 1)}
}

// feedConsumer names Follow's position in the change feed.
const feedConsumer = "webhooks"

// transitions returns the event types a change of a resource of kind k
// makes true: a field of a create, or one an update changed, whose new
// value is the event's.
func transitions(k eim.Kind, ch map[string]eim.Change) []string {
	became := func(field, value string) bool {
		c, ok := ch[field]
		if !ok {
			return false
		}
		var n, o string
		_ = json.Unmarshal(c.New, &n)
		_ = json.Unmarshal(c.Old, &o)
		return n == value && o != value
	}
	var out []string
	switch k {
	case eim.KindHost:
		if became("currentState", string(eim.HostStateOnboarded)) {
			out = append(out, eim.EventHostOnboarded)
		}
		if became("hostStatus", "No Connection") {
			out = append(out, eim.EventHostConnectionLost)
		}
		if became("powerStatus", eim.PowerStatusMismatch) {
			out = append(out, eim.EventHostPowerMismatch)
		}
	case eim.KindPowerJob:
		for st, et := range map[eim.PowerJobState]string{eim.PowerJobPending: eim.EventPowerJobCreated, eim.PowerJobSucceeded: eim.EventPowerJobSucceeded,
			eim.PowerJobFailed: eim.EventPowerJobFailed, eim.PowerJobCancelled: eim.EventPowerJobCancelled} {
			if became("state", string(st)) {
				out = append(out, et) // one state a record: one event
			}
		}
	case eim.KindInstance:
		if became("currentState", string(eim.InstanceStateRunning)) {
			out = append(out, eim.EventInstanceRunning)
		}
		if became("provisioningStatusIndicator", string(eim.StatusError)) {
			out = append(out, eim.EventInstanceProvisioningFailed)
		}
		if became("updateStatusIndicator", string(eim.StatusError)) {
			out = append(out, eim.EventInstanceUpdateFailed)
		}
	}
	return out
}

// Payload is the body of a delivery.
type Payload struct {
	ID         string   `json:"id"` // the event's ID: de-duplicate on it
	Type       string   `json:"type"`
	Time       eim.Time `json:"time"`
	Project    string   `json:"project"`
	Kind       eim.Kind `json:"kind"`
	ResourceID string   `json:"resourceId"`
	// Resource is the resource as it was when the event was queued (none
	// for project.deleted, nor when it was deleted by then).
	Resource any `json:"resource,omitempty"`
}

// Follow runs until ctx ends: it follows the change feed (durably, so a
// restart or another process resumes where it stopped) and queues the
// events of the changed resources' audit records; its re-list, at each
// start, reads every host's and instance's records after its cursor,
// making up for what happened while no process followed the feed.
func (s *Service) Follow(ctx context.Context) error {
	r := feed.New(feed.Options{Store: s.o.Store, Name: feedConsumer, Logger: s.log, Durable: true,
		Kinds:  []eim.Kind{eim.KindHost, eim.KindInstance, eim.KindProject, eim.KindPowerJob},
		Handle: s.handle,
		Relist: s.relist,
	})
	return r.Run(ctx)
}

type resKey struct {
	project string
	kind    eim.Kind
}

func (s *Service) handle(ctx context.Context, evs []eim.Event) error {
	// The resources of a batch, per project and kind, in the order of
	// their first event (each is read once, as it is now: level-based).
	groups := map[resKey][]string{}
	var order []resKey
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == eim.KindProject {
			// Whatever the batch held before it, in order.
			if err := s.flush(ctx, groups, order); err != nil {
				return err
			}
			groups, order = map[resKey][]string{}, nil
			clear(seen)
			if ev.Op == eim.OpDeleted {
				if err := s.projectDeleted(ctx, ev.Project); err != nil {
					return err
				}
			}
			continue
		}
		k := resKey{ev.Project, ev.Kind}
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], ev.ID)
	}
	return s.flush(ctx, groups, order)
}

func (s *Service) flush(ctx context.Context, groups map[resKey][]string, order []resKey) error {
	for _, k := range order {
		if err := s.sync(ctx, k.project, k.kind, groups[k]); err != nil {
			return err
		}
	}
	return nil
}

// sync turns the audit records of the resources with ids, after the
// last ones handled, into queued events.
func (s *Service) sync(ctx context.Context, project string, k eim.Kind, ids []string) error {
	// A project without webhooks has nothing to queue: its records are
	// not read and no cursor moves (a webhook created later gets the
	// changes from its creation on: QueueEvents skips older ones).
	if has, err := s.hasWebhooks(ctx, project); err != nil || !has {
		return err
	}
	cursors, err := s.o.Store.AuditCursors(ctx, project, ids)
	if err != nil {
		return err
	}
	after := make(map[string]int64, len(ids))
	for _, id := range ids {
		after[id] = cursors[id]
	}
	recs, err := s.o.Store.AuditAfter(ctx, project, after)
	if err != nil || len(recs) == 0 {
		return err
	}
	byID := map[string][]eim.AuditRecord{}
	var order []string
	for _, r := range recs {
		if _, ok := byID[r.ResourceID]; !ok {
			order = append(order, r.ResourceID)
		}
		byID[r.ResourceID] = append(byID[r.ResourceID], r)
	}
	current, err := s.current(ctx, project, k, order)
	if err != nil {
		return err
	}
	moves := make([]eim.CursorMove, 0, len(order))
	for _, id := range order {
		recs := byID[id]
		m := eim.CursorMove{ResourceID: id, From: after[id], Upto: recs[len(recs)-1].Seq}
		if recs[len(recs)-1].Action == string(eim.OpDeleted) {
			m.Upto = -1
		}
		for _, rec := range recs {
			for _, et := range transitions(k, rec.Changes) {
				p := Payload{ID: eim.NewEventID(), Type: et, Time: rec.Time, Project: project, Kind: k, ResourceID: id}
				if r, ok := current[id]; ok {
					p.Resource = r
				}
				body, err := json.Marshal(p)
				if err != nil {
					return err
				}
				m.Events = append(m.Events, eim.Notification{ID: p.ID, Type: et, Body: body, At: rec.Time})
			}
		}
		moves = append(moves, m)
	}
	n, err := s.o.Store.QueueEvents(ctx, project, moves)
	if err != nil {
		return err
	}
	if n > 0 {
		s.nudge()
	}
	return nil
}

// current returns the resources of kind k with the ids as they are now,
// for the payloads: none of a project that went (its deletion event
// comes), nor of a resource that went. A power job (not a resource of a
// Tx) is its API view.
func (s *Service) current(ctx context.Context, project string, k eim.Kind, ids []string) (map[string]any, error) {
	out := map[string]any{}
	if k == eim.KindPowerJob {
		for _, id := range ids {
			j, err := s.o.Store.GetPowerJob(ctx, project, "", id)
			if eim.ErrorCode(err) == eim.ENOTFOUND {
				continue // gone with its host
			}
			if err != nil {
				return nil, err
			}
			out[id] = j.View()
		}
		return out, nil
	}
	var items []eim.Resource
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		items, err = tx.GetMany(ctx, k, ids)
		return err
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return out, nil // the project went: its deletion event comes
	}
	if err != nil {
		return nil, err
	}
	for _, r := range items {
		out[r.Base().ResourceID] = r
	}
	return out, nil
}

func (s *Service) projectDeleted(ctx context.Context, project string) error {
	id := eim.NewEventID()
	body, err := json.Marshal(Payload{ID: id, Type: eim.EventProjectDeleted, Time: eim.NewTime(s.o.Now()), Project: project, Kind: eim.KindProject, ResourceID: project})
	if err != nil {
		return err
	}
	n, err := s.o.Store.QueueEvents(ctx, project, []eim.CursorMove{{ResourceID: project, From: 0, Upto: 1,
		Events: []eim.Notification{{ID: id, Type: eim.EventProjectDeleted, Body: body}}}})
	if err != nil {
		return err
	}
	if n > 0 {
		s.nudge()
	}
	// The project's webhooks and cursors go now that its last event is
	// queued (the deliveries carry their URL and secret).
	return s.o.Store.DeleteWebhooksOf(ctx, project)
}

// hasWebhooks reports whether the project has a webhook (a deleted
// project has none).
func (s *Service) hasWebhooks(ctx context.Context, project string) (bool, error) {
	hooks, err := s.o.Store.ListWebhooks(ctx, project)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return false, nil
	}
	return len(hooks) > 0, err
}

// relistPage is how many resources a re-list reads at a time.
const relistPage = 500

// relist catches up with every host's and instance's audit records (what
// changed while no process followed the feed).
func (s *Service) relist(ctx context.Context) error {
	projects, err := s.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range projects {
		if has, err := s.hasWebhooks(ctx, p.Name); err != nil {
			return err
		} else if !has {
			continue
		}
		for _, k := range []eim.Kind{eim.KindHost, eim.KindInstance} {
			for off := 0; ; off += relistPage {
				var ids []string
				err := s.o.Store.View(ctx, p.Name, func(tx eim.Tx) error {
					items, _, err := tx.List(ctx, k, eim.Query{Limit: relistPage, Offset: off, NoTotal: true})
					for _, r := range items {
						ids = append(ids, r.Base().ResourceID)
					}
					return err
				})
				if eim.ErrorCode(err) == eim.ENOTFOUND {
					break
				}
				if err != nil {
					return err
				}
				if err := s.sync(ctx, p.Name, k, ids); err != nil {
					return err
				}
				if len(ids) < relistPage {
					break
				}
			}
		}
		if err := s.relistJobs(ctx, p.Name); err != nil {
			return err
		}
	}
	return nil
}

// relistJobs catches up with the power jobs of the project's latest
// relistJobRecords job records (jobs are not listed as resources are:
// their records name them).
func (s *Service) relistJobs(ctx context.Context, project string) error {
	recs, _, err := s.o.Store.Audit(ctx, project, eim.AuditQuery{Filter: `kind="` + string(eim.KindPowerJob) + `"`, Limit: relistJobRecords, NoTotal: true})
	if eim.ErrorCode(err) == eim.ENOTFOUND || len(recs) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	var ids []string
	seen := map[string]bool{}
	for i := len(recs) - 1; i >= 0; i-- { // oldest first
		if id := recs[i].ResourceID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), relistPage)
		if err := s.sync(ctx, project, eim.KindPowerJob, ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// relistJobRecords bounds the power job records a re-list reads per
// project.
const relistJobRecords = 2000

func (s *Service) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
