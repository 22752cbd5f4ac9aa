package httpapi

import (
	"net/http"
	"net/url"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// telemetryRoutes registers the telemetry groups and profiles, with the
// original's paths and aliases. Each route serves one variant of its kind
// (logs or metrics); a resource of the other is not found there. Groups
// have no PUT or PATCH, as in the original.
func (h *handler) telemetryRoutes() {
	for _, c := range []struct {
		v     eim.Variant
		bases []string
		ops   crudOps
	}{
		{eim.TelemetryLogsGroup, []string{"/telemetry/groups/logs", "/telemetry/loggroups"}, crudOps{}},
		{eim.TelemetryMetricsGroup, []string{"/telemetry/groups/metrics", "/telemetry/metricgroups"}, crudOps{}},
		{eim.TelemetryLogsProfile, []string{"/telemetry/profiles/logs"}, crudOps{update: true}},
		{eim.TelemetryMetricsProfile, []string{"/telemetry/profiles/metrics"}, crudOps{update: true}},
	} {
		for _, base := range c.bases {
			h.crudOf(variantType(c.v), base, c.ops)
		}
	}
}

// listTelemetryProfiles serves the profile lists: paged and ordered, and
// selected by instanceId, siteId and regionId, with showInherited.
func (h *handler) listTelemetryProfiles(t apiType) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		q, err := telemetryProfileQuery(r.URL.Query())
		if err != nil {
			return err
		}
		page, err := h.inv.ListTelemetryProfiles(r.Context(), c.project, eim.TelemetryResourceKind(t.variant), q)
		if err != nil {
			return err
		}
		h.writeList(w, t.plural, page.Items, page.Total, page.HasNext)
		return nil
	})
}

// telemetryProfileQuery reads the query of a profile list. As in the
// original, showInherited without a target is ignored.
func telemetryProfileQuery(q url.Values) (inventory.TelemetryProfileQuery, error) {
	var tq inventory.TelemetryProfileQuery
	var err error
	if tq.PageSize, tq.Offset, err = paging(q); err != nil {
		return tq, err
	}
	tq.OrderBy = q.Get("orderBy")
	for _, p := range []struct {
		name string
		kind eim.Kind
		dst  *string
	}{{"instanceId", eim.KindInstance, &tq.InstanceID}, {"siteId", eim.KindSite, &tq.SiteID}, {"regionId", eim.KindRegion, &tq.RegionID}} {
		if v := q.Get(p.name); v != "" {
			if err := eim.CheckID(p.kind, p.name, v); err != nil {
				return tq, err
			}
			*p.dst = v
		}
	}
	if tq.ShowInherited, err = boolParam(q, "showInherited"); err != nil {
		return tq, err
	}
	return tq, nil
}
