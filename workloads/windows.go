package workloads

import (
	"context"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/window"
)

// Maintenance windows for rollouts that honour them: a device's update
// starts only while one of the maintenance schedules that apply to it
// (the maintenance module's: those targeting its host, its site, or its
// site's region and that region's parents) is open. Read once per step of
// the targets loop, only for projects with such a rollout.

// loadWindows reads a project's schedules and regions.
func (s *Service) loadWindows(ctx context.Context, project string) (*windows, error) {
	w := &windows{byTarget: map[string][]schedule{}, parent: map[string]string{}}
	add := func(host, site, region string, sc schedule) {
		for _, id := range []string{host, site, region} {
			if id != "" {
				w.byTarget[id] = append(w.byTarget[id], sc)
			}
		}
	}
	err := s.eachResource(ctx, project, eim.KindSingleSchedule, func(r eim.Resource) {
		if x, ok := r.(*eim.SingleSchedule); ok {
			add(x.TargetHostID, x.TargetSiteID, x.TargetRegionID, window.Single{Start: int64(x.StartSeconds), End: int64(x.EndSeconds)})
		}
	})
	if err != nil {
		return nil, err
	}
	err = s.eachResource(ctx, project, eim.KindRepeatedSchedule, func(r eim.Resource) {
		if x, ok := r.(*eim.RepeatedSchedule); ok {
			add(x.TargetHostID, x.TargetSiteID, x.TargetRegionID, inventory.RepeatedWindow(x))
		}
	})
	if err != nil {
		return nil, err
	}
	err = s.eachResource(ctx, project, eim.KindRegion, func(r eim.Resource) {
		if x, ok := r.(*eim.Region); ok && x.ParentID != "" {
			w.parent[x.ResourceID] = x.ParentID
		}
	})
	return w, err
}

// nextOpening is when s next opens after t (unix s; 0: never).
func nextOpening(s schedule, t int64) int64 {
	switch x := s.(type) {
	case window.Single:
		if x.Start > t {
			return x.Start
		}
	case window.Repeated:
		if n, ok := x.Next(t); ok {
			return n
		}
	}
	return 0
}

// eachResource calls fn with every resource of a kind of the project, in
// ID order (inventory.Each).
func (s *Service) eachResource(ctx context.Context, project string, k eim.Kind, fn func(eim.Resource)) error {
	return s.o.Inventory.Each(ctx, project, k, func(r eim.Resource) error {
		fn(r)
		return nil
	})
}
