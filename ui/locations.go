package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// locNode is a region or a site of the tree, with its host counts (a
// region's are those of the sites below it).
type locNode struct {
	ID, Name, Kind string
	Hosts, Running int
	Failed, NoConn int
	HostsLink      string
	Metadata       eim.Metadata
	Children       []*locNode
	Depth          int
}

type locationsData struct {
	Roots       []*locNode
	Flat        []*locNode // the tree in order, for the page
	Regions     []*eim.Region
	Sites       []*eim.Site
	Unallocated int
	Truncated   bool
	Msg, Error  string
	Warn        string // a region that shares its name with another
	Form        url.Values
}

// maxLocations bounds the regions and the sites the tree shows (and
// counts hosts of).
const maxLocations = 1000

func (h *Handler) locations(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.locationsData(r, c)
	if err != nil {
		return err
	}
	if id := r.URL.Query().Get("created"); id != "" {
		d.Msg = "Created " + id + "."
	}
	if id := r.URL.Query().Get("changed"); id != "" {
		d.Msg = "Changed " + id + "."
	}
	for _, k := range []string{"created", "changed"} {
		if id := r.URL.Query().Get(k); id != "" {
			d.Warn = sameNameWarning(d.Regions, id)
		}
	}
	v := c.view("locations", "Locations", d)
	v.Live = true
	h.render(w, r, http.StatusOK, "locations", v)
	return nil
}

// sameNameWarning tells, when region id shares its name with other
// regions, which: the API allows it (as the original's does), but a
// second "Berlin" is more often a slip than a wish.
func sameNameWarning(regions []*eim.Region, id string) string {
	var name string
	for _, rg := range regions {
		if rg.ResourceID == id {
			name = rg.Name
		}
	}
	var others []string
	for _, rg := range regions {
		if name != "" && rg.Name == name && rg.ResourceID != id {
			others = append(others, rg.ResourceID)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("Another region is also named %q (%s). Names need not be unique; the lists below tell the regions apart by ID.", name, strings.Join(others, ", "))
}

func listAll[T eim.Resource](r *http.Request, inv *inventory.Service, project string, k eim.Kind) ([]T, bool, error) {
	var out []T
	for offset := 0; offset < maxLocations; offset += inventory.MaxPageSize {
		page, err := inv.List(r.Context(), project, k, inventory.ListQuery{OrderBy: "name, resourceId", PageSize: inventory.MaxPageSize, Offset: offset})
		if err != nil {
			return nil, false, err
		}
		for _, it := range page.Items {
			out = append(out, it.(T))
		}
		if !page.HasNext {
			return out, false, nil
		}
	}
	return out, true, nil
}

func (h *Handler) locationsData(r *http.Request, c *call) (*locationsData, error) {
	proj := c.project.Name
	regions, t1, err := listAll[*eim.Region](r, h.inv, proj, eim.KindRegion)
	if err != nil {
		return nil, err
	}
	sites, t2, err := listAll[*eim.Site](r, h.inv, proj, eim.KindSite)
	if err != nil {
		return nil, err
	}
	d := &locationsData{Regions: regions, Sites: sites, Truncated: t1 || t2}
	// Per site: its hosts in all ("") and per state.
	var counts map[string]map[string]int
	if h.fleet.live() {
		counts = h.fleet.siteCounts(proj)
	} else {
		keys := []string{"", "running", "failed", "noconnection"}
		filters := make([]string, len(keys))
		for i, k := range keys[1:] {
			filters[i+1] = stateFilter(k)
		}
		bySite, err := h.inv.CountHostsBy(r.Context(), proj, "siteId", filters)
		if err != nil {
			return nil, err
		}
		counts = map[string]map[string]int{}
		for i, k := range keys {
			for site, n := range bySite[i] {
				if counts[site] == nil {
					counts[site] = map[string]int{}
				}
				counts[site][k] = n
			}
		}
	}
	d.Unallocated = counts[""][""]
	nodes := map[string]*locNode{}
	for _, rg := range regions {
		nodes[rg.ResourceID] = &locNode{ID: rg.ResourceID, Name: rg.Name, Kind: "region", Metadata: rg.Metadata,
			HostsLink: hostsURL(proj, url.Values{"region": {rg.ResourceID}})}
	}
	for _, rg := range regions {
		n := nodes[rg.ResourceID]
		if p, ok := nodes[rg.ParentID]; ok {
			p.Children = append(p.Children, n)
		} else {
			d.Roots = append(d.Roots, n)
		}
	}
	for _, s := range sites {
		c := counts[s.ResourceID]
		n := &locNode{ID: s.ResourceID, Name: s.Name, Kind: "site", Metadata: s.Metadata, Hosts: c[""], Running: c["running"], Failed: c["failed"], NoConn: c["noconnection"],
			HostsLink: hostsURL(proj, url.Values{"filter": {fmt.Sprintf("site.resourceId=%q", s.ResourceID)}})}
		if p, ok := nodes[s.RegionID]; ok {
			p.Children = append(p.Children, n)
		} else {
			d.Roots = append(d.Roots, n)
		}
	}
	var walk func(n *locNode, depth int)
	walk = func(n *locNode, depth int) {
		n.Depth = depth
		d.Flat = append(d.Flat, n)
		slices.SortFunc(n.Children, func(a, b *locNode) int { return strings.Compare(a.Kind+a.Name, b.Kind+b.Name) })
		for _, ch := range n.Children {
			walk(ch, depth+1)
			if n.Kind == "region" {
				n.Hosts += ch.Hosts
				n.Running += ch.Running
				n.Failed += ch.Failed
				n.NoConn += ch.NoConn
			}
		}
	}
	for _, n := range d.Roots {
		walk(n, 0)
	}
	return d, nil
}

func (h *Handler) createRegion(w http.ResponseWriter, r *http.Request, c *call) error {
	rg := &eim.Region{Name: strings.TrimSpace(r.PostFormValue("name")), ParentID: r.PostFormValue("parent")}
	return h.createLocation(w, r, c, "/regions", rg, "name", "parentId")
}

func (h *Handler) createSite(w http.ResponseWriter, r *http.Request, c *call) error {
	s := &eim.Site{Name: strings.TrimSpace(r.PostFormValue("name")), RegionID: r.PostFormValue("region")}
	return h.createLocation(w, r, c, "/sites", s, "name", "regionId")
}

// editRegion renames or moves a region: an empty name keeps its name,
// the parent "keep" its place.
func (h *Handler) editRegion(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PostFormValue("id")
	if !eim.ValidID(eim.KindRegion, id) {
		return h.locationError(w, r, c, eim.Errorf(eim.EINVALID, "choose a region to change"))
	}
	rg := &eim.Region{Meta: eim.Meta{ResourceID: id}, Name: strings.TrimSpace(r.PostFormValue("name")), ParentID: r.PostFormValue("parent")}
	var mask []string
	if rg.Name != "" {
		mask = append(mask, "name")
	}
	if rg.ParentID != "keep" {
		mask = append(mask, "parentId")
	}
	return h.updateLocation(w, r, c, "/regions/"+url.PathEscape(id), rg, mask)
}

// editSite renames a site or moves it to another region, as editRegion.
func (h *Handler) editSite(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PostFormValue("id")
	if !eim.ValidID(eim.KindSite, id) {
		return h.locationError(w, r, c, eim.Errorf(eim.EINVALID, "choose a site to change"))
	}
	s := &eim.Site{Meta: eim.Meta{ResourceID: id}, Name: strings.TrimSpace(r.PostFormValue("name")), RegionID: r.PostFormValue("region")}
	var mask []string
	if s.Name != "" {
		mask = append(mask, "name")
	}
	if s.RegionID != "keep" {
		mask = append(mask, "regionId")
	}
	return h.updateLocation(w, r, c, "/sites/"+url.PathEscape(id), s, mask)
}

// updateLocation changes the fields of mask through the API.
func (h *Handler) updateLocation(w http.ResponseWriter, r *http.Request, c *call, path string, res eim.Resource, mask []string) error {
	if len(mask) == 0 {
		return h.locationError(w, r, c, eim.Errorf(eim.EINVALID, "nothing to change: give a new name or another place"))
	}
	if err := h.apiPatch(r, c, path, res, mask...); err != nil {
		return h.locationError(w, r, c, err)
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(c.project.Name)+"/locations?changed="+url.QueryEscape(res.Base().ResourceID), http.StatusSeeOther)
	return nil
}

// locationError shows the page again with the form's error.
func (h *Handler) locationError(w http.ResponseWriter, r *http.Request, c *call, err error) error {
	if statusOf(err) == http.StatusInternalServerError {
		return err
	}
	d, derr := h.locationsData(r, c)
	if derr != nil {
		return derr
	}
	d.Error, d.Form = eim.ErrorMessage(err), r.PostForm
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(err), "locations", c.view("locations", "Locations", d))
	return nil
}

// createLocation creates res with the named fields through the API.
func (h *Handler) createLocation(w http.ResponseWriter, r *http.Request, c *call, path string, res eim.Resource, names ...string) error {
	id, err := h.apiCreate(r, c, path, res, names...)
	if err != nil {
		return h.locationError(w, r, c, err)
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(c.project.Name)+"/locations?created="+url.QueryEscape(id), http.StatusSeeOther)
	return nil
}
