package inventory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
// The matches are the first MaxLocationMatches of each kind by name; the
// list is ordered as the original's tree query ordered it (its inventory's
// GetTreeHierarchy, descending): deepest first, sites being one level below
// the deepest region, so the matching sites come first, then the regions
// from the deepest level up to the roots; within a level, in creation order
// (the original's row numbers; here creation time, then ID). The regions
// are the matching ones, the regions of the matching sites, and all their
// ancestors, each once. OutputElements counts the matches returned,
// TotalElements all matches.
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
		slices.SortStableFunc(matchSites, func(a, b *eim.Site) int { return byCreation(&a.Meta, &b.Meta) })
		for _, st := range matchSites {
			out.Nodes = append(out.Nodes, LocationNode{ResourceID: st.ResourceID, ParentID: st.RegionID, Name: st.Name, Type: NodeSite})
		}
		// The matching regions, the sites' regions and their ancestors.
		tree := map[string]*eim.Region{}
		climb := func(id string) {
			for depth := 0; id != "" && depth < eim.MaxRegionDepth; depth++ {
				r := e.regions[id]
				if r == nil || tree[id] != nil {
					return
				}
				tree[id] = r
				id = r.ParentID
			}
		}
		for _, r := range matchRegions {
			climb(r.ResourceID)
		}
		for _, st := range matchSites {
			climb(st.RegionID)
		}
		depth := func(r *eim.Region) int {
			d := 0
			for p := r.ParentID; p != "" && d <= eim.MaxRegionDepth; d++ {
				pr := e.regions[p]
				if pr == nil {
					break
				}
				p = pr.ParentID
			}
			return d
		}
		regions := make([]*eim.Region, 0, len(tree))
		depths := make(map[string]int, len(tree))
		for id, r := range tree {
			regions = append(regions, r)
			depths[id] = depth(r)
		}
		slices.SortFunc(regions, func(a, b *eim.Region) int {
			if c := cmp.Compare(depths[b.ResourceID], depths[a.ResourceID]); c != 0 {
				return c
			}
			return byCreation(&a.Meta, &b.Meta)
		})
		for _, r := range regions {
			out.Nodes = append(out.Nodes, LocationNode{ResourceID: r.ResourceID, ParentID: r.ParentID, Name: r.Name, Type: NodeRegion})
		}
		out.OutputElements = len(matchRegions) + len(matchSites)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// byCreation orders resources as the original's row numbers did: by
// creation time, then (for those created in the same millisecond) by ID.
func byCreation(a, b *eim.Meta) int {
	if c := a.Timestamps.CreatedAt.Compare(b.Timestamps.CreatedAt.Time); c != 0 {
		return c
	}
	return strings.Compare(a.ResourceID, b.ResourceID)
}
