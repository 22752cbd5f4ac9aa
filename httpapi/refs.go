package httpapi

import "github.com/eimhq/eim"

// The original's gateway emitted every field of its messages, and its
// converters built some nested references even when there was nothing to
// refer to: a region's parentRegion, a site's region, an OS update run's
// appliedPolicy and instance are objects with every field at its zero value
// when absent; a region's totalSites is 0 when not asked for; an instance's
// customConfig and customConfigID are [] when empty. Clients generated from
// its document dereference these without checking, so the API emits them
// the same way. The other nested references (a host's site, provider and
// instance; an instance's host, os, localaccount and updatePolicy; a
// policy's targetOs) are null when absent, as there.
//
// emitRefs fills them in on the expanded copy the inventory returned for
// this response, just before it is encoded: a few pointer checks per
// resource, no copy of it.
//
// The empty objects of one response are shared: encoding only reads them.
type emitRefs struct {
	// depth is how deep the walk is; it stops at maxRefDepth, so that
	// a cycle (a bug) is left to the encoder, which refuses it with an
	// error, rather than recursing here until the stack overflows, which
	// would end the process.
	depth      int
	zero       int
	noRegion   *eim.Region
	noInstance *eim.Instance
	noPolicy   *eim.OSUpdatePolicy
}

// maxRefDepth bounds the walk: an answer nests a few levels deep (a
// member's instance's host's site's region's parent).
const maxRefDepth = 32

// enter descends one level, and reports whether the walk may go on; the
// caller leaves with defer e.leave() either way.
func (e *emitRefs) enter() bool {
	e.depth++
	return e.depth <= maxRefDepth
}

func (e *emitRefs) leave() { e.depth-- }

func (e *emitRefs) resource(r eim.Resource) {
	switch v := r.(type) {
	case *eim.Region:
		e.region(v)
	case *eim.Site:
		e.site(v)
	case *eim.Host:
		e.host(v)
	case *eim.Instance:
		e.instance(v)
	case *eim.Workload:
		e.workload(v)
	case *eim.WorkloadMember:
		e.member(v)
	case *eim.SingleSchedule:
		e.targets(v.TargetHost, v.TargetSite, v.TargetRegion)
	case *eim.RepeatedSchedule:
		e.targets(v.TargetHost, v.TargetSite, v.TargetRegion)
	case *eim.OSUpdatePolicy:
		// targetOs: null when absent, as in the original.
	case *eim.OSUpdateRun:
		if v.AppliedPolicy == nil {
			if e.noPolicy == nil {
				e.noPolicy = &eim.OSUpdatePolicy{UpdateSources: []string{}}
			}
			v.AppliedPolicy = e.noPolicy
		}
		if v.Instance == nil {
			v.Instance = e.emptyInstance()
		} else {
			e.instance(v.Instance)
		}
	}
}

// emptyRegion is what the original sends for a region that is not there.
func (e *emitRefs) emptyRegion() *eim.Region {
	if e.noRegion == nil {
		e.noRegion = &eim.Region{TotalSites: &e.zero}
	}
	return e.noRegion
}

func (e *emitRefs) emptyInstance() *eim.Instance {
	if e.noInstance == nil {
		e.noInstance = &eim.Instance{CustomConfigIDs: []string{}, CustomConfigs: []*eim.CustomConfig{}, WorkloadMembers: []*eim.WorkloadMember{}}
	}
	return e.noInstance
}

func (e *emitRefs) region(r *eim.Region) {
	defer e.leave()
	if !e.enter() {
		return
	}
	if r == e.noRegion {
		// The shared empty region ends the chain (its parentRegion is
		// null, as the original's): filling it in would make it its own
		// parent, a cycle, when a second path reaches it.
		return
	}
	if r.TotalSites == nil {
		r.TotalSites = &e.zero
	}
	if r.ParentRegion == nil {
		r.ParentRegion = e.emptyRegion()
	} else {
		e.region(r.ParentRegion)
	}
}

func (e *emitRefs) site(s *eim.Site) {
	if s.Region == nil {
		s.Region = e.emptyRegion()
	} else {
		e.region(s.Region)
	}
}

func (e *emitRefs) host(h *eim.Host) {
	defer e.leave()
	if !e.enter() {
		return
	}
	if h.Site != nil {
		e.site(h.Site)
	}
	if h.Instance != nil {
		e.instance(h.Instance)
	}
}

func (e *emitRefs) instance(in *eim.Instance) {
	defer e.leave()
	if !e.enter() {
		return
	}
	if in.CustomConfigIDs == nil {
		in.CustomConfigIDs = []string{}
	}
	if in.CustomConfigs == nil {
		in.CustomConfigs = []*eim.CustomConfig{}
	}
	if in.WorkloadMembers == nil {
		in.WorkloadMembers = []*eim.WorkloadMember{}
	}
	if in.Host != nil {
		e.host(in.Host)
	}
}

func (e *emitRefs) workload(w *eim.Workload) {
	if w.Members == nil {
		w.Members = []*eim.WorkloadMember{}
	}
	for _, m := range w.Members {
		e.member(m)
	}
}

func (e *emitRefs) member(m *eim.WorkloadMember) {
	defer e.leave()
	if !e.enter() {
		return
	}
	for _, in := range []*eim.Instance{m.Instance, m.Member} {
		if in != nil {
			e.instance(in)
		}
	}
	// A member's workload is shown without its members (null: not
	// expanded, rather than [] for "none").
}

func (e *emitRefs) targets(h *eim.Host, s *eim.Site, r *eim.Region) {
	if h != nil {
		e.host(h)
	}
	if s != nil {
		e.site(s)
	}
	if r != nil {
		e.region(r)
	}
}
