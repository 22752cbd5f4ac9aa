package inventory

import (
	"context"
	"fmt"
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
// returns, as the original's 50; TotalElements still counts them all.
const MaxLocationMatches = 50

// Locations finds regions and sites whose names contain q.Name (case
// insensitive; "" matches all) and returns them with all their ancestor
// regions, so that a UI can draw the branches of the tree that lead to the
// matches. With neither ShowSites nor ShowRegions both are searched.
//
// The order is the original's: the matching regions, then the matching
// sites, each kind by name; each match is followed by those of its
// ancestors (parent first, up to the root) not listed yet. OutputElements
// counts the matches returned, TotalElements all matches.
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
		listed := map[string]bool{}
		add := func(n LocationNode) {
			if !listed[n.ResourceID] {
				listed[n.ResourceID] = true
				out.Nodes = append(out.Nodes, n)
			}
		}
		ancestors := func(id string) {
			for depth := 0; id != "" && depth < eim.MaxRegionDepth; depth++ {
				r := e.regions[id]
				if r == nil {
					return
				}
				add(LocationNode{ResourceID: r.ResourceID, ParentID: r.ParentID, Name: r.Name, Type: NodeRegion})
				id = r.ParentID
			}
		}
		for _, r := range matchRegions {
			add(LocationNode{ResourceID: r.ResourceID, ParentID: r.ParentID, Name: r.Name, Type: NodeRegion})
			ancestors(r.ParentID)
		}
		for _, st := range matchSites {
			add(LocationNode{ResourceID: st.ResourceID, ParentID: st.RegionID, Name: st.Name, Type: NodeSite})
			ancestors(st.RegionID)
		}
		out.OutputElements = len(matchRegions) + len(matchSites)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
