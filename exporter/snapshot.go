package exporter

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
)

// The snapshot is what a scrape reads: the hosts, as records of the
// process's read model (hostview.Host, with their instances), each
// project's UUID and settings, and each project's locations and
// schedules. The hosts' records are the view's own, never copies: the
// snapshot is a projection over the view (put), which tells it of each
// record replaced. Records are immutable: a scrape takes the pointers
// under the lock and renders without it.
type snapshot struct {
	mu       sync.RWMutex
	hosts    map[string]shownHost   // by host ID
	projects map[string]*projectRec // by name
	trees    map[string]*tree       // by project name
	loaded   bool                   // a full load finished
	// slots date the changes to the hosts, by slot of the host's ID
	// (slotOf): a host or its instance that changes what a scrape shows
	// (or comes, or goes) sets its slot to the next version, a load sets
	// every slot. A scrape reuses the compressed per-host series of the
	// slots whose versions did not move (cache.go).
	slots [nSlots]uint64
	ver   uint64
}

// nSlots is how many slots the hosts are dated by: the most buckets the
// per-host series are compressed in.
const nSlots = 8192

// slotOf returns the slot of a host ID (FNV-1a).
func slotOf(id string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return h & (nSlots - 1)
}

// touch dates a change to the host with the ID.
func (sn *snapshot) touch(id string) {
	sn.ver++
	sn.slots[slotOf(id)] = sn.ver
}

// projectRec is a project's UUID and whether its per-host series are off.
type projectRec struct {
	name, id   string
	perHostOff bool
}

// tree is a project's locations and maintenance windows: what decides
// whether a window covers a host (its own, its site's, or a region's up
// from the site).
type tree struct {
	sites        map[string]siteRec // by ID
	regionParent map[string]string
	single       []*eim.SingleSchedule
	repeated     []*eim.RepeatedSchedule
}

type siteRec struct{ name, region string }

// RegistrationStatus text of a host whose device called home and was
// matched (the onboarding module's); its timestamp is the first call.
const statusRegistered = "Host is Registered"

func newSnapshot() *snapshot {
	return &snapshot{hosts: map[string]shownHost{}, projects: map[string]*projectRec{}, trees: map[string]*tree{}}
}

// put replaces old (nil: none) by h (nil: none): the snapshot's
// projection over the host view. A change that shows nothing new (a
// hardware report, a heartbeat's time) leaves the slot, and the series
// compressed from it, as they are.
func (sn *snapshot) put(old, h *hostview.Host) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	switch {
	case h == nil:
		delete(sn.hosts, old.ID())
		sn.touch(old.ID())
	default:
		y := hostView{h: h}
		y.fold()
		if x, ok := sn.hosts[h.ID()]; !ok || !sameShown(hostView{h: x.h, f: x.f}, y) {
			sn.touch(h.ID())
		}
		sn.hosts[h.ID()] = shownHost{h: h, f: y.f, slot: slotOf(h.ID())}
	}
}

// shownHost is a host's record, its statuses folded and its slot, as a
// change left them: a scrape does not work them out again.
type shownHost struct {
	h    *hostview.Host
	f    folds
	slot uint32 // slotOf(h.ID())
}

// sameShown reports whether x and y show the same in a scrape.
func sameShown(x, y hostView) bool {
	a, b := x.h, y.h
	if a.ID() != b.ID() || a.Project() != b.Project() || a.Name() != b.Name() || a.UUID() != b.UUID() || a.SerialNumber() != b.SerialNumber() ||
		a.Hostname() != b.Hostname() || a.SiteID() != b.SiteID() || x.f != y.f || x.created() != y.created() ||
		x.onboarded() != y.onboarded() || x.firstContact() != y.firstContact() || (a.Instance() == nil) != (b.Instance() == nil) {
		return false
	}
	return a.Instance() == nil || (x.instCreated() == y.instCreated() && x.provisioned() == y.provisioned() && x.running() == y.running())
}

// load reads afresh the projects, then every project's tree (the hosts
// are the view's).
func (s *Service) load(ctx context.Context) error {
	projects, err := s.readProjects(ctx)
	if err != nil {
		return err
	}
	trees := map[string]*tree{}
	for name := range projects {
		t, err := s.readTree(ctx, name)
		if err != nil {
			return err
		}
		trees[name] = t
	}
	sn := s.snap
	sn.mu.Lock()
	defer sn.mu.Unlock()
	sn.projects, sn.trees = projects, trees
	sn.loaded = true
	sn.ver++
	for i := range sn.slots {
		sn.slots[i] = sn.ver
	}
	return nil
}

// readProjects reads every project.
func (s *Service) readProjects(ctx context.Context) (map[string]*projectRec, error) {
	ps, err := s.store.ListProjects(ctx)
	if err != nil {
		return nil, fmt.Errorf("read projects: %w", err)
	}
	out := make(map[string]*projectRec, len(ps))
	for _, p := range ps {
		out[p.Name] = &projectRec{name: p.Name, id: p.ID, perHostOff: p.Settings.ExporterPerHostOff}
	}
	return out, nil
}

// refreshProjects reads the projects again, for their settings.
func (s *Service) refreshProjects(ctx context.Context) error {
	projects, err := s.readProjects(ctx)
	if err != nil {
		return err
	}
	sn := s.snap
	sn.mu.Lock()
	defer sn.mu.Unlock()
	// A new map, not a change of the old one in place: a scrape's view
	// holds the old one and reads it without the lock (see take).
	next := make(map[string]*projectRec, len(sn.projects))
	for name, p := range sn.projects {
		next[name] = p
		// A project created since the last batch waits for its event
		// (which reads its tree too).
		if fresh := projects[name]; fresh != nil {
			next[name] = fresh
		}
	}
	sn.projects = next
	return nil
}

// readTree reads a project's sites, regions and schedules.
func (s *Service) readTree(ctx context.Context, project string) (*tree, error) {
	t := &tree{sites: map[string]siteRec{}, regionParent: map[string]string{}}
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		for _, k := range []eim.Kind{eim.KindSite, eim.KindRegion, eim.KindSingleSchedule, eim.KindRepeatedSchedule} {
			items, _, err := tx.List(ctx, k, eim.Query{NoTotal: true})
			if err != nil {
				return err
			}
			for _, r := range items {
				switch x := r.(type) {
				case *eim.Site:
					t.sites[x.ResourceID] = siteRec{name: x.Name, region: x.RegionID}
				case *eim.Region:
					t.regionParent[x.ResourceID] = x.ParentID
				case *eim.SingleSchedule:
					t.single = append(t.single, x)
				case *eim.RepeatedSchedule:
					t.repeated = append(t.repeated, x)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the locations and schedules of project %s: %w", project, err)
	}
	return t, nil
}

// The kinds whose events change the snapshot (the hosts' and instances'
// reach it through the host view).
var feedKinds = []eim.Kind{eim.KindProject, eim.KindSite, eim.KindRegion, eim.KindSingleSchedule, eim.KindRepeatedSchedule}

// apply brings the snapshot up to date with a batch of events: a
// project's locations and schedules are read again once per batch, the
// projects when one changed.
func (s *Service) apply(ctx context.Context, evs []eim.Event) error {
	treeOf := map[string]bool{}
	projectsChanged := false
	for _, ev := range evs {
		if ev.Kind == eim.KindProject {
			projectsChanged = true
		}
		treeOf[ev.Project] = true
	}
	var projects map[string]*projectRec
	if projectsChanged {
		var err error
		if projects, err = s.readProjects(ctx); err != nil {
			return err
		}
	}
	trees := map[string]*tree{}
	for p := range treeOf {
		if projects != nil && projects[p] == nil {
			continue // deleted
		}
		t, err := s.readTree(ctx, p)
		if err != nil {
			return err
		}
		trees[p] = t
	}

	sn := s.snap
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if projects != nil {
		sn.projects = projects
		// A project deleted takes everything in it along (its resources'
		// delete events came first; this is for a batch cut between them).
		for p := range sn.trees {
			if projects[p] == nil {
				delete(sn.trees, p)
			}
		}
	}
	maps.Copy(sn.trees, trees)
	return nil
}
