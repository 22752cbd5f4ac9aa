// Package maintenance is EIM's maintenance module: each node's maintenance
// plan (the windows of the schedules that target its host, its site or
// the site's regions, and its instance's OS update policy), and the
// updates nodes report — the instance's update status and an OS update
// run per update.
//
// Heartbeats carry the plan's version, so a node learns of a change within
// one heartbeat; that must not cost a database read, so, as the telemetry
// module does, the module keeps each project's tree (schedules, regions,
// sites, policies, OSes) and each host's facts (site, instance, OS,
// policy) in memory while it follows the change feed, and drops what the
// feed says changed.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/feedcache"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/southbound"
)

// Options configure a Service. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	Now    func() time.Time
	// RetryWait is the first pause before Run follows the feed again
	// after it failed (default 1 s, growing with failures in a row: see
	// feed.Options.MinWait); the caches are off meanwhile.
	RetryWait time.Duration
}

// Service serves MaintenanceService and the plan versions of heartbeats.
// Its methods work before Run is called, but cache nothing until Run
// follows the change feed.
type Service struct {
	store eim.Store
	log   *slog.Logger
	now   func() time.Time

	feed  *feed.Runner
	trees feedcache.Loader[*Tree] // by project

	// primed fills every host's facts of a project in a few scans, once
	// per feed generation, the first time one of its hosts is asked for.
	primed feedcache.Loader[bool]

	mu       sync.Mutex
	hosts    map[string]*hostState // by host ID
	instHost map[string]string     // instance ID → host ID, of cached hosts
	// seq counts drops; dropped holds each host's last, and allDropped the
	// last that may touch any host (an instance not cached): a scan fills
	// only the hosts not dropped since it started.
	seq        uint64
	dropped    map[string]uint64
	allDropped uint64
}

var _ maintenancev1connect.MaintenanceServiceHandler = (*Service)(nil)

type hostState struct {
	project string
	gen     uint64
	known   bool
	facts   Facts
	treeGen uint64
	plan    *maintenancev1.GetPlanResponse
	version string
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Store == nil {
		panic("maintenance.New: Store is required")
	}
	s := &Service{store: opts.Store, log: opts.Logger, now: opts.Now,
		hosts: map[string]*hostState{}, instHost: map[string]string{}, dropped: map[string]uint64{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.trees.Load = func(ctx context.Context, project string) (*Tree, error) {
		var tree *Tree
		err := s.store.View(ctx, project, func(tx eim.Tx) error {
			var err error
			tree, err = LoadTree(ctx, tx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("load the maintenance tree of %s: %w", project, err)
		}
		return tree, nil
	}
	s.primed.Load = s.prime
	s.feed = feed.New(feed.Options{Store: opts.Store, Name: "maintenance", Logger: s.log, MinWait: opts.RetryWait,
		Kinds: append([]eim.Kind{eim.KindHost, eim.KindInstance}, treeKinds...), Reset: s.dropAll,
		Handle: func(_ context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				s.event(ev)
			}
			return nil
		}})
	return s
}

// treeKinds are the kinds whose changes drop a project's tree.
var treeKinds = []eim.Kind{eim.KindSingleSchedule, eim.KindRepeatedSchedule, eim.KindRegion, eim.KindSite, eim.KindOSUpdatePolicy, eim.KindOS}

// Run follows the change feed and drops what changed from the caches,
// until ctx ends (it then returns nil); while the feed is lost, plans are
// read afresh. It may be called once.
func (s *Service) Run(ctx context.Context) error { return s.feed.Run(ctx) }

func (s *Service) event(ev eim.Event) {
	switch ev.Kind {
	case eim.KindHost:
		s.dropHost(ev.ID, ev.Op == eim.OpDeleted)
	case eim.KindInstance:
		s.dropInstance(ev.Project, ev.ID)
	default:
		s.trees.Drop(ev.Project)
	}
}

func (s *Service) dropAll() {
	s.trees.DropAll()
	s.primed.DropAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.allDropped = s.seq
	clear(s.dropped)
	for _, hs := range s.hosts {
		hs.gen++
		hs.known, hs.plan = false, nil
	}
	clear(s.instHost)
}

func (s *Service) dropHost(id string, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHostLocked(id, deleted)
}

func (s *Service) dropHostLocked(id string, deleted bool) {
	s.seq++
	s.dropped[id] = s.seq
	hs := s.hosts[id]
	if hs == nil {
		return
	}
	if hs.facts.InstanceID != "" {
		delete(s.instHost, hs.facts.InstanceID)
	}
	if deleted {
		delete(s.hosts, id)
		return
	}
	hs.gen++
	hs.known, hs.plan = false, nil
}

// dropInstance drops the host of a changed instance. An instance not
// cached (a new one) may belong to any cached host of its project that had
// none: those are dropped, few (hosts heartbeat once they have one).
func (s *Service) dropInstance(project, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.instHost[id]; ok {
		s.dropHostLocked(h, false)
		return
	}
	s.seq++
	s.allDropped = s.seq
	for hid, hs := range s.hosts {
		if hs.project == project && hs.known && hs.facts.InstanceID == "" {
			s.dropHostLocked(hid, false)
		}
	}
}

// Version returns the version of the host's plan, "" when it cannot be
// read (logged). Once cached it costs no database access: heartbeats call
// it.
func (s *Service) Version(ctx context.Context, project, hostID string) string {
	_, v, err := s.Plan(ctx, project, hostID)
	if err != nil {
		if ctx.Err() == nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			s.log.Warn("maintenance: plan of a host", "host", hostID, "project", project, "err", err)
		}
		return ""
	}
	return v
}

// Plan returns the host's plan and its version. The host must be in
// project (ENOTFOUND otherwise).
func (s *Service) Plan(ctx context.Context, project, hostID string) (*maintenancev1.GetPlanResponse, string, error) {
	if project == "" {
		return nil, "", eim.Errorf(eim.EINVALID, "project is required")
	}
	if !s.feed.Live() {
		return s.planUncached(ctx, project, hostID)
	}
	if p, v, ok := s.cached(project, hostID); ok {
		return p, v, nil
	}
	tree, treeGen, err := s.trees.Get(ctx, project)
	if err != nil {
		return nil, "", err
	}
	facts, hostGen, err := s.hostFacts(ctx, project, hostID)
	if err != nil {
		return nil, "", err
	}
	p, v := tree.Plan(facts)
	s.mu.Lock()
	if hs := s.hosts[hostID]; s.trees.Current(project, treeGen) && hs != nil && hs.gen == hostGen && hs.known {
		hs.plan, hs.version, hs.treeGen = p, v, treeGen
	}
	s.mu.Unlock()
	return p, v, nil
}

// cached returns the host's plan when nothing it depends on changed since
// it was computed: the heartbeats' path.
func (s *Service) cached(project, hostID string) (*maintenancev1.GetPlanResponse, string, bool) {
	s.mu.Lock()
	hs := s.hosts[hostID]
	if hs == nil || !hs.known || hs.project != project || hs.plan == nil {
		s.mu.Unlock()
		return nil, "", false
	}
	p, v, gen := hs.plan, hs.version, hs.treeGen
	s.mu.Unlock()
	if !s.trees.Current(project, gen) {
		return nil, "", false
	}
	return p, v, true
}

func (s *Service) planUncached(ctx context.Context, project, hostID string) (*maintenancev1.GetPlanResponse, string, error) {
	var tree *Tree
	var f Facts
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		if f, err = ReadFacts(ctx, tx, hostID); err != nil {
			return err
		}
		tree, err = LoadTree(ctx, tx)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	p, v := tree.Plan(f)
	return p, v, nil
}

// prime fills the facts of every host of the project that is not cached,
// from two paged scans (hosts, instances) instead of a read per host: after
// a restart a whole fleet heartbeats within one interval. Hosts dropped by
// the feed while it scans are left to be read on their own.
func (s *Service) prime(ctx context.Context, project string) (bool, error) {
	ctx = context.WithoutCancel(ctx) // the first heartbeat's: the scan serves all
	s.mu.Lock()
	start := s.seq
	s.mu.Unlock()
	facts := map[string]*Facts{}
	err := feedcache.Each(ctx, s.store, project, eim.KindHost, 2000, func(r eim.Resource) {
		h := r.(*eim.Host)
		facts[h.ResourceID] = &Facts{HostID: h.ResourceID, SiteID: h.SiteID}
	})
	if err == nil {
		err = feedcache.Each(ctx, s.store, project, eim.KindInstance, 2000, func(r eim.Resource) {
			in := r.(*eim.Instance)
			if f := facts[in.HostID]; f != nil && f.InstanceID == "" {
				f.InstanceID, f.OSID, f.Policy = in.ResourceID, in.OSID, in.OSUpdatePolicyID
			}
		})
	}
	if err != nil {
		// Not retried before the feed restarts: the hosts are read one
		// by one meanwhile.
		if ctx.Err() == nil {
			s.log.Warn("maintenance: hosts not read ahead", "project", project, "err", err)
		}
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.allDropped > start {
		return true, nil
	}
	for id, f := range facts {
		if s.dropped[id] > start {
			continue
		}
		hs := s.hosts[id]
		if hs == nil {
			hs = &hostState{project: project}
			s.hosts[id] = hs
		}
		if hs.known || hs.project != project {
			continue
		}
		hs.facts, hs.known = *f, true
		if f.InstanceID != "" {
			s.instHost[f.InstanceID] = id
		}
	}
	return true, nil
}

// hostFacts returns the host's facts and its entry's generation.
func (s *Service) hostFacts(ctx context.Context, project, hostID string) (Facts, uint64, error) {
	if !s.primed.Cached(project) {
		s.primed.Get(ctx, project) // errors are logged by prime
	}
	s.mu.Lock()
	hs := s.hosts[hostID]
	if hs != nil && hs.known && hs.project == project {
		f, gen := hs.facts, hs.gen
		s.mu.Unlock()
		return f, gen, nil
	}
	if hs == nil || hs.project != project {
		hs = &hostState{project: project}
		s.hosts[hostID] = hs
	}
	gen := hs.gen
	s.mu.Unlock()

	var f Facts
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		f, err = ReadFacts(ctx, tx, hostID)
		return err
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND && s.hosts[hostID] == hs {
			delete(s.hosts, hostID)
		}
		return Facts{}, 0, err
	}
	if s.hosts[hostID] == hs && hs.gen == gen {
		hs.facts, hs.known = f, true
		if f.InstanceID != "" {
			s.instHost[f.InstanceID] = hostID
		}
	}
	return f, gen, nil
}

// GetPlan implements MaintenanceServiceHandler.
func (s *Service) GetPlan(ctx context.Context, req *connect.Request[maintenancev1.GetPlanRequest]) (*connect.Response[maintenancev1.GetPlanResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Msg.Version) > 128 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("version: longer than 128 bytes"))
	}
	p, v, err := s.Plan(ctx, n.Project, n.HostID)
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "maintenance: get plan", err)
	}
	if req.Msg.Version == v {
		return connect.NewResponse(&maintenancev1.GetPlanResponse{Version: v, Unchanged: true}), nil
	}
	return connect.NewResponse(p), nil
}
