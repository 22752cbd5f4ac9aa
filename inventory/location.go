package inventory

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/eimhq/eim"
)

// checkRegionParent checks a region's (new) parent: it exists, it is not
// the region itself or one of its descendants, and the tree stays at most
// eim.MaxRegionDepth deep counting the region's existing descendants.
func checkRegionParent(ctx context.Context, tx eim.Tx, r *eim.Region, create bool) error {
	depth := 0 // of the parent: 1 for a root region
	for id := r.ParentID; id != ""; {
		if id == r.ResourceID {
			return eim.Errorf(eim.EINVALID, "parentId: %s is %s itself or one of its descendants (cycle)", r.ParentID, r.ResourceID)
		}
		depth++
		if depth > eim.MaxRegionDepth {
			return eim.Errorf(eim.EPRECONDITION, "parentId: regions nest at most %d levels deep", eim.MaxRegionDepth)
		}
		field := "parentId"
		if depth > 1 {
			field = "parentId (ancestor)"
		}
		p, err := exists(ctx, tx, eim.KindRegion, field, id)
		if err != nil {
			return err
		}
		id = p.(*eim.Region).ParentID
	}
	height := 1 // the region and the levels of regions below it
	if !create {
		frontier := []string{r.ResourceID}
		for height <= eim.MaxRegionDepth {
			kids, _, err := tx.List(ctx, eim.KindRegion, eim.Query{Where: []eim.Cond{{Field: "parentId", Value: frontier}}})
			if err != nil {
				return fmt.Errorf("find child regions: %w", err)
			}
			if len(kids) == 0 {
				break
			}
			height++
			frontier = ids(kids, func(k eim.Resource) string { return k.Base().ResourceID })
		}
	}
	if depth+height > eim.MaxRegionDepth {
		return eim.Errorf(eim.EPRECONDITION, "parentId: regions nest at most %d levels deep; under %s the tree would be %d levels deep",
			eim.MaxRegionDepth, r.ParentID, depth+height)
	}
	return nil
}

// LocationQuery searches the location tree.
type LocationQuery struct {
	Name                   string
	ShowSites, ShowRegions bool
}

// LocationNode is a region or a site in a location search result.
type LocationNode struct {
	ResourceID string `json:"resourceId"`
	ParentID   string `json:"parentId"`
	Name       string `json:"name"`
	Type       string `json:"type"` // RESOURCE_KIND_REGION | RESOURCE_KIND_SITE
}

// Locations is the answer of a location search.
type Locations struct {
	Nodes          []LocationNode `json:"nodes"`
	TotalElements  int            `json:"totalElements"`
	OutputElements int            `json:"outputElements"`
}

// Location node types.
const (
	NodeRegion = "RESOURCE_KIND_REGION"
	NodeSite   = "RESOURCE_KIND_SITE"
)

// MaxLocationMatches caps the matches of each kind a location search
// returns; TotalElements still counts them all.
const MaxLocationMatches = 20

// Locations finds regions and sites whose names contain q.Name (case
// insensitive; "" matches all) and returns them with all their ancestor
// regions, so that a UI can draw the branches of the tree that lead to the
// matches. With neither ShowSites nor ShowRegions both are searched.
func (s *Service) Locations(ctx context.Context, project string, q LocationQuery) (*Locations, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if !eim.ValidName(q.Name) {
		return nil, eim.Errorf(eim.EINVALID, "name: %q must match ^[a-zA-Z-_0-9./: ]*$ and be at most 50 characters", q.Name)
	}
	if !q.ShowSites && !q.ShowRegions {
		q.ShowSites, q.ShowRegions = true, true
	}
	filter := ""
	if q.Name != "" {
		filter = "name = " + strconv.Quote(q.Name)
	}
	out := &Locations{Nodes: []LocationNode{}}
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		e := newExpander(ctx, tx)
		var matchRegions []*eim.Region
		var matchSites []*eim.Site
		if q.ShowRegions {
			items, total, err := tx.List(ctx, eim.KindRegion, eim.Query{Filter: filter, OrderBy: "name", Limit: MaxLocationMatches})
			if err != nil {
				return err
			}
			out.TotalElements += total
			matchRegions = typed[*eim.Region](items)
			for _, r := range matchRegions {
				e.regions[r.ResourceID] = r
			}
		}
		if q.ShowSites {
			items, total, err := tx.List(ctx, eim.KindSite, eim.Query{Filter: filter, OrderBy: "name", Limit: MaxLocationMatches})
			if err != nil {
				return err
			}
			out.TotalElements += total
			matchSites = typed[*eim.Site](items)
		}
		want := ids(matchRegions, func(r *eim.Region) string { return r.ParentID })
		want = append(want, ids(matchSites, func(s *eim.Site) string { return s.RegionID })...)
		if err := e.loadRegionChains(want); err != nil {
			return err
		}
		// Every region loaded is a match or an ancestor of one.
		regions := make([]*eim.Region, 0, len(e.regions))
		for _, r := range e.regions {
			regions = append(regions, r)
		}
		depth := func(r *eim.Region) int {
			d := 0
			for p := r; p != nil && d <= eim.MaxRegionDepth; p = e.regions[p.ParentID] {
				d++
			}
			return d
		}
		sort.Slice(regions, func(i, j int) bool {
			di, dj := depth(regions[i]), depth(regions[j])
			if di != dj {
				return di < dj
			}
			return regions[i].Name < regions[j].Name || (regions[i].Name == regions[j].Name && regions[i].ResourceID < regions[j].ResourceID)
		})
		for _, r := range regions {
			out.Nodes = append(out.Nodes, LocationNode{ResourceID: r.ResourceID, ParentID: r.ParentID, Name: r.Name, Type: NodeRegion})
		}
		for _, st := range matchSites {
			out.Nodes = append(out.Nodes, LocationNode{ResourceID: st.ResourceID, ParentID: st.RegionID, Name: st.Name, Type: NodeSite})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.OutputElements = len(out.Nodes)
	return out, nil
}
