package ui

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// hostState is one of the overview's host states: a name and the AIP-160
// filter over hosts that selects it, so that its count and the host list
// it links to agree by construction.
type hostState struct {
	Key, Label, Filter string
}

// The states the overview counts. A host may be in several (a failed
// update on a running host); "failed" leaves out No Connection, which has
// its own bar.
var hostStates = []hostState{
	{"running", "Running", `hostStatus="Running" AND hostStatusIndicator=STATUS_INDICATION_IDLE`},
	{"provisioning", "Provisioning", `instance.provisioningStatusIndicator=STATUS_INDICATION_IN_PROGRESS`},
	{"onboarding", "Onboarding", `desiredState=HOST_STATE_ONBOARDED AND currentState!=HOST_STATE_ONBOARDED`},
	{"failed", "Failed", `instance.provisioningStatusIndicator=STATUS_INDICATION_ERROR OR instance.updateStatusIndicator=STATUS_INDICATION_ERROR OR onboardingStatusIndicator=STATUS_INDICATION_ERROR OR registrationStatusIndicator=STATUS_INDICATION_ERROR OR (hostStatusIndicator=STATUS_INDICATION_ERROR AND hostStatus!="No Connection")`},
	{"noconnection", "No connection", `hostStatus="No Connection"`},
	{"updating", "Updating", `instance.updateStatusIndicator=STATUS_INDICATION_IN_PROGRESS`},
}

// stateFilter returns the filter of state key ("" when unknown).
func stateFilter(key string) string {
	for _, s := range hostStates {
		if s.Key == key {
			return s.Filter
		}
	}
	return ""
}

type stateCount struct {
	hostState
	Count, Pct int
	Link       string
}

type overviewData struct {
	Total    int
	States   []stateCount
	Failures []*eim.Host
	Updates  *inventory.UpdatesSummary
	// MaintenanceNote says why the maintenance count is partial, if it is.
	MaintenanceNote string
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.overviewData(r, c)
	if err != nil {
		return err
	}
	v := c.view("overview", "Overview", d)
	v.Live = true
	h.render(w, r, http.StatusOK, "overview", v)
	return nil
}

func (h *Handler) overviewData(r *http.Request, c *call) (*overviewData, error) {
	ctx := r.Context()
	proj := c.project.Name
	maint, note, err := h.maintenanceFilter(r, proj)
	if err != nil {
		return nil, err
	}
	states := append(append([]hostState(nil), hostStates...), hostState{"maintenance", "In maintenance", maint})
	d := &overviewData{MaintenanceNote: note}
	counts := map[string]int{}
	if h.fleet.live() {
		// From the summary in memory; only the maintenance windows' hosts
		// are counted by the store (their filter is of the moment).
		d.Total, counts = h.fleet.counts(proj)
		if maint != "" {
			n, err := h.inv.CountHosts(ctx, proj, []string{maint})
			if err != nil {
				return nil, err
			}
			counts["maintenance"] = n[0]
		}
		ids, _ := h.fleet.page(proj, hostView{state: "failed", sort: "lastseen", desc: true}, 0, 10)
		if d.Failures, err = h.hostsByID(r, proj, ids); err != nil {
			return nil, err
		}
	} else {
		filters := []string{""}
		for _, s := range states {
			if s.Filter != "" {
				filters = append(filters, s.Filter)
			}
		}
		n, err := h.inv.CountHosts(ctx, proj, filters)
		if err != nil {
			return nil, err
		}
		d.Total, n = n[0], n[1:]
		for _, s := range states {
			if s.Filter != "" {
				counts[s.Key], n = n[0], n[1:]
			}
		}
		fp, err := h.inv.List(ctx, proj, eim.KindHost, inventory.ListQuery{Filter: stateFilter("failed"), OrderBy: "hostStatusTimestamp desc, resourceId", PageSize: 10})
		if err != nil {
			return nil, err
		}
		for _, it := range fp.Items {
			d.Failures = append(d.Failures, it.(*eim.Host))
		}
	}
	for _, s := range states {
		n := counts[s.Key]
		link := hostsURL(proj, url.Values{"state": {s.Key}})
		d.States = append(d.States, stateCount{hostState: s, Count: n, Pct: pct(n, d.Total), Link: link})
	}
	if h.fleet.live() {
		d.Updates, err = h.updatesFromFleet(r, proj)
	} else {
		d.Updates, err = h.inv.UpdatesSummary(ctx, proj, "")
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// updatesFromFleet is inventory.UpdatesSummary answered from the fleet's
// summary; only the OS resources' names are read from the store.
func (h *Handler) updatesFromFleet(r *http.Request, proj string) (*inventory.UpdatesSummary, error) {
	all, perOS := h.fleet.updateCounts(proj)
	sum := &inventory.UpdatesSummary{UpdateCounts: all, OperatingSystems: []inventory.OSUpdateCounts{}}
	var ids []string
	for id := range perOS {
		if id != "" {
			ids = append(ids, id)
		}
	}
	names := map[string]*eim.OS{}
	for chunk := range slices.Chunk(ids, inventory.MaxPageSize) {
		page, err := h.inv.List(r.Context(), proj, eim.KindOS, inventory.ListQuery{Where: []eim.Cond{{Field: "resourceId", Value: chunk}}, PageSize: len(chunk)})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			names[it.Base().ResourceID] = it.(*eim.OS)
		}
	}
	for id, c := range perOS {
		oc := inventory.OSUpdateCounts{OSResourceID: id, UpdateCounts: *c}
		if o := names[id]; o != nil {
			oc.Name, oc.ProfileName, oc.ImageID = o.Name, o.ProfileName, o.ImageID
		}
		sum.OperatingSystems = append(sum.OperatingSystems, oc)
	}
	slices.SortFunc(sum.OperatingSystems, func(a, b inventory.OSUpdateCounts) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.OSResourceID, b.OSResourceID))
	})
	return sum, nil
}

// hostsByID reads the hosts of ids (at most a page), expanded, in the
// order of ids; a host deleted meanwhile is left out.
func (h *Handler) hostsByID(r *http.Request, proj string, ids []string) ([]*eim.Host, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	page, err := h.inv.List(r.Context(), proj, eim.KindHost, inventory.ListQuery{Where: []eim.Cond{{Field: "resourceId", Value: ids}}, PageSize: len(ids)})
	if err != nil {
		return nil, err
	}
	byID := map[string]*eim.Host{}
	for _, it := range page.Items {
		byID[it.Base().ResourceID] = it.(*eim.Host)
	}
	out := make([]*eim.Host, 0, len(ids))
	for _, id := range ids {
		if x := byID[id]; x != nil {
			out = append(out, x)
		}
	}
	return out, nil
}

// maintenanceFilter is the filter of the hosts under a maintenance window
// open now: those it targets, the hosts of the sites it targets, and of
// the regions (and their sub-regions) it targets. "" when none is open.
func (h *Handler) maintenanceFilter(r *http.Request, project string) (string, string, error) {
	now := h.now().Unix()
	var conds []string
	note := ""
	for offset := 0; ; offset += inventory.MaxPageSize {
		page, err := h.inv.ListSchedules(r.Context(), project, inventory.ScheduleQuery{UnixEpoch: uint64(now), HasEpoch: true, PageSize: inventory.MaxPageSize, Offset: offset})
		if err != nil {
			return "", "", err
		}
		add := func(status eim.ScheduleStatus, host, site, region string) {
			if status != "SCHEDULE_STATUS_MAINTENANCE" {
				return
			}
			switch {
			case host != "":
				conds = append(conds, fmt.Sprintf("resourceId=%q", host))
			case site != "":
				conds = append(conds, fmt.Sprintf("site.resourceId=%q", site))
			case region != "":
				conds = append(conds, regionSubtree(region))
			}
		}
		for _, s := range page.Single {
			add(s.ScheduleStatus, s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
		}
		for _, s := range page.Repeated {
			add(s.ScheduleStatus, s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
		}
		if !page.HasNext || offset+inventory.MaxPageSize > inventory.MaxOffset {
			break
		}
	}
	f := strings.Join(conds, " OR ")
	if len(f) > 1000 {
		// A filter holds 1,000 characters: count the first windows only.
		f = f[:strings.LastIndex(f[:1000], " OR ")]
		note = "many maintenance windows are open: the count covers the first of them"
	}
	return f, note, nil
}

// regionSubtree is the host filter of a region and the regions below it,
// as deep as a filter may follow references.
func regionSubtree(id string) string {
	q := fmt.Sprintf("%q", id)
	return "site.region.resourceId=" + q + " OR site.region.parentRegion.resourceId=" + q +
		" OR site.region.parentRegion.parentRegion.resourceId=" + q +
		" OR site.region.parentRegion.parentRegion.parentRegion.resourceId=" + q
}

// hostsURL is the host list of project with query q.
func hostsURL(project string, q url.Values) string {
	u := "/ui/p/" + url.PathEscape(project) + "/hosts"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}
