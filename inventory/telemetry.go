package inventory

import (
	"context"
	"slices"

	"github.com/eimhq/eim"
)

// TelemetryProfileQuery selects telemetry profiles of one variant.
type TelemetryProfileQuery struct {
	// InstanceID, SiteID and RegionID keep the profiles that target that
	// instance, site or region; given together, a profile targeting any of
	// them matches. None given: every profile of the variant.
	InstanceID, SiteID, RegionID string
	// ShowInherited adds the profiles targeting what lies above in the
	// location tree: for an instance, its host's site and the site's
	// region chain; for a site, its region chain; for a region, its
	// ancestors. These are the profiles that reach the object's nodes.
	ShowInherited bool
	OrderBy       string
	PageSize      int
	Offset        int
}

// ListTelemetryProfiles lists the telemetry profiles of a variant
// (eim.TelemetryLogs or eim.TelemetryMetrics), expanded with their group.
// An instance, site or region named by the query that does not exist is
// ENOTFOUND naming the parameter.
func (s *Service) ListTelemetryProfiles(ctx context.Context, project string, variant eim.TelemetryResourceKind, q TelemetryProfileQuery) (*Page, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if _, ok := eim.VariantNamed(eim.KindTelemetryProfile, string(variant)); !ok {
		return nil, eim.Errorf(eim.EINVALID, "%q is not a telemetry profile variant", variant)
	}
	size, err := checkPage(q.PageSize, q.Offset)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		k         eim.Kind
		field, id string
	}{{eim.KindInstance, "instanceId", q.InstanceID}, {eim.KindSite, "siteId", q.SiteID}, {eim.KindRegion, "regionId", q.RegionID}} {
		if c.id != "" {
			if err := eim.CheckID(c.k, c.field, c.id); err != nil {
				return nil, err
			}
		}
	}
	page := &Page{Items: []eim.Resource{}}
	err = s.store.View(ctx, project, func(tx eim.Tx) error {
		targets, err := profileTargets(ctx, tx, q)
		if err != nil {
			return err
		}
		items, total, err := tx.List(ctx, eim.KindTelemetryProfile, eim.Query{
			Variant: string(variant), Any: targets, OrderBy: q.OrderBy, Limit: size, Offset: q.Offset,
		})
		if err != nil {
			return err
		}
		out, err := newExpander(ctx, tx).expand(eim.KindTelemetryProfile, items)
		if err != nil {
			return err
		}
		page.Items, page.Total, page.HasNext = out, total, q.Offset+len(out) < total
		return nil
	})
	if err != nil {
		return nil, err
	}
	if page.Items == nil {
		page.Items = []eim.Resource{}
	}
	return page, nil
}

// profileTargets returns the conditions a profile must meet one of to
// match the query's targets; nil when it names none.
func profileTargets(ctx context.Context, tx eim.Tx, q TelemetryProfileQuery) ([]eim.Cond, error) {
	if q.InstanceID == "" && q.SiteID == "" && q.RegionID == "" {
		return nil, nil
	}
	var insts, sites, regions []string
	if q.InstanceID != "" {
		r, err := exists(ctx, tx, eim.KindInstance, "instanceId", q.InstanceID)
		if err != nil {
			return nil, err
		}
		insts = append(insts, q.InstanceID)
		if q.ShowInherited {
			h, err := tx.Get(ctx, eim.KindHost, r.(*eim.Instance).HostID)
			if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
				return nil, err
			}
			if h != nil && h.(*eim.Host).SiteID != "" {
				sites = append(sites, h.(*eim.Host).SiteID)
			}
		}
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
	if q.ShowInherited {
		e := newExpander(ctx, tx)
		if err := e.loadSites(sites); err != nil {
			return nil, err
		}
		for _, id := range sites {
			if st := e.sites[id]; st != nil && st.RegionID != "" {
				regions = append(regions, st.RegionID)
			}
		}
		if err := e.loadRegionChains(regions); err != nil {
			return nil, err
		}
		var chain []string
		for _, id := range regions {
			for n := 0; id != "" && n <= eim.MaxRegionDepth; n++ {
				r := e.regions[id]
				if r == nil {
					break
				}
				if !slices.Contains(chain, id) {
					chain = append(chain, id)
				}
				id = r.ParentID
			}
		}
		regions = chain
	}
	var out []eim.Cond
	for _, c := range []struct {
		field string
		ids   []string
	}{{"targetInstance", insts}, {"targetSite", sites}, {"targetRegion", regions}} {
		if len(c.ids) > 0 {
			out = append(out, eim.Cond{Field: c.field, Value: slices.Compact(c.ids)})
		}
	}
	return out, nil
}
