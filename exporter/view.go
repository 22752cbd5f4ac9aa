package exporter

import (
	"math"
	"time"

	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/window"
)

// view is one scrape's consistent picture: the records as they were when
// the scrape began, and what was derived from them at that instant.
type view struct {
	now      time.Time
	hosts    []hostView
	projects map[string]*projectRec
	trees    map[string]*tree
	// slots are the snapshot's change versions at that instant.
	slots [nSlots]uint64
}

// hostView is a host and what a scrape shows of it.
type hostView struct {
	h  *hostRec
	in *instanceRec // nil: no instance
	// maintenance: a window covers the host now.
	maintenance bool
}

// prov and update are the folded statuses of the host's instance (an
// instance's defaults without one).
func (hv *hostView) prov() uint8 {
	if hv.in == nil {
		return notProvisioned
	}
	return hv.in.prov
}

func (hv *hostView) update() uint8 {
	if hv.in == nil {
		return noCurrentUpdate
	}
	return hv.in.update
}

// Durations, in seconds; ok false when the host has not reached the
// end yet (or its timestamps are missing).

// onboardingDuration: from the host's registration (created) to its
// onboarding.
func (hv *hostView) onboardingDuration() (float64, bool) {
	h := hv.h
	return span(h.created, h.onboarded)
}

// provisioningDuration: from when the installation could start (the
// later of the host's onboarding and its instance's creation) to
// "Provisioned".
func (hv *hostView) provisioningDuration() (float64, bool) {
	if hv.in == nil || hv.h.onboarded == 0 {
		return 0, false
	}
	return span(max(hv.h.onboarded, hv.in.created), hv.in.provisioned)
}

// timeToRunning: from the host's registration to its instance RUNNING.
func (hv *hostView) timeToRunning() (float64, bool) {
	if hv.in == nil {
		return 0, false
	}
	return span(hv.h.created, hv.in.running)
}

// totalProvisioningTime (edge_host_total_provisioning_time): from the
// node's first call home to its instance RUNNING: the machine's own Day 0,
// what the original measured from its logs.
func (hv *hostView) totalProvisioningTime() (float64, bool) {
	if hv.in == nil || hv.h.firstContact == 0 {
		return 0, false
	}
	return span(hv.h.firstContact, hv.in.running)
}

// span is end-start, never negative (creation times have milliseconds,
// status times whole seconds); false when either is unknown.
func span(start, end float64) (float64, bool) {
	if start == 0 || end == 0 {
		return 0, false
	}
	return math.Max(0, end-start), true
}

// take copies what a scrape needs from the snapshot, under its lock, and
// works out which hosts a maintenance window covers at now.
func (s *Service) take(now time.Time) *view {
	sn := s.snap
	sn.mu.RLock()
	v := &view{now: now, projects: sn.projects, trees: sn.trees, hosts: make([]hostView, 0, len(sn.hosts))}
	for _, e := range sn.hosts {
		v.hosts = append(v.hosts, hostView{h: e.h, in: e.in})
	}
	// The maps are replaced, never changed in place, except trees, whose
	// entries are: copy it.
	v.trees = make(map[string]*tree, len(sn.trees))
	for p, t := range sn.trees {
		v.trees[p] = t
	}
	v.slots = sn.slots
	sn.mu.RUnlock()

	open := map[string]*openSet{}
	for p, t := range v.trees {
		open[p] = t.openAt(now.Unix())
	}
	for i := range v.hosts {
		hv := &v.hosts[i]
		if o := open[hv.h.project]; o != nil {
			hv.maintenance = o.covers(hv.h)
		}
	}
	return v
}

// openSet is what the windows open at an instant target: hosts, and sites
// (directly or through one of their regions).
type openSet struct {
	targets map[string]bool
	t       *tree
	sites   map[string]bool // memo of site → covered
}

// openAt returns the targets of t's windows open at unix second now (nil
// when none is).
func (t *tree) openAt(now int64) *openSet {
	targets := map[string]bool{}
	add := func(h, s, r string) {
		for _, id := range []string{h, s, r} {
			if id != "" {
				targets[id] = true
			}
		}
	}
	for _, s := range t.single {
		if open, _ := (window.Single{Start: int64(s.StartSeconds), End: int64(s.EndSeconds)}).OpenAt(now); open {
			add(s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
		}
	}
	for _, s := range t.repeated {
		if open, _ := inventory.RepeatedWindow(s).OpenAt(now); open {
			add(s.TargetHostID, s.TargetSiteID, s.TargetRegionID)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	return &openSet{targets: targets, t: t, sites: map[string]bool{}}
}

// covers reports whether an open window targets h, its site or a region
// above the site.
func (o *openSet) covers(h *hostRec) bool {
	if o == nil {
		return false
	}
	if o.targets[h.id] {
		return true
	}
	if h.site == "" {
		return false
	}
	if c, ok := o.sites[h.site]; ok {
		return c
	}
	c := o.targets[h.site]
	// Regions nest at most 5 deep; the bound also stops a cycle.
	for r, n := o.t.sites[h.site].region, 0; !c && r != "" && n < 16; r, n = o.t.regionParent[r], n+1 {
		c = o.targets[r]
	}
	o.sites[h.site] = c
	return c
}
