package inventory

import (
	"context"
	"fmt"

	"github.com/eimhq/eim"
)

// expander fills the read-only, derived parts of resources for the wire:
// alias IDs, inherited metadata and nested related resources. It loads
// related resources in batches (one GetMany per kind and level), never one
// query per row, and caches them for the life of one transaction.
type expander struct {
	ctx context.Context
	tx  eim.Tx

	regions   map[string]*eim.Region
	sites     map[string]*eim.Site
	hosts     map[string]*eim.Host
	providers map[string]*eim.Provider
	oses      map[string]*eim.OS
	accounts  map[string]*eim.LocalAccount
	configs   map[string]*eim.CustomConfig
	groups    map[string]*eim.TelemetryGroup
	policies  map[string]*eim.OSUpdatePolicy
	insts     map[string]*eim.Instance
	instOf    map[string]*eim.Instance // host ID → its instance
	instDone  map[string]bool          // host IDs whose instance was looked up
	workloads map[string]*eim.Workload
	// Workload members by instance ID, for the instances whose
	// memberships were looked up (an entry, maybe empty, for each).
	membersOf map[string][]*eim.WorkloadMember

	effRegion map[string]eim.Metadata // region ID → its metadata over its ancestors'
}

func newExpander(ctx context.Context, tx eim.Tx) *expander {
	return &expander{
		ctx: ctx, tx: tx,
		regions: map[string]*eim.Region{}, sites: map[string]*eim.Site{}, hosts: map[string]*eim.Host{},
		providers: map[string]*eim.Provider{}, oses: map[string]*eim.OS{},
		accounts: map[string]*eim.LocalAccount{}, configs: map[string]*eim.CustomConfig{},
		groups: map[string]*eim.TelemetryGroup{}, policies: map[string]*eim.OSUpdatePolicy{}, insts: map[string]*eim.Instance{},
		instOf: map[string]*eim.Instance{}, instDone: map[string]bool{},
		workloads: map[string]*eim.Workload{}, membersOf: map[string][]*eim.WorkloadMember{},
		effRegion: map[string]eim.Metadata{},
	}
}

// load fetches the resources of kind k with the ids not yet in m.
func load[T eim.Resource](e *expander, k eim.Kind, want []string, m map[string]T) error {
	var missing []string
	seen := map[string]bool{}
	for _, id := range want {
		if _, ok := m[id]; !ok && id != "" && !seen[id] {
			seen[id] = true
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rs, err := e.tx.GetMany(e.ctx, k, missing)
	if err != nil {
		return fmt.Errorf("load %s: %w", k, err)
	}
	for _, r := range rs {
		if t, ok := r.(T); ok {
			m[r.Base().ResourceID] = t
		}
	}
	return nil
}

// loadRegionChains loads the regions and all their ancestors, one query per
// level (regions nest at most eim.MaxRegionDepth deep).
func (e *expander) loadRegionChains(want []string) error {
	for level := 0; len(want) > 0 && level <= eim.MaxRegionDepth+1; level++ {
		if err := load(e, eim.KindRegion, want, e.regions); err != nil {
			return err
		}
		var next []string
		for _, id := range want {
			if r := e.regions[id]; r != nil && r.ParentID != "" {
				if _, ok := e.regions[r.ParentID]; !ok {
					next = append(next, r.ParentID)
				}
			}
		}
		want = next
	}
	return nil
}

func (e *expander) loadSites(want []string) error {
	if err := load(e, eim.KindSite, want, e.sites); err != nil {
		return err
	}
	var regions []string
	for _, id := range want {
		if s := e.sites[id]; s != nil {
			regions = append(regions, s.RegionID)
		}
	}
	return e.loadRegionChains(regions)
}

// loadHostDeps loads what a host's view needs: site (and region chain),
// provider and, if withInstance, its instance and that instance's OS.
func (e *expander) loadHostDeps(hosts []*eim.Host, withInstance bool) error {
	if err := e.loadSites(ids(hosts, func(h *eim.Host) string { return h.SiteID })); err != nil {
		return err
	}
	if err := load(e, eim.KindProvider, ids(hosts, func(h *eim.Host) string { return h.ProviderID }), e.providers); err != nil {
		return err
	}
	if !withInstance {
		return nil
	}
	var want []string
	for _, id := range ids(hosts, func(h *eim.Host) string { return h.ResourceID }) {
		if !e.instDone[id] {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	items, _, err := e.tx.List(e.ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: want}}})
	if err != nil {
		return fmt.Errorf("load instances: %w", err)
	}
	var osIDs []string
	for _, id := range want {
		e.instDone[id] = true
	}
	for _, r := range items {
		in := r.(*eim.Instance)
		e.instOf[in.HostID] = in
		osIDs = append(osIDs, in.OSID)
	}
	return load(e, eim.KindOS, osIDs, e.oses)
}

// effectiveRegion is the metadata a region passes to its children: its own
// over its ancestors' (child keys win).
func (e *expander) effectiveRegion(id string) eim.Metadata {
	return e.effRegionDepth(id, 0)
}

func (e *expander) effRegionDepth(id string, depth int) eim.Metadata {
	if id == "" || depth > eim.MaxRegionDepth+1 {
		return nil
	}
	if md, ok := e.effRegion[id]; ok {
		return md
	}
	r := e.regions[id]
	if r == nil {
		return nil
	}
	md := r.Metadata.Inherit(e.effRegionDepth(r.ParentID, depth+1))
	e.effRegion[id] = md
	return md
}

func (e *expander) effectiveSite(id string) eim.Metadata {
	s := e.sites[id]
	if s == nil {
		return nil
	}
	return s.Metadata.Inherit(e.effectiveRegion(s.RegionID))
}

// The views below return fresh copies, each nested object its own, so that
// an answer is a tree: no cycle, and no object reached by two paths.

func (e *expander) region(r *eim.Region, withParent bool) *eim.Region {
	out := clone(r)
	out.AliasID = out.ResourceID
	out.InheritedMetadata = inherited(r.Metadata, e.effectiveRegion(r.ParentID))
	out.ParentRegion = nil
	if p := e.regions[r.ParentID]; withParent && p != nil {
		out.ParentRegion = e.region(p, false)
	}
	return out
}

func (e *expander) regionByID(id string) *eim.Region {
	if r := e.regions[id]; r != nil {
		return e.region(r, false)
	}
	return nil
}

func (e *expander) site(s *eim.Site) *eim.Site {
	out := clone(s)
	out.AliasID = out.ResourceID
	out.InheritedMetadata = inherited(s.Metadata, e.effectiveRegion(s.RegionID))
	out.Region = e.regionByID(s.RegionID)
	return out
}

func (e *expander) siteByID(id string) *eim.Site {
	if s := e.sites[id]; s != nil {
		return e.site(s)
	}
	return nil
}

func (e *expander) host(h *eim.Host, withInstance bool) *eim.Host {
	out := clone(h)
	out.InheritedMetadata = inherited(h.Metadata, e.effectiveSite(h.SiteID))
	out.Site = e.siteByID(h.SiteID)
	out.Provider = nil
	if p := e.providers[h.ProviderID]; p != nil {
		out.Provider = e.provider(p)
	}
	out.Instance = nil
	if in := e.instOf[h.ResourceID]; withInstance && in != nil {
		ic := clone(in)
		ic.AliasID = ic.ResourceID
		ic.Host, ic.LocalAccount, ic.CustomConfigs = nil, nil, nil
		ic.OS = e.osByID(in.OSID)
		out.Instance = ic
	}
	return out
}

func (e *expander) instance(in *eim.Instance) *eim.Instance {
	out := clone(in)
	out.AliasID = out.ResourceID
	out.Host = nil
	if h := e.hosts[in.HostID]; h != nil {
		out.Host = e.host(h, false)
	}
	out.OS = e.osByID(in.OSID)
	out.LocalAccount = nil
	if a := e.accounts[in.LocalAccountID]; a != nil {
		out.LocalAccount = clone(a)
		out.LocalAccount.AliasID = a.ResourceID
	}
	out.CustomConfigs = nil
	for _, id := range in.CustomConfigIDs {
		if c := e.configs[id]; c != nil {
			out.CustomConfigs = append(out.CustomConfigs, clone(c))
		}
	}
	out.UpdatePolicy = e.policyByID(in.OSUpdatePolicyID)
	out.WorkloadMembers = nil
	for _, m := range e.membersOf[in.ResourceID] {
		mc := clone(m)
		mc.AliasID = mc.ResourceID
		mc.Workload, mc.Instance, mc.Member = e.workloadByID(m.WorkloadID), nil, nil
		out.WorkloadMembers = append(out.WorkloadMembers, mc)
	}
	return out
}

// loadMemberships loads the workload members of the instances, and their
// workloads.
func (e *expander) loadMemberships(instIDs []string) error {
	var want []string
	for _, id := range instIDs {
		if _, done := e.membersOf[id]; !done && id != "" {
			e.membersOf[id] = nil
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	items, _, err := e.tx.List(e.ctx, eim.KindWorkloadMember, eim.Query{Where: []eim.Cond{{Field: "instanceId", Value: want}}, NoTotal: true})
	if err != nil {
		return fmt.Errorf("load workload members: %w", err)
	}
	var wls []string
	for _, r := range items {
		m := r.(*eim.WorkloadMember)
		e.membersOf[m.InstanceID] = append(e.membersOf[m.InstanceID], m)
		wls = append(wls, m.WorkloadID)
	}
	return load(e, eim.KindWorkload, wls, e.workloads)
}

// workloadByID is a workload without its members, as nested in a member.
func (e *expander) workloadByID(id string) *eim.Workload {
	w := e.workloads[id]
	if w == nil {
		return nil
	}
	out := clone(w)
	out.AliasID = out.ResourceID
	out.Members = []*eim.WorkloadMember{}
	return out
}

// expandWorkloads returns workloads with their members, each with its
// instance (the instance's own fields, as the original nests it).
func (e *expander) expandWorkloads(ws []*eim.Workload) ([]eim.Resource, error) {
	members := map[string][]*eim.WorkloadMember{}
	if wids := ids(ws, func(w *eim.Workload) string { return w.ResourceID }); len(wids) > 0 {
		items, _, err := e.tx.List(e.ctx, eim.KindWorkloadMember, eim.Query{Where: []eim.Cond{{Field: "workloadId", Value: wids}}, NoTotal: true})
		if err != nil {
			return nil, fmt.Errorf("load workload members: %w", err)
		}
		var insts []string
		for _, r := range items {
			m := r.(*eim.WorkloadMember)
			members[m.WorkloadID] = append(members[m.WorkloadID], m)
			insts = append(insts, m.InstanceID)
		}
		if err := load(e, eim.KindInstance, insts, e.insts); err != nil {
			return nil, err
		}
	}
	out := make([]eim.Resource, len(ws))
	for i, w := range ws {
		wc := clone(w)
		wc.AliasID = wc.ResourceID
		wc.Members = []*eim.WorkloadMember{}
		for _, m := range members[w.ResourceID] {
			mc := clone(m)
			mc.AliasID = mc.ResourceID
			mc.Workload = nil
			mc.Instance, mc.Member = e.plainInstance(m.InstanceID), e.plainInstance(m.InstanceID)
			wc.Members = append(wc.Members, mc)
		}
		out[i] = wc
	}
	return out, nil
}

// plainInstance is an instance's own fields, without related resources.
func (e *expander) plainInstance(id string) *eim.Instance {
	in := e.insts[id]
	if in == nil {
		return nil
	}
	out := clone(in)
	out.AliasID = out.ResourceID
	return out
}

// expandMembers returns workload members with their workload and their
// instance (expanded as an instance is, but without its memberships).
func (e *expander) expandMembers(ms []*eim.WorkloadMember) ([]eim.Resource, error) {
	if err := load(e, eim.KindWorkload, ids(ms, func(m *eim.WorkloadMember) string { return m.WorkloadID }), e.workloads); err != nil {
		return nil, err
	}
	if err := load(e, eim.KindInstance, ids(ms, func(m *eim.WorkloadMember) string { return m.InstanceID }), e.insts); err != nil {
		return nil, err
	}
	var is []*eim.Instance
	for _, m := range ms {
		if in := e.insts[m.InstanceID]; in != nil {
			is = append(is, in)
		}
	}
	if err := e.loadInstanceDeps(is); err != nil {
		return nil, err
	}
	out := make([]eim.Resource, len(ms))
	for i, m := range ms {
		mc := clone(m)
		mc.AliasID = mc.ResourceID
		mc.Workload = e.workloadByID(m.WorkloadID)
		mc.Instance, mc.Member = nil, nil
		if in := e.insts[m.InstanceID]; in != nil {
			// Two expansions, not one and its shallow copy: the answer
			// is a tree, so that nothing that fills in or trims the
			// copy for the wire (httpapi's emitRefs) meets a node twice.
			mc.Instance, mc.Member = e.instance(in), e.instance(in)
			mc.Instance.WorkloadMembers, mc.Member.WorkloadMembers = nil, nil
		}
		out[i] = mc
	}
	return out, nil
}

// loadPolicies loads OS update policies and their target OSes.
func (e *expander) loadPolicies(want []string) error {
	if err := load(e, eim.KindOSUpdatePolicy, want, e.policies); err != nil {
		return err
	}
	var oses []string
	for _, id := range want {
		if p := e.policies[id]; p != nil {
			oses = append(oses, p.TargetOsID)
		}
	}
	return load(e, eim.KindOS, oses, e.oses)
}

// policy is an OS update policy with its target OS.
func (e *expander) policy(p *eim.OSUpdatePolicy) *eim.OSUpdatePolicy {
	out := clone(p)
	out.TargetOs = e.osByID(p.TargetOsID)
	return out
}

func (e *expander) policyByID(id string) *eim.OSUpdatePolicy {
	if p := e.policies[id]; p != nil {
		return e.policy(p)
	}
	return nil
}

// run is an OS update run with its instance and the policy it applied.
func (e *expander) run(r *eim.OSUpdateRun) *eim.OSUpdateRun {
	out := clone(r)
	out.AppliedPolicy = e.policyByID(r.AppliedPolicyID)
	out.Instance = nil
	if in := e.insts[r.InstanceID]; in != nil {
		out.Instance = e.instance(in)
	}
	return out
}

func (e *expander) osByID(id string) *eim.OS {
	o := e.oses[id]
	if o == nil {
		return nil
	}
	out := clone(o)
	out.AliasID = out.ResourceID
	return out
}

func (e *expander) provider(p *eim.Provider) *eim.Provider {
	out := clone(p)
	out.AliasID = out.ResourceID
	return out
}

// inherited is what a resource with labels own shows as inheritedMetadata
// under ancestors whose effective labels are from: their labels without the
// keys the resource sets itself, as the original shows them (a key the
// resource overrides is not inherited).
func inherited(own, from eim.Metadata) eim.Metadata {
	out := eim.Metadata{}
	for _, it := range from {
		if _, ok := own.Get(it.Key); !ok {
			out = append(out, it)
		}
	}
	return out
}

// expand returns the wire view of items, all of kind k.
func (e *expander) expand(k eim.Kind, items []eim.Resource) ([]eim.Resource, error) {
	out := make([]eim.Resource, len(items))
	switch k {
	case eim.KindRegion:
		rs := typed[*eim.Region](items)
		if err := e.loadRegionChains(ids(rs, func(r *eim.Region) string { return r.ParentID })); err != nil {
			return nil, err
		}
		for i, r := range rs {
			out[i] = e.region(r, true)
		}
	case eim.KindSite:
		ss := typed[*eim.Site](items)
		if err := e.loadRegionChains(ids(ss, func(s *eim.Site) string { return s.RegionID })); err != nil {
			return nil, err
		}
		for i, s := range ss {
			out[i] = e.site(s)
		}
	case eim.KindHost:
		hs := typed[*eim.Host](items)
		if err := e.loadHostDeps(hs, true); err != nil {
			return nil, err
		}
		for i, h := range hs {
			out[i] = e.host(h, true)
		}
	case eim.KindInstance:
		is := typed[*eim.Instance](items)
		if err := e.loadInstanceDeps(is); err != nil {
			return nil, err
		}
		for i, in := range is {
			out[i] = e.instance(in)
		}
	case eim.KindSingleSchedule, eim.KindRepeatedSchedule:
		if err := e.loadScheduleTargets(items); err != nil {
			return nil, err
		}
		for i, r := range items {
			out[i] = e.schedule(r)
		}
	case eim.KindOSUpdatePolicy:
		ps := typed[*eim.OSUpdatePolicy](items)
		if err := load(e, eim.KindOS, ids(ps, func(p *eim.OSUpdatePolicy) string { return p.TargetOsID }), e.oses); err != nil {
			return nil, err
		}
		for i, p := range ps {
			out[i] = e.policy(p)
		}
	case eim.KindOSUpdateRun:
		rs := typed[*eim.OSUpdateRun](items)
		if err := load(e, eim.KindInstance, ids(rs, func(r *eim.OSUpdateRun) string { return r.InstanceID }), e.insts); err != nil {
			return nil, err
		}
		var is []*eim.Instance
		for _, id := range ids(rs, func(r *eim.OSUpdateRun) string { return r.InstanceID }) {
			if in := e.insts[id]; in != nil {
				is = append(is, in)
			}
		}
		if err := e.loadInstanceDeps(is); err != nil {
			return nil, err
		}
		if err := e.loadPolicies(ids(rs, func(r *eim.OSUpdateRun) string { return r.AppliedPolicyID })); err != nil {
			return nil, err
		}
		for i, r := range rs {
			out[i] = e.run(r)
		}
	case eim.KindWorkload:
		return e.expandWorkloads(typed[*eim.Workload](items))
	case eim.KindWorkloadMember:
		return e.expandMembers(typed[*eim.WorkloadMember](items))
	case eim.KindTelemetryProfile:
		ps := typed[*eim.TelemetryProfile](items)
		if err := load(e, eim.KindTelemetryGroup, ids(ps, (*eim.TelemetryProfile).GroupID), e.groups); err != nil {
			return nil, err
		}
		for i, p := range ps {
			out[i] = e.profile(p)
		}
	default:
		for i, r := range items {
			c := clone(r)
			setAlias(c)
			out[i] = c
		}
	}
	return out, nil
}

func (e *expander) loadInstanceDeps(is []*eim.Instance) error {
	if err := load(e, eim.KindHost, ids(is, func(in *eim.Instance) string { return in.HostID }), e.hosts); err != nil {
		return err
	}
	var hosts []*eim.Host
	for _, in := range is {
		if h := e.hosts[in.HostID]; h != nil {
			hosts = append(hosts, h)
		}
	}
	if err := e.loadHostDeps(hosts, false); err != nil {
		return err
	}
	if err := load(e, eim.KindOS, ids(is, func(in *eim.Instance) string { return in.OSID }), e.oses); err != nil {
		return err
	}
	if err := load(e, eim.KindLocalAccount, ids(is, func(in *eim.Instance) string { return in.LocalAccountID }), e.accounts); err != nil {
		return err
	}
	if err := e.loadPolicies(ids(is, func(in *eim.Instance) string { return in.OSUpdatePolicyID })); err != nil {
		return err
	}
	if err := e.loadMemberships(ids(is, func(in *eim.Instance) string { return in.ResourceID })); err != nil {
		return err
	}
	var cc []string
	for _, in := range is {
		cc = append(cc, in.CustomConfigIDs...)
	}
	return load(e, eim.KindCustomConfig, cc, e.configs)
}

func scheduleTargets(r eim.Resource) (host, site, region string) {
	switch s := r.(type) {
	case *eim.SingleSchedule:
		return s.TargetHostID, s.TargetSiteID, s.TargetRegionID
	case *eim.RepeatedSchedule:
		return s.TargetHostID, s.TargetSiteID, s.TargetRegionID
	}
	return "", "", ""
}

func (e *expander) loadScheduleTargets(items []eim.Resource) error {
	var hs, ss, rs []string
	for _, r := range items {
		h, s, g := scheduleTargets(r)
		hs, ss, rs = append(hs, h), append(ss, s), append(rs, g)
	}
	if err := load(e, eim.KindHost, hs, e.hosts); err != nil {
		return err
	}
	for _, id := range hs {
		if h := e.hosts[id]; h != nil {
			ss = append(ss, h.SiteID)
		}
	}
	if err := e.loadSites(ss); err != nil {
		return err
	}
	return e.loadRegionChains(rs)
}

func (e *expander) schedule(r eim.Resource) eim.Resource {
	switch s := r.(type) {
	case *eim.SingleSchedule:
		out := clone(s)
		out.AliasID = out.ResourceID
		out.TargetHost, out.TargetSite, out.TargetRegion = e.hostByID(s.TargetHostID), e.siteByID(s.TargetSiteID), e.regionByID(s.TargetRegionID)
		return out
	case *eim.RepeatedSchedule:
		out := clone(s)
		out.AliasID = out.ResourceID
		out.TargetHost, out.TargetSite, out.TargetRegion = e.hostByID(s.TargetHostID), e.siteByID(s.TargetSiteID), e.regionByID(s.TargetRegionID)
		return out
	}
	return r
}

// profile is a telemetry profile with its group, of its own variant.
func (e *expander) profile(p *eim.TelemetryProfile) *eim.TelemetryProfile {
	out := clone(p)
	setAlias(out)
	out.LogsGroup, out.MetricsGroup = nil, nil
	if g := e.groups[p.GroupID()]; g != nil {
		gc := clone(g)
		setAlias(gc)
		if p.Type == eim.TelemetryMetrics {
			out.MetricsGroup = gc
		} else {
			out.LogsGroup = gc
		}
	}
	return out
}

func (e *expander) hostByID(id string) *eim.Host {
	if h := e.hosts[id]; h != nil {
		return e.host(h, false)
	}
	return nil
}

func typed[T eim.Resource](items []eim.Resource) []T {
	out := make([]T, len(items))
	for i, r := range items {
		out[i] = r.(T)
	}
	return out
}

// setAlias fills the alias field (e.g. osResourceID) with the resource ID:
// the one of r's variant, for a kind with variants.
func setAlias(r eim.Resource) {
	sc := eim.SchemaOf(r.ResourceKind())
	variant := sc.VariantOf(r)
	for _, f := range sc.Fields {
		if f.Alias && f.In(variant) {
			f.Value(r).SetString(r.Base().ResourceID)
		}
	}
}

// expandOne returns the wire view of one resource.
func expandOne(ctx context.Context, tx eim.Tx, r eim.Resource) (eim.Resource, error) {
	out, err := newExpander(ctx, tx).expand(r.ResourceKind(), []eim.Resource{r})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}
