package exporter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feedcache"
)

// The snapshot is what a scrape reads: a record per host and per
// instance, each project's UUID and settings, and each project's
// locations and schedules. Records are immutable once stored: a change
// stores a new record, so a scrape takes the pointers under the lock and
// renders without it.
type snapshot struct {
	mu        sync.RWMutex
	hosts     map[string]*hostEntry   // by host ID
	instances map[string]*instanceRec // by instance ID
	byHost    map[string]*instanceRec // by host ID (also of hosts not read yet)
	projects  map[string]*projectRec  // by name
	trees     map[string]*tree        // by project name
	loaded    bool                    // a full load finished
	// slots date the changes to the hosts, by slot of the host's ID
	// (slotOf): a host or its instance that changes (or comes, or goes)
	// sets its slot to the next version, a load sets every slot. A scrape
	// reuses the compressed per-host series of the slots whose versions
	// did not move (cache.go).
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

// hostEntry pairs a host with its instance, so that a scrape finds it
// without a lookup per host. It changes under the snapshot's lock.
type hostEntry struct {
	h  *hostRec
	in *instanceRec // nil: none
}

// hostRec is what the exporter keeps of a host.
type hostRec struct {
	id, project                  string
	name, uuid, serial, hostname string
	site                         string
	status, onboarding           uint8 // folded (statusSet indexes)
	statusOK, onboardingOK       bool  // the texts were recognised
	created                      float64
	onboarded, firstContact      float64 // unix seconds; 0: not known
	slot                         uint32  // slotOf(id)
	// labels caches the host's identity labels as the exposition shows
	// them (rendered on first use).
	labels atomic.Pointer[[]byte]
}

// instanceRec is what the exporter keeps of an instance.
type instanceRec struct {
	id, host             string
	prov, update         uint8
	provOK, updateOK     bool
	created, provisioned float64 // provisioned: "Provisioned" at; 0: not
	running              float64 // RUNNING since (instance status time); 0: not running
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
	return &snapshot{hosts: map[string]*hostEntry{}, instances: map[string]*instanceRec{}, byHost: map[string]*instanceRec{},
		projects: map[string]*projectRec{}, trees: map[string]*tree{}}
}

func newHostRec(h *eim.Host) *hostRec {
	r := &hostRec{id: h.ResourceID, project: h.Project, name: h.Name, uuid: h.UUID, serial: h.SerialNumber,
		hostname: h.Hostname, site: h.SiteID, created: unixSeconds(h.Timestamps.CreatedAt), slot: slotOf(h.ResourceID)}
	r.status, r.statusOK = hostStatuses.fold(h.HostStatus)
	r.onboarding, r.onboardingOK = onboardingStatuses.fold(h.OnboardingStatus)
	if h.OnboardingStatus == onboardingStatuses.values[1] && h.OnboardingStatusTimestamp > 0 {
		r.onboarded = float64(h.OnboardingStatusTimestamp)
	}
	// The first call home: the registration's match, else the onboarding
	// (a device enrolled by token is registered and onboarded at once).
	switch {
	case h.RegistrationStatus == statusRegistered && h.RegistrationStatusTimestamp > 0:
		r.firstContact = float64(h.RegistrationStatusTimestamp)
	case r.onboarded > 0:
		r.firstContact = r.onboarded
	}
	return r
}

// same reports whether h and o show the same (their labels cache aside).
func (h *hostRec) same(o *hostRec) bool {
	return h.id == o.id && h.project == o.project && h.name == o.name && h.uuid == o.uuid && h.serial == o.serial &&
		h.hostname == o.hostname && h.site == o.site && h.status == o.status && h.onboarding == o.onboarding &&
		h.statusOK == o.statusOK && h.onboardingOK == o.onboardingOK && h.created == o.created &&
		h.onboarded == o.onboarded && h.firstContact == o.firstContact
}

func newInstanceRec(in *eim.Instance) *instanceRec {
	r := &instanceRec{id: in.ResourceID, host: in.HostID, created: unixSeconds(in.Timestamps.CreatedAt)}
	r.prov, r.provOK = provisioningStatuses.fold(in.ProvisioningStatus)
	r.update, r.updateOK = updateStatuses.fold(in.UpdateStatus)
	if in.ProvisioningStatus == "Provisioned" && in.ProvisioningStatusTimestamp > 0 {
		r.provisioned = float64(in.ProvisioningStatusTimestamp)
	}
	if in.CurrentState == eim.InstanceStateRunning && in.InstanceStatusTimestamp > 0 {
		r.running = float64(in.InstanceStatusTimestamp)
	}
	return r
}

func unixSeconds(t eim.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}

// pageSize is how many hosts (or instances) a load reads per query.
const pageSize = 2000

// load reads everything afresh: projects, then every project's tree,
// hosts and instances (in pages, across projects).
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
	hosts := map[string]*hostEntry{}
	err = feedcache.Each(ctx, s.store, "", eim.KindHost, pageSize, func(r eim.Resource) {
		h := newHostRec(r.(*eim.Host))
		hosts[h.id] = &hostEntry{h: h}
	})
	if err != nil {
		return fmt.Errorf("read hosts: %w", err)
	}
	instances, byHost := map[string]*instanceRec{}, map[string]*instanceRec{}
	err = feedcache.Each(ctx, s.store, "", eim.KindInstance, pageSize, func(r eim.Resource) {
		in := newInstanceRec(r.(*eim.Instance))
		instances[in.id] = in
		byHost[in.host] = in
	})
	if err != nil {
		return fmt.Errorf("read instances: %w", err)
	}
	for id, e := range hosts {
		e.in = byHost[id]
	}
	sn := s.snap
	sn.mu.Lock()
	defer sn.mu.Unlock()
	sn.projects, sn.trees, sn.hosts, sn.instances, sn.byHost = projects, trees, hosts, instances, byHost
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

// The kinds whose events change the snapshot.
var feedKinds = []eim.Kind{eim.KindProject, eim.KindHost, eim.KindInstance,
	eim.KindSite, eim.KindRegion, eim.KindSingleSchedule, eim.KindRepeatedSchedule}

// getManyBatch bounds the IDs of one read of changed resources.
const getManyBatch = 500

// apply brings the snapshot up to date with a batch of events: what they
// name is read again (the feed carries no payload), hosts and instances
// with one query per kind and batch rather than one per event, a
// project's locations and schedules once per batch.
func (s *Service) apply(ctx context.Context, evs []eim.Event) error {
	var hostIDs, instIDs []string
	goneHosts, goneInsts := map[string]bool{}, map[string]bool{}
	treeOf := map[string]bool{}
	projectsChanged := false
	for _, ev := range evs {
		switch ev.Kind {
		case eim.KindProject:
			projectsChanged = true
			treeOf[ev.Project] = true
		case eim.KindHost:
			if ev.Op == eim.OpDeleted {
				goneHosts[ev.ID] = true
			} else {
				hostIDs = append(hostIDs, ev.ID)
				delete(goneHosts, ev.ID)
			}
		case eim.KindInstance:
			if ev.Op == eim.OpDeleted {
				goneInsts[ev.ID] = true
			} else {
				instIDs = append(instIDs, ev.ID)
				delete(goneInsts, ev.ID)
			}
		default:
			treeOf[ev.Project] = true
		}
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
	hosts, err := readMany(ctx, s.store, eim.KindHost, dedupe(hostIDs), func(r eim.Resource) *hostRec { return newHostRec(r.(*eim.Host)) })
	if err != nil {
		return err
	}
	insts, err := readMany(ctx, s.store, eim.KindInstance, dedupe(instIDs), func(r eim.Resource) *instanceRec { return newInstanceRec(r.(*eim.Instance)) })
	if err != nil {
		return err
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
	for id, h := range hosts {
		if h == nil {
			goneHosts[id] = true
			continue
		}
		if e := sn.hosts[id]; e != nil {
			// Most changes of a host (its hardware, its last-seen time)
			// change nothing shown: the record, and the series compressed
			// from it, stay.
			if !e.h.same(h) {
				e.h = h
				sn.touch(id)
			}
		} else {
			sn.hosts[id] = &hostEntry{h: h, in: sn.byHost[id]}
			sn.touch(id)
		}
	}
	for id := range goneHosts {
		if sn.hosts[id] != nil {
			delete(sn.hosts, id)
			sn.touch(id)
		}
	}
	for id, in := range insts {
		if in == nil {
			goneInsts[id] = true
			continue
		}
		old := sn.instances[id]
		if old != nil && *old == *in {
			continue
		}
		if old != nil && old.host != in.host {
			sn.unlink(old)
		}
		sn.instances[id], sn.byHost[in.host] = in, in
		if e := sn.hosts[in.host]; e != nil {
			e.in = in
		}
		sn.touch(in.host)
	}
	for id := range goneInsts {
		if old := sn.instances[id]; old != nil {
			delete(sn.instances, id)
			sn.unlink(old)
		}
	}
	return nil
}

// unlink forgets that instance in is its host's.
func (sn *snapshot) unlink(in *instanceRec) {
	sn.touch(in.host)
	if sn.byHost[in.host] == in {
		delete(sn.byHost, in.host)
	}
	if e := sn.hosts[in.host]; e != nil && e.in == in {
		e.in = nil
	}
}

// readMany reads the resources of kind k with the ids (any project), in
// batches, and returns a record per ID: nil for one that is gone.
func readMany[R any](ctx context.Context, st eim.Store, k eim.Kind, ids []string, rec func(eim.Resource) *R) (map[string]*R, error) {
	out := make(map[string]*R, len(ids))
	for chunk := range slices.Chunk(ids, getManyBatch) {
		var items []eim.Resource
		err := st.View(ctx, "", func(tx eim.Tx) error {
			var err error
			items, err = tx.GetMany(ctx, k, chunk)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read changed %s: %w", k, err)
		}
		for _, id := range chunk {
			out[id] = nil
		}
		for _, r := range items {
			out[r.Base().ResourceID] = rec(r)
		}
	}
	return out, nil
}

func dedupe(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}
