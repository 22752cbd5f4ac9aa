package exporter

import (
	"math"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
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
	h    *hostview.Host
	f    folds
	slot uint32 // slotOf(h.ID())
	// maintenance: a window covers the host now.
	maintenance bool
}

// folds are the host's (and its instance's) status texts folded to their
// sets' values, and whether each was recognised.
type folds struct {
	status, onboarding, prov, update         uint8
	statusOK, onboardingOK, provOK, updateOK bool
}

// fold sets hv.f from the host's texts; without an instance, the
// instance's are its defaults (and recognised).
func (hv *hostView) fold() {
	h := hv.h
	f := &hv.f
	f.status, f.statusOK = hostStatuses.fold(h.HostStatus())
	f.onboarding, f.onboardingOK = onboardingStatuses.fold(h.OnboardingStatus())
	if in := h.Instance(); in != nil {
		f.prov, f.provOK = provisioningStatuses.fold(in.ProvisioningStatus())
		f.update, f.updateOK = updateStatuses.fold(in.UpdateStatus())
	} else {
		f.prov, f.provOK, f.update, f.updateOK = notProvisioned, true, noCurrentUpdate, true
	}
}

func (hv *hostView) prov() uint8   { return hv.f.prov }
func (hv *hostView) update() uint8 { return hv.f.update }

// Times, in unix seconds; 0: not known (or not reached).

// created: the host's registration.
func (hv *hostView) created() float64 { return float64(hv.h.CreatedAt()) / 1000 }

// onboarded: when the host was onboarded.
func (hv *hostView) onboarded() float64 {
	h := hv.h
	if h.OnboardingStatus() == onboardingStatuses.values[1] && h.OnboardingStatusTimestamp() > 0 {
		return float64(h.OnboardingStatusTimestamp())
	}
	return 0
}

// firstContact: the node's first call home: the registration's match,
// else the onboarding (a device enrolled by token is registered and
// onboarded at once).
func (hv *hostView) firstContact() float64 {
	h := hv.h
	if h.RegistrationStatus() == statusRegistered && h.RegistrationStatusTimestamp() > 0 {
		return float64(h.RegistrationStatusTimestamp())
	}
	return hv.onboarded()
}

// instCreated: the instance's creation.
func (hv *hostView) instCreated() float64 {
	if in := hv.h.Instance(); in != nil {
		return float64(in.CreatedAt()) / 1000
	}
	return 0
}

// provisioned: "Provisioned" at.
func (hv *hostView) provisioned() float64 {
	if in := hv.h.Instance(); in != nil && in.ProvisioningStatus() == "Provisioned" && in.ProvisioningStatusTimestamp() > 0 {
		return float64(in.ProvisioningStatusTimestamp())
	}
	return 0
}

// running: RUNNING since (the instance's status time).
func (hv *hostView) running() float64 {
	if in := hv.h.Instance(); in != nil && in.CurrentState() == eim.InstanceStateRunning && in.InstanceStatusTimestamp() > 0 {
		return float64(in.InstanceStatusTimestamp())
	}
	return 0
}

// Durations, in seconds; ok false when the host has not reached the
// end yet (or its timestamps are missing).

// onboardingDuration: from the host's registration (created) to its
// onboarding.
func (hv *hostView) onboardingDuration() (float64, bool) {
	return span(hv.created(), hv.onboarded())
}

// provisioningDuration: from when the installation could start (the
// later of the host's onboarding and its instance's creation) to
// "Provisioned".
func (hv *hostView) provisioningDuration() (float64, bool) {
	if hv.h.Instance() == nil || hv.onboarded() == 0 {
		return 0, false
	}
	return span(max(hv.onboarded(), hv.instCreated()), hv.provisioned())
}

// timeToRunning: from the host's registration to its instance RUNNING.
func (hv *hostView) timeToRunning() (float64, bool) {
	if hv.h.Instance() == nil {
		return 0, false
	}
	return span(hv.created(), hv.running())
}

// totalProvisioningTime (edge_host_total_provisioning_time): from the
// node's first call home to its instance RUNNING: the machine's own Day 0,
// what the original measured from its logs.
func (hv *hostView) totalProvisioningTime() (float64, bool) {
	if hv.h.Instance() == nil || hv.firstContact() == 0 {
		return 0, false
	}
	return span(hv.firstContact(), hv.running())
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
	for _, x := range sn.hosts {
		v.hosts = append(v.hosts, hostView{h: x.h, f: x.f, slot: x.slot})
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
		if o := open[hv.h.Project()]; o != nil {
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
func (o *openSet) covers(h *hostview.Host) bool {
	if o == nil {
		return false
	}
	if o.targets[h.ID()] {
		return true
	}
	site := h.SiteID()
	if site == "" {
		return false
	}
	if c, ok := o.sites[site]; ok {
		return c
	}
	c := o.targets[site]
	// Regions nest at most 5 deep; the bound also stops a cycle.
	for r, n := o.t.sites[site].region, 0; !c && r != "" && n < 16; r, n = o.t.regionParent[r], n+1 {
		c = o.targets[r]
	}
	o.sites[site] = c
	return c
}
