// Package webhooks is the webhooks module: it derives a project's events
// (host.onboarded, instance.running, project.deleted …) from the durable
// change feed and delivers them to the project's webhooks, signed, at
// least once and in order per resource, retried with exponential back-off
// for up to a day (see docs/audit.md).
//
// Two run-once loops: Follow turns changes into queued deliveries (in the
// store, each event queued once per time its condition becomes true:
// Store.MarkEvents); Deliver sends what is due, a worker per webhook at a
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

// kindTypes are the event types each kind's changes decide on.
var kindTypes = map[eim.Kind][]string{
	eim.KindHost:     {eim.EventHostOnboarded, eim.EventHostConnectionLost},
	eim.KindInstance: {eim.EventInstanceRunning, eim.EventInstanceProvisioningFailed, eim.EventInstanceUpdateFailed},
}

// holding returns the event types of r's kind that hold for r now.
func holding(r eim.Resource) []string {
	var out []string
	switch r := r.(type) {
	case *eim.Host:
		if r.CurrentState == eim.HostStateOnboarded {
			out = append(out, eim.EventHostOnboarded)
		}
		if r.HostStatus == "No Connection" {
			out = append(out, eim.EventHostConnectionLost)
		}
	case *eim.Instance:
		if r.CurrentState == eim.InstanceStateRunning {
			out = append(out, eim.EventInstanceRunning)
		}
		if r.ProvisioningStatusIndicator == eim.StatusError {
			out = append(out, eim.EventInstanceProvisioningFailed)
		}
		if r.UpdateStatusIndicator == eim.StatusError {
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
	// for project.deleted).
	Resource any `json:"resource,omitempty"`
}

// Follow runs until ctx ends: it follows the change feed (durably, so a
// restart or another process resumes where it stopped) and queues the
// events of the changes; its re-list, at each start, makes up for what
// happened while no process followed it.
func (s *Service) Follow(ctx context.Context) error {
	r := feed.New(feed.Options{Store: s.o.Store, Name: feedConsumer, Logger: s.log, Durable: true,
		Kinds:  []eim.Kind{eim.KindHost, eim.KindInstance, eim.KindProject},
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

// sync brings the marks of the resources with ids in line with their
// state, queuing the events that became true.
func (s *Service) sync(ctx context.Context, project string, k eim.Kind, ids []string) error {
	var items []eim.Resource
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		items, err = tx.GetMany(ctx, k, ids)
		return err
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		items, err = nil, nil // the project went: its deletion event comes
	}
	if err != nil {
		return err
	}
	byID := map[string]eim.Resource{}
	for _, r := range items {
		byID[r.Base().ResourceID] = r
	}
	marks, err := s.o.Store.EventMarks(ctx, project, ids)
	if err != nil {
		return err
	}
	fired := false
	for _, id := range ids {
		r := byID[id] // nil: deleted; its marks go
		var hold []string
		if r != nil {
			hold = holding(r)
		}
		if sameSet(hold, marks[id]) {
			continue
		}
		types, err := s.o.Store.MarkEvents(ctx, project, id, kindTypes[k], hold, func(et, eventID string) ([]byte, error) {
			return json.Marshal(Payload{ID: eventID, Type: et, Time: eim.NewTime(s.o.Now()), Project: project, Kind: k, ResourceID: id, Resource: r})
		})
		if err != nil {
			return err
		}
		fired = fired || len(types) > 0
	}
	if fired {
		s.nudge()
	}
	return nil
}

func (s *Service) projectDeleted(ctx context.Context, project string) error {
	types, err := s.o.Store.MarkEvents(ctx, project, project, []string{eim.EventProjectDeleted}, []string{eim.EventProjectDeleted}, func(et, eventID string) ([]byte, error) {
		return json.Marshal(Payload{ID: eventID, Type: et, Time: eim.NewTime(s.o.Now()), Project: project, Kind: eim.KindProject, ResourceID: project})
	})
	if err != nil {
		return err
	}
	if len(types) > 0 {
		s.nudge()
	}
	// The project's webhooks and marks go now that its last event is
	// queued (the deliveries carry their URL and secret).
	return s.o.Store.DeleteWebhooksOf(ctx, project)
}

// relistPage is how many resources a re-list reads at a time.
const relistPage = 500

// relist brings every host's and instance's marks in line with its state.
func (s *Service) relist(ctx context.Context) error {
	projects, err := s.o.Store.ListProjects(ctx)
	if err != nil {
		return err
	}
	for _, p := range projects {
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
	}
	return nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}

func (s *Service) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
