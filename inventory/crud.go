package inventory

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/eimhq/eim"
)

// ListQuery selects one page of a kind.
type ListQuery struct {
	Filter, OrderBy  string
	PageSize, Offset int
	Where            []eim.Cond
	// Variant keeps the resources of one variant of a kind that holds
	// several API types (eim.Variants); "" keeps all.
	Variant string
	// ShowTotalSites fills Region.TotalSites (regions only).
	ShowTotalSites bool
}

// Page is one page of a list.
type Page struct {
	Items   []eim.Resource
	Total   int
	HasNext bool
}

// Create validates r, applies the kind's defaults and stores it. Only r's
// writable fields (and, for a kind with variants, its variant) are taken;
// everything else is the inventory's to set.
func (s *Service) Create(ctx context.Context, project string, r eim.Resource) (eim.Resource, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if r == nil || eim.SchemaOf(r.ResourceKind()) == nil {
		return nil, eim.Errorf(eim.EINVALID, "unknown resource kind")
	}
	if r.ResourceKind() == eim.KindOSUpdateRun {
		return nil, eim.Errorf(eim.EINVALID, "OS update runs are recorded by the maintenance module, not created through the API")
	}
	nr := eim.NewResource(r.ResourceKind())
	copyWritable(nr, r, nil)
	noneRefs(nr)
	if vf := eim.SchemaOf(r.ResourceKind()).Variant; vf != nil {
		vf.Value(nr).Set(vf.Value(r))
	}
	if err := s.applyDefaults(nr); err != nil {
		return nil, err
	}
	if err := eim.Validate(nr); err != nil {
		return nil, err
	}
	normalizeEnums(nr)
	var (
		out      eim.Resource
		defaults *SettingsChange
	)
	err := s.write(ctx, project, func(tx eim.Tx) error {
		if err := s.checkRefs(ctx, tx, nil, nr); err != nil {
			return err
		}
		if isDefaultProvider(nr) {
			ch, err := checkDefaultProvider(ctx, tx, project, nr.(*eim.Provider))
			if err != nil {
				return err
			}
			defaults = &ch
		}
		if err := tx.Create(ctx, nr); err != nil {
			return err
		}
		e := newExpander(ctx, tx)
		if h, ok := nr.(*eim.Host); ok {
			// A host created in this transaction has no instance yet: skip
			// the lookup while holding the (on SQLite, single) writer.
			e.instDone[h.ResourceID] = true
		}
		if in, ok := nr.(*eim.Instance); ok {
			e.membersOf[in.ResourceID] = nil // nor a workload membership
		}
		items, err := e.expand(nr.ResourceKind(), []eim.Resource{nr})
		if err != nil {
			return err
		}
		out = items[0]
		return nil
	})
	if h, ok := nr.(*eim.Host); ok && err != nil {
		err = s.explainUUIDConflict(ctx, project, h.UUID, err)
	}
	if err != nil {
		return nil, err
	}
	if defaults != nil {
		return s.settleDefaultProvider(ctx, project, out, *defaults)
	}
	return out, nil
}

// Get returns the expanded resource of kind k with the id.
func (s *Service) Get(ctx context.Context, project string, k eim.Kind, id string) (eim.Resource, error) {
	return s.GetVariant(ctx, project, k, "", id)
}

// GetVariant is Get for one variant of a kind that holds several API types:
// a resource of another variant is ENOTFOUND, as it is to the API. variant
// "" accepts any.
func (s *Service) GetVariant(ctx context.Context, project string, k eim.Kind, variant, id string) (eim.Resource, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := checkKindID(k, id); err != nil {
		return nil, err
	}
	var out eim.Resource
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		r, err := getVariant(ctx, tx, k, variant, id)
		if err != nil {
			return err
		}
		out, err = expandOne(ctx, tx, r)
		return err
	})
	return out, err
}

// getVariant reads a resource of kind k, and of the variant unless it is "".
func getVariant(ctx context.Context, tx eim.Tx, k eim.Kind, variant, id string) (eim.Resource, error) {
	r, err := tx.Get(ctx, k, id)
	if err != nil {
		return nil, err
	}
	if err := checkVariant(r, variant); err != nil {
		return nil, err
	}
	return r, nil
}

// checkVariant answers ENOTFOUND when r is not of the variant ("" = any).
func checkVariant(r eim.Resource, variant string) error {
	got := eim.SchemaOf(r.ResourceKind()).VariantOf(r)
	if variant == "" || got == variant {
		return nil
	}
	noun := string(r.ResourceKind())
	if v, ok := eim.VariantNamed(r.ResourceKind(), variant); ok {
		noun = v.Noun
	}
	return eim.Errorf(eim.ENOTFOUND, "%s %s not found", noun, r.Base().ResourceID)
}

// List returns one page of kind k, expanded.
func (s *Service) List(ctx context.Context, project string, k eim.Kind, q ListQuery) (*Page, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if eim.SchemaOf(k) == nil {
		return nil, eim.Errorf(eim.EINVALID, "unknown resource kind %q", k)
	}
	size, err := checkPage(q.PageSize, q.Offset)
	if err != nil {
		return nil, err
	}
	var page Page
	err = s.store.View(ctx, project, func(tx eim.Tx) error {
		items, total, err := tx.List(ctx, k, eim.Query{Filter: q.Filter, OrderBy: q.OrderBy, Where: q.Where, Variant: q.Variant, Limit: size, Offset: q.Offset})
		if err != nil {
			return err
		}
		out, err := newExpander(ctx, tx).expand(k, items)
		if err != nil {
			return err
		}
		if k == eim.KindRegion && q.ShowTotalSites {
			if err := fillTotalSites(ctx, tx, out); err != nil {
				return err
			}
		}
		page = Page{Items: out, Total: total, HasNext: q.Offset+len(out) < total}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if page.Items == nil {
		page.Items = []eim.Resource{}
	}
	return &page, nil
}

// fillTotalSites sets TotalSites of each region to the number of sites in
// it and in the regions below it, as the original counted them (its
// inventory walked each region's subtree). The subtrees are read a level
// at a time (regions nest at most eim.MaxRegionDepth deep), and the sites
// counted per region with one grouped count.
func fillTotalSites(ctx context.Context, tx eim.Tx, regions []eim.Resource) error {
	// parent of every region of the page's subtrees; a page's region
	// points at its own parent, which may lie outside them.
	parent := make(map[string]string, len(regions))
	page := make(map[string]bool, len(regions))
	level := make([]string, 0, len(regions))
	for _, r := range regions {
		id := r.Base().ResourceID
		parent[id] = r.(*eim.Region).ParentID
		page[id] = true
		level = append(level, id)
	}
	for depth := 1; depth < eim.MaxRegionDepth && len(level) > 0; depth++ {
		children, err := tx.CountBy(ctx, eim.KindRegion, eim.Query{Where: []eim.Cond{{Field: "parentId", Value: level}}}, "resourceId", "parentId")
		if err != nil {
			return fmt.Errorf("count sites: sub-regions: %w", err)
		}
		level = level[:0]
		for _, g := range children {
			if id := g.Values[0]; !page[id] {
				parent[id] = g.Values[1]
				level = append(level, id)
			}
		}
	}
	counts := make(map[string]int, len(regions))
	if len(parent) > 0 {
		all := make([]string, 0, len(parent))
		for id := range parent {
			all = append(all, id)
		}
		groups, err := tx.CountBy(ctx, eim.KindSite, eim.Query{Where: []eim.Cond{{Field: "regionId", Value: all}}}, "regionId")
		if err != nil {
			return fmt.Errorf("count sites: %w", err)
		}
		// A region's sites count for it and for each of the page's
		// regions above it.
		for _, g := range groups {
			for id, n := g.Values[0], 0; id != "" && n <= eim.MaxRegionDepth; id, n = parent[id], n+1 {
				if page[id] {
					counts[id] += g.Count
				}
				if _, known := parent[id]; !known {
					break
				}
			}
		}
	}
	for _, r := range regions {
		n := counts[r.Base().ResourceID]
		r.(*eim.Region).TotalSites = &n
	}
	return nil
}

// Update changes the writable fields of an existing resource: the named
// ones (JSON names, a PATCH field mask), or all of them when fields is nil
// (PUT). Unknown and read-only fields in the mask are EINVALID. For a kind
// with variants, r's variant (when set) must be the stored one's, else
// ENOTFOUND; the variant itself never changes.
func (s *Service) Update(ctx context.Context, project string, r eim.Resource, fields []string) (eim.Resource, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if r == nil || eim.SchemaOf(r.ResourceKind()) == nil {
		return nil, eim.Errorf(eim.EINVALID, "unknown resource kind")
	}
	k, id := r.ResourceKind(), r.Base().ResourceID
	if err := checkKindID(k, id); err != nil {
		return nil, err
	}
	switch k {
	case eim.KindOSUpdatePolicy:
		return nil, eim.Errorf(eim.EINVALID, "OS update policies cannot be changed (as in the original API): create another one and name it in the instances' osUpdatePolicyID")
	case eim.KindOSUpdateRun:
		return nil, eim.Errorf(eim.EINVALID, "OS update runs are written by the maintenance module, not through the API")
	case eim.KindWorkloadMember:
		return nil, eim.Errorf(eim.EINVALID, "workload members cannot be changed (as in the original API): delete the member and create another")
	}
	variant := eim.SchemaOf(k).VariantOf(r)
	mask, err := resolveMask(k, variant, fields)
	if err != nil {
		return nil, err
	}
	mask = restrictMask(k, mask)
	var (
		out      eim.Resource
		defaults *SettingsChange
	)
	err = s.store.Update(ctx, project, func(tx eim.Tx) error {
		old, err := getVariant(ctx, tx, k, variant, id)
		if err != nil {
			return err
		}
		nr := clone(old)
		copyWritable(nr, r, mask)
		noneRefs(nr)
		if err := s.checkUpdate(old, nr, mask); err != nil {
			return err
		}
		if isDefaultProvider(old) || isDefaultProvider(nr) {
			if old.(*eim.Provider).Name != nr.(*eim.Provider).Name {
				return eim.Errorf(eim.EINVALID, "name: the default provider %s cannot be renamed, nor another take its name", DefaultProviderName)
			}
			ch, err := checkDefaultProvider(ctx, tx, project, nr.(*eim.Provider))
			if err != nil {
				return err
			}
			defaults = &ch
		}
		if err := eim.Validate(nr); err != nil {
			return err
		}
		normalizeEnums(nr)
		if err := s.checkRefs(ctx, tx, old, nr); err != nil {
			return err
		}
		// The API writes the fields it changed, and only those: the
		// modules' fields of the row are theirs (see apiGuards).
		fields := changedFields(old, nr, writableFields(k, variant, mask))
		when := apiGuards(old, nr, fields)
		// A host moved to another site: its addresses may clash there,
		// and may have been what clashed in the site it left.
		var left string
		now := eim.NewTime(s.now())
		if nh, ok := nr.(*eim.Host); ok && nh.SiteID != old.(*eim.Host).SiteID && hasAddresses(nh) {
			if err := CheckSiteAddresses(ctx, tx, nh, now); err != nil {
				return err
			}
			left = old.(*eim.Host).SiteID
			// The flags are computed on the report read.
			fields = append(fields, "hostNics")
			when = append(when, eim.Cond{Field: "hardware_digest", Value: nh.HardwareDigest})
		}
		if len(fields) > 0 {
			if err := tx.UpdateFieldsIf(ctx, nr, when, fields...); err != nil {
				return err
			}
		}
		if err := recheckSite(ctx, tx, left, now); err != nil {
			return err
		}
		out, err = expandOne(ctx, tx, nr)
		return err
	})
	if err != nil {
		return nil, err
	}
	if defaults != nil {
		return s.settleDefaultProvider(ctx, project, out, *defaults)
	}
	return out, nil
}

// writableFields are the JSON names of the stored fields of kind k (and
// variant) that an update with the mask may change: the mask's, or every
// writable one when mask is nil.
func writableFields(k eim.Kind, variant string, mask []string) []string {
	var out []string
	for _, f := range eim.SchemaOf(k).Fields {
		if f.Writable && f.Stored() && f.In(variant) && (mask == nil || contains(mask, f.Name)) {
			out = append(out, f.Name)
		}
	}
	return out
}

// changedFields returns those of names whose values differ between old
// and nr.
func changedFields(old, nr eim.Resource, names []string) []string {
	sc := eim.SchemaOf(old.ResourceKind())
	var out []string
	for _, name := range names {
		f, _ := sc.Field(name)
		if !reflect.DeepEqual(f.Value(old).Interface(), f.Value(nr).Interface()) {
			out = append(out, name)
		}
	}
	return out
}

// apiGuards are the conditions of an API update that writes fields of
// old, changed to nr: what the update's rules decided on that a module
// may change meanwhile. A host's UUID is set by the API or, for a host
// without one, by onboarding from its device; an instance's account and
// configs may change only until its provisioning starts.
func apiGuards(old, nr eim.Resource, fields []string) []eim.Cond {
	var when []eim.Cond
	switch o := old.(type) {
	case *eim.Host:
		if contains(fields, "uuid") {
			when = append(when, eim.Cond{Field: "uuid", Value: o.UUID})
		}
	case *eim.Instance:
		if contains(fields, "localAccountID") || contains(fields, "customConfigID") {
			when = append(when, eim.Cond{Field: "currentState", Value: o.CurrentState},
				eim.Cond{Field: "provisioningStatusIndicator", Value: o.ProvisioningStatusIndicator})
		}
	}
	return when
}

// Delete deletes a resource. Hosts and instances are deleted in two phases:
// Delete sets their desired state to DELETED and a manager (for now the
// Reaper) calls ConfirmDeleted to remove the row; the schedules targeting a
// host go with it (and the telemetry profiles targeting an instance with
// the instance). Other kinds go at once, unless something still refers to
// them (EPRECONDITION naming it).
func (s *Service) Delete(ctx context.Context, project string, k eim.Kind, id string) error {
	return s.DeleteVariant(ctx, project, k, "", id)
}

// DeleteVariant is Delete for one variant of a kind that holds several API
// types: a resource of another variant is ENOTFOUND. variant "" accepts any.
func (s *Service) DeleteVariant(ctx context.Context, project string, k eim.Kind, variant, id string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := checkKindID(k, id); err != nil {
		return err
	}
	deletingDefault := false
	err := s.store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := getVariant(ctx, tx, k, variant, id)
		if err != nil {
			return err
		}
		deletingDefault = isDefaultProvider(r)
		switch r := r.(type) {
		case *eim.Host:
			return s.deleteHost(ctx, tx, r)
		case *eim.Instance:
			return s.setInstanceState(ctx, tx, r, eim.InstanceStateDeleted)
		}
		if err := checkUnused(ctx, tx, r); err != nil {
			return err
		}
		return tx.Delete(ctx, k, id)
	})
	if err == nil && deletingDefault {
		// The original's clients edit the default provider by deleting
		// and creating it again; without it there is no zero-touch
		// provisioning, and its creation sets the settings again.
		return s.clearZeroTouch(ctx, project)
	}
	return err
}

// ConfirmDeleted removes a host or instance whose desired state is DELETED,
// once the node-side cleanup is done. It is the managers' side of a
// two-phase delete; a resource already gone is not an error.
func (s *Service) ConfirmDeleted(ctx context.Context, project string, k eim.Kind, id string) error {
	if k != eim.KindHost && k != eim.KindInstance {
		return eim.Errorf(eim.EINVALID, "%s resources are deleted at once, not confirmed", k)
	}
	if err := checkKindID(k, id); err != nil {
		return err
	}
	err := s.store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, k, id)
		if err != nil {
			return err
		}
		switch r := r.(type) {
		case *eim.Host:
			if r.DesiredState != eim.HostStateDeleted {
				return eim.Errorf(eim.EPRECONDITION, "host %s is not being deleted (desiredState %s)", id, r.DesiredState)
			}
			if inst, err := instanceOf(ctx, tx, id); err != nil {
				return err
			} else if inst != nil {
				return eim.Errorf(eim.EPRECONDITION, "host %s still has instance %s", id, inst.ResourceID)
			}
		case *eim.Instance:
			if r.DesiredState != eim.InstanceStateDeleted {
				return eim.Errorf(eim.EPRECONDITION, "instance %s is not being deleted (desiredState %s)", id, r.DesiredState)
			}
		}
		if h, ok := r.(*eim.Host); ok {
			return s.removeHost(ctx, tx, h)
		}
		return tx.Delete(ctx, k, id)
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	return err
}

// removeHost removes a host's row (the schedules targeting it go with it).
func (s *Service) removeHost(ctx context.Context, tx eim.Tx, h *eim.Host) error {
	if err := tx.Delete(ctx, eim.KindHost, h.ResourceID); err != nil {
		return err
	}
	if hasAddresses(h) {
		// Its addresses may have been what clashed in its site.
		return recheckSite(ctx, tx, h.SiteID, eim.NewTime(s.now()))
	}
	return nil
}

// instanceOf returns the instance on host id, or nil.
func instanceOf(ctx context.Context, tx eim.Tx, hostID string) (*eim.Instance, error) {
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}, Limit: 1, NoTotal: true})
	if err != nil {
		return nil, fmt.Errorf("find instance of %s: %w", hostID, err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	return items[0].(*eim.Instance), nil
}

// exists checks that the resource a field refers to exists in the project;
// a dangling reference is ENOTFOUND naming the field.
func exists(ctx context.Context, tx eim.Tx, k eim.Kind, field, id string) (eim.Resource, error) {
	r, err := tx.Get(ctx, k, id)
	if err != nil {
		var e *eim.Error
		if errors.As(err, &e) && e.Code == eim.ENOTFOUND {
			return nil, eim.Errorf(eim.ENOTFOUND, "%s: %s not found", field, id)
		}
		return nil, err
	}
	return r, nil
}

// eachPage is how many resources Each reads at a time.
const eachPage = 1000

// Each calls fn with every resource of kind k in the project, expanded as
// List expands them, in resource ID order: a page of eachPage at a time,
// each page its own read, after the last ID of the one before (a keyset:
// no offset to skip, no count of the matches). A resource created or
// changed while Each walks may be seen or not; none is seen twice. fn is
// called outside the store's transactions; its error ends the walk and is
// returned.
func (s *Service) Each(ctx context.Context, project string, k eim.Kind, fn func(eim.Resource) error) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if eim.SchemaOf(k) == nil {
		return eim.Errorf(eim.EINVALID, "unknown resource kind %q", k)
	}
	last := ""
	for {
		q := eim.Query{OrderBy: "resourceId", Limit: eachPage, NoTotal: true}
		if last != "" {
			q.Filter = fmt.Sprintf("resourceId > %q", last)
		}
		var page []eim.Resource
		err := s.store.View(ctx, project, func(tx eim.Tx) error {
			items, _, err := tx.List(ctx, k, q)
			if err != nil {
				return err
			}
			page, err = newExpander(ctx, tx).expand(k, items)
			return err
		})
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < eachPage {
			return nil
		}
		last = page[len(page)-1].Base().ResourceID
	}
}
