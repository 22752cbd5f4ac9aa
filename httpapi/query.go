package httpapi

import (
	"net/url"
	"strconv"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

const (
	defaultPageSize = 20 // the original documented 20 but applied "all"
	maxPageSize     = 100
	maxOffset       = 10000
)

// paging reads pageSize and offset.
func paging(q url.Values) (pageSize, offset int, err error) {
	pageSize, err = intParam(q, "pageSize", defaultPageSize, 1, maxPageSize)
	if err != nil {
		return 0, 0, err
	}
	offset, err = intParam(q, "offset", 0, 0, maxOffset)
	return pageSize, offset, err
}

func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, eim.Errorf(eim.EINVALID, "%s: %q is not an integer", name, s)
	}
	if n < lo || n > hi {
		return 0, eim.Errorf(eim.EINVALID, "%s: %d is out of range [%d, %d]", name, n, lo, hi)
	}
	return n, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, eim.Errorf(eim.EINVALID, "%s: %q is not true or false", name, s)
	}
	return b, nil
}

// listQuery reads the query of a list operation.
func listQuery(q url.Values) (inventory.ListQuery, error) {
	size, off, err := paging(q)
	if err != nil {
		return inventory.ListQuery{}, err
	}
	lq := inventory.ListQuery{Filter: q.Get("filter"), OrderBy: q.Get("orderBy"), PageSize: size, Offset: off}
	if lq.ShowTotalSites, err = boolParam(q, "showTotalSites"); err != nil {
		return inventory.ListQuery{}, err
	}
	return lq, nil
}

// scheduleQuery reads the query of the schedule lists.
func scheduleQuery(q url.Values) (inventory.ScheduleQuery, error) {
	var sq inventory.ScheduleQuery
	var err error
	if sq.PageSize, sq.Offset, err = paging(q); err != nil {
		return sq, err
	}
	targets := []struct {
		name string
		kind eim.Kind
		dst  *string
	}{{"hostId", eim.KindHost, &sq.HostID}, {"siteId", eim.KindSite, &sq.SiteID}, {"regionId", eim.KindRegion, &sq.RegionID}}
	for _, t := range targets {
		v := q.Get(t.name)
		// "null" asks for schedules without that target, as in the original.
		if v != "" && v != inventory.NullTarget {
			if err := eim.CheckID(t.kind, t.name, v); err != nil {
				return sq, err
			}
		}
		*t.dst = v
	}
	if s := q.Get("unixEpoch"); s != "" {
		if sq.UnixEpoch, err = strconv.ParseUint(s, 10, 64); err != nil {
			return sq, eim.Errorf(eim.EINVALID, "unixEpoch: %q is not a non-negative integer", s)
		}
		sq.HasEpoch = true
	}
	return sq, nil
}
