package inventory

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/window"
)

// ScheduleQuery selects maintenance schedules.
type ScheduleQuery struct {
	// HostID, SiteID, RegionID select the schedules that apply to that
	// place: those targeting it and those targeting a place above it in the
	// location tree (a host's site and the site's region chain; a site's
	// region chain; a region's ancestors). Given together, a schedule
	// applying to any of them matches. The value "null" instead keeps the
	// schedules without that kind of target, as in the original API.
	HostID, SiteID, RegionID string
	// UnixEpoch (when HasEpoch) keeps the schedules whose window is open at
	// that instant (seconds since 1970, UTC).
	UnixEpoch        uint64
	HasEpoch         bool
	PageSize, Offset int
}

// Schedules is a page of schedules of both kinds: the single schedules
// first, then the repeated ones, both ordered by resource ID.
type Schedules struct {
	Single   []*eim.SingleSchedule
	Repeated []*eim.RepeatedSchedule
	Total    int
	HasNext  bool
}

// ListSchedules lists single and repeated schedules as one sequence.
func (s *Service) ListSchedules(ctx context.Context, project string, q ScheduleQuery) (*Schedules, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	size, err := checkScheduleQuery(&q)
	if err != nil {
		return nil, err
	}
	out := &Schedules{Single: []*eim.SingleSchedule{}, Repeated: []*eim.RepeatedSchedule{}}
	err = s.store.View(ctx, project, func(tx eim.Tx) error {
		targets, err := scheduleTargetSet(ctx, tx, q)
		if err != nil {
			return err
		}
		singles, err := matchingSchedules(ctx, tx, eim.KindSingleSchedule, targets, q)
		if err != nil {
			return err
		}
		repeated, err := matchingSchedules(ctx, tx, eim.KindRepeatedSchedule, targets, q)
		if err != nil {
			return err
		}
		all := append(singles, repeated...)
		out.Total = len(all)
		lo, hi := min(q.Offset, len(all)), min(q.Offset+size, len(all))
		page, err := newExpander(ctx, tx).expandMixed(all[lo:hi])
		if err != nil {
			return err
		}
		for _, r := range page {
			switch r := r.(type) {
			case *eim.SingleSchedule:
				out.Single = append(out.Single, r)
			case *eim.RepeatedSchedule:
				out.Repeated = append(out.Repeated, r)
			}
		}
		out.HasNext = hi < len(all)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListSchedulesOf lists the schedules of one kind.
func (s *Service) ListSchedulesOf(ctx context.Context, project string, k eim.Kind, q ScheduleQuery) (*Page, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if k != eim.KindSingleSchedule && k != eim.KindRepeatedSchedule {
		return nil, eim.Errorf(eim.EINVALID, "%s is not a schedule kind", k)
	}
	size, err := checkScheduleQuery(&q)
	if err != nil {
		return nil, err
	}
	page := &Page{Items: []eim.Resource{}}
	err = s.store.View(ctx, project, func(tx eim.Tx) error {
		targets, err := scheduleTargetSet(ctx, tx, q)
		if err != nil {
			return err
		}
		var items []eim.Resource
		if targets == nil && !q.HasEpoch {
			// Nothing to match in Go: let the store page.
			items, page.Total, err = tx.List(ctx, k, eim.Query{Where: nullTargets(q), Limit: size, Offset: q.Offset})
			if err != nil {
				return err
			}
		} else {
			all, err := matchingSchedules(ctx, tx, k, targets, q)
			if err != nil {
				return err
			}
			page.Total = len(all)
			items = all[min(q.Offset, len(all)):min(q.Offset+size, len(all))]
		}
		page.Items, err = newExpander(ctx, tx).expand(k, items)
		page.HasNext = q.Offset+len(items) < page.Total
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

func checkScheduleQuery(q *ScheduleQuery) (int, error) {
	size, err := checkPage(q.PageSize, q.Offset)
	if err != nil {
		return 0, err
	}
	for _, c := range []struct {
		k     eim.Kind
		field string
		id    string
	}{{eim.KindHost, "hostId", q.HostID}, {eim.KindSite, "siteId", q.SiteID}, {eim.KindRegion, "regionId", q.RegionID}} {
		if c.id != "" && c.id != NullTarget {
			if err := eim.CheckID(c.k, c.field, c.id); err != nil {
				return 0, err
			}
		}
	}
	return size, nil
}

// NullTarget as a ScheduleQuery target asks for schedules without that
// kind of target.
const NullTarget = "null"

// nullTargets are the conditions for the targets the query asks to be empty.
func nullTargets(q ScheduleQuery) []eim.Cond {
	var out []eim.Cond
	for _, c := range []struct{ v, field string }{{q.HostID, "targetHostId"}, {q.SiteID, "targetSiteId"}, {q.RegionID, "targetRegionId"}} {
		if c.v == NullTarget {
			out = append(out, eim.Cond{Field: c.field, Value: nil})
		}
	}
	return out
}

// targetSet is, per target field, the IDs a matching schedule may target.
// nil means no target filter.
type targetSet map[string][]string

// scheduleTargetSet resolves the places a query asks about to the targets
// whose schedules apply there, walking up the location tree.
func scheduleTargetSet(ctx context.Context, tx eim.Tx, q ScheduleQuery) (targetSet, error) {
	for _, p := range []*string{&q.HostID, &q.SiteID, &q.RegionID} {
		if *p == NullTarget {
			*p = ""
		}
	}
	if q.HostID == "" && q.SiteID == "" && q.RegionID == "" {
		return nil, nil
	}
	ts := targetSet{}
	e := newExpander(ctx, tx)
	var sites, regions []string
	if q.HostID != "" {
		h, err := exists(ctx, tx, eim.KindHost, "hostId", q.HostID)
		if err != nil {
			return nil, err
		}
		ts["targetHostId"] = append(ts["targetHostId"], q.HostID)
		sites = append(sites, h.(*eim.Host).SiteID)
	}
	if q.SiteID != "" {
		if _, err := exists(ctx, tx, eim.KindSite, "siteId", q.SiteID); err != nil {
			return nil, err
		}
		sites = append(sites, q.SiteID)
	}
	if q.RegionID != "" {
		if _, err := exists(ctx, tx, eim.KindRegion, "regionId", q.RegionID); err != nil {
			return nil, err
		}
		regions = append(regions, q.RegionID)
	}
	if err := e.loadSites(sites); err != nil {
		return nil, err
	}
	for _, id := range sites {
		if st := e.sites[id]; st != nil {
			ts["targetSiteId"] = append(ts["targetSiteId"], id)
			regions = append(regions, st.RegionID)
		}
	}
	if err := e.loadRegionChains(regions); err != nil {
		return nil, err
	}
	for _, id := range regions {
		for n := 0; id != "" && n <= eim.MaxRegionDepth; n++ {
			r := e.regions[id]
			if r == nil {
				break
			}
			if !slices.Contains(ts["targetRegionId"], id) {
				ts["targetRegionId"] = append(ts["targetRegionId"], id)
			}
			id = r.ParentID
		}
	}
	return ts, nil
}

// matchingSchedules returns every schedule of kind k that targets one of
// targets (all when nil) and, if asked, is open at q.UnixEpoch, ordered by
// ID. Schedules are few per project; matching the time in Go lets repeated
// schedules be matched exactly against their cron fields.
func matchingSchedules(ctx context.Context, tx eim.Tx, k eim.Kind, targets targetSet, q ScheduleQuery) ([]eim.Resource, error) {
	var all []eim.Resource
	nulls := nullTargets(q)
	if targets == nil {
		items, _, err := tx.List(ctx, k, eim.Query{Where: nulls})
		if err != nil {
			return nil, err
		}
		all = items
	} else {
		seen := map[string]bool{}
		for _, field := range []string{"targetHostId", "targetSiteId", "targetRegionId"} {
			if len(targets[field]) == 0 {
				continue
			}
			where := append([]eim.Cond{{Field: field, Value: targets[field]}}, nulls...)
			items, _, err := tx.List(ctx, k, eim.Query{Where: where})
			if err != nil {
				return nil, err
			}
			for _, r := range items {
				if id := r.Base().ResourceID; !seen[id] {
					seen[id] = true
					all = append(all, r)
				}
			}
		}
	}
	if q.HasEpoch {
		t := q.UnixEpoch
		all = slices.DeleteFunc(all, func(r eim.Resource) bool { return !openAt(r, t) })
	}
	slices.SortFunc(all, func(a, b eim.Resource) int { return strings.Compare(a.Base().ResourceID, b.Base().ResourceID) })
	return all, nil
}

// openAt reports whether a schedule's window contains the instant t.
func openAt(r eim.Resource, t uint64) bool {
	if t > math.MaxInt64 {
		return false
	}
	switch s := r.(type) {
	case *eim.SingleSchedule:
		open, _ := window.Single{Start: int64(s.StartSeconds), End: int64(s.EndSeconds)}.OpenAt(int64(t))
		return open
	case *eim.RepeatedSchedule:
		open, _ := RepeatedWindow(s).OpenAt(int64(t))
		return open
	}
	return false
}

// RepeatedWindow returns the window of a repeated schedule.
func RepeatedWindow(s *eim.RepeatedSchedule) window.Repeated {
	return window.Repeated{Duration: s.DurationSeconds, Minutes: s.CronMinutes, Hours: s.CronHours,
		DayOfMonth: s.CronDayMonth, Month: s.CronMonth, DayOfWeek: s.CronDayWeek}
}

// expandMixed expands schedules of both kinds, each kind in one batch.
func (e *expander) expandMixed(items []eim.Resource) ([]eim.Resource, error) {
	if err := e.loadScheduleTargets(items); err != nil {
		return nil, err
	}
	out := make([]eim.Resource, len(items))
	for i, r := range items {
		out[i] = e.schedule(r)
	}
	return out, nil
}
