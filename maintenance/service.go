// Package maintenance is EIM's maintenance module: each node's maintenance
// plan (the windows of the schedules that target its host, its site or
// the site's regions, and its instance's OS update policy), and the
// updates nodes report — the instance's update status and an OS update
// run per update.
//
// Heartbeats carry the plan's version, so a node learns of a change within
// one heartbeat; that must not cost a database read, so, as the telemetry
// module does, the module keeps each project's tree (schedules, regions,
// sites, policies, OSes) and each host's instance facts (instance, OS,
// policy) in memory while it follows the change feed, and drops what the
// feed says changed; each host's site it reads from the process's host
// view (package hostview), whose change of a host drops the plan computed
// from it.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/feedcache"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/internal/intern"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/southbound"
)

// Options configure a Service. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
	Now     func() time.Time
	// RetryWait is the first pause before Run follows the feed again
	// after it failed (default 1 s, growing with failures in a row: see
	// feed.Options.MinWait); the caches are off meanwhile.
	RetryWait time.Duration
	// Hosts is the process's shared per-host view (each host's site);
	// nil: the service keeps a view of its own, which Run follows.
	Hosts *hostview.View
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

	hosts    *hostview.View
	ownHosts bool
	slot     hostview.Slot // a host's plan, on its view

	// primed reads every instance of a project, once per feed
	// generation, the first time one of its hosts is asked for.
	primed feedcache.Loader[bool]

	mu       sync.Mutex
	insts    map[string]*hostState // by host ID
	instHost map[string]string     // instance ID → host ID, of known hosts
	// seq counts drops; dropped holds each host's last, and allDropped the
	// last that may touch any host (an instance not known): a scan tells
	// only the hosts not dropped since it started.
	seq        uint64
	dropped    map[string]uint64
	allDropped uint64
}

var _ maintenancev1connect.MaintenanceServiceHandler = (*Service)(nil)

// hostState is what the module keeps of one host beside the host view:
// its instance's facts. Guarded by Service.mu, but gen is read without
// it (memo).
type hostState struct {
	gen     atomic.Uint64 // bumped when the host's instance changed or the host went
	inst    instFacts
	project string // one copy for the process (shared)
	known   bool   // inst holds the host's instance (or none)
}

// memo is a host's plan, kept on its host view: computed from the host's
// facts it is kept on, its instance facts at generation instGen of hs and
// tree generation treeGen.
type memo struct {
	hs      *hostState
	instGen uint64
	treeGen uint64
	plan    *maintenancev1.GetPlanResponse
	version string
}

// instFacts are the facts of a host's instance; zero: none. The OS and
// the policy, which many instances share, are interned: one copy for the
// process instead of one per host of 100,000 (wide holds them in the
// rare case the process's table is full).
type instFacts struct {
	InstanceID string
	os, policy intern.Ref
	wide       *[2]string
}

// factsOf returns in's facts.
func factsOf(in *eim.Instance) instFacts {
	f := instFacts{InstanceID: in.ResourceID}
	var ok1, ok2 bool
	f.os, ok1 = intern.Of(in.OSID)
	f.policy, ok2 = intern.Of(in.OSUpdatePolicyID)
	if !ok1 || !ok2 {
		f.os, f.policy, f.wide = 0, 0, &[2]string{in.OSID, in.OSUpdatePolicyID}
	}
	return f
}

func (f instFacts) osID() string {
	if f.wide != nil {
		return f.wide[0]
	}
	return f.os.String()
}

func (f instFacts) policyID() string {
	if f.wide != nil {
		return f.wide[1]
	}
	return f.policy.String()
}

// shared returns s, or the process's copy of it when it has one (see
// package intern).
func shared(s string) string {
	if r, ok := intern.Of(s); ok {
		return r.String()
	}
	return s
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Store == nil {
		panic("maintenance.New: Store is required")
	}
	s := &Service{store: opts.Store, log: opts.Logger, now: opts.Now,
		insts: map[string]*hostState{}, instHost: map[string]string{}, dropped: map[string]uint64{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.hosts, s.ownHosts = hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: s.log, Now: s.now})
	s.slot = s.hosts.NewSlot()
	s.hosts.OnChange(func(_, id string, deleted bool) {
		if deleted {
			s.forget(id)
		}
	})
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
	s.primed.Load = s.scanInstances
	s.feed = feed.New(feed.Options{Store: opts.Store, Name: "maintenance", Logger: s.log, Metrics: opts.Metrics, MinWait: opts.RetryWait,
		Kinds: append([]eim.Kind{eim.KindInstance}, treeKinds...), Reset: s.dropAll,
		Handle: func(_ context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				if ev.Kind == eim.KindInstance {
					s.dropInstance(ev.Project, ev.ID)
				} else {
					s.trees.Drop(ev.Project)
				}
			}
			return nil
		}})
	return s
}

// treeKinds are the kinds whose changes drop a project's tree.
var treeKinds = []eim.Kind{eim.KindSingleSchedule, eim.KindRepeatedSchedule, eim.KindRegion, eim.KindSite, eim.KindOSUpdatePolicy, eim.KindOS}

// Run follows the change feed and drops what changed from the caches
// (and follows the service's own host view, when it has one), until ctx
// ends (it then returns nil); while the feed is lost, plans are read
// afresh. It may be called once.
func (s *Service) Run(ctx context.Context) error {
	return hostview.RunAlong(ctx, s.hosts, s.ownHosts, s.feed.Run)
}

func (s *Service) dropAll() {
	s.trees.DropAll()
	s.primed.DropAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.allDropped = s.seq
	clear(s.dropped)
	for _, hs := range s.insts {
		hs.gen.Add(1)
		hs.known = false
	}
	clear(s.instHost)
}

// forget drops a deleted host.
func (s *Service) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHostLocked(id, true)
}

func (s *Service) dropHostLocked(id string, deleted bool) {
	s.seq++
	s.dropped[id] = s.seq
	hs := s.insts[id]
	if hs == nil {
		return
	}
	if hs.inst.InstanceID != "" {
		delete(s.instHost, hs.inst.InstanceID)
	}
	hs.gen.Add(1)
	hs.known = false
	if deleted {
		delete(s.insts, id)
	}
}

// dropInstance drops the host of a changed instance. An instance not
// known (a new one) may belong to any known host of its project that had
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
	for hid, hs := range s.insts {
		if hs.project == project && hs.known && hs.inst.InstanceID == "" {
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
	if !s.feed.Live() || !s.hosts.Live() {
		return s.planUncached(ctx, project, hostID)
	}
	h, err := s.hosts.Host(ctx, project, hostID)
	if err != nil {
		return nil, "", err
	}
	if m, ok := h.Memo(s.slot).(*memo); ok && m.hs.gen.Load() == m.instGen && s.trees.Current(project, m.treeGen) {
		return m.plan, m.version, nil // the heartbeats' path
	}
	tree, treeGen, err := s.trees.Get(ctx, project)
	if err != nil {
		return nil, "", err
	}
	inst, hs, instGen, err := s.instanceOf(ctx, project, hostID)
	if err != nil {
		return nil, "", err
	}
	p, v := tree.Plan(Facts{HostID: hostID, SiteID: h.SiteID(), InstanceID: inst.InstanceID, OSID: inst.osID(), Policy: inst.policyID()})
	s.mu.Lock()
	if s.trees.Current(project, treeGen) && s.insts[hostID] == hs && hs.gen.Load() == instGen && hs.known {
		h.SetMemo(s.slot, &memo{hs: hs, instGen: instGen, treeGen: treeGen, plan: p, version: v})
	}
	s.mu.Unlock()
	return p, v, nil
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

// scanInstances fills the instance facts of every host of the project
// that has an instance and is not known, from a paged scan instead of a
// read per host: after a restart a whole fleet heartbeats within one
// interval. Hosts dropped while it scans, and hosts without an instance
// (few once a fleet runs), are left to be read on their own. A failed
// scan is not retried before the feed restarts.
func (s *Service) scanInstances(ctx context.Context, project string) (bool, error) {
	ctx = context.WithoutCancel(ctx) // the first heartbeat's: the scan serves all
	s.mu.Lock()
	start := s.seq
	s.mu.Unlock()
	byHost := map[string]instFacts{}
	err := feedcache.Each(ctx, s.store, project, eim.KindInstance, 2000, func(r eim.Resource) {
		in := r.(*eim.Instance)
		if _, ok := byHost[in.HostID]; !ok {
			byHost[in.HostID] = factsOf(in)
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("maintenance: instances not read ahead", "project", project, "err", err)
		}
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.allDropped > start {
		return true, nil
	}
	for id, f := range byHost {
		if s.dropped[id] > start {
			continue
		}
		hs := s.insts[id]
		if hs == nil {
			hs = &hostState{project: shared(project)}
			s.insts[id] = hs
		}
		if hs.known || hs.project != project {
			continue
		}
		hs.inst, hs.known = f, true
		s.instHost[f.InstanceID] = id
	}
	return true, nil
}

// instanceOf returns the facts of the host's instance, the host's entry
// and its generation.
func (s *Service) instanceOf(ctx context.Context, project, hostID string) (instFacts, *hostState, uint64, error) {
	if !s.primed.Cached(project) {
		s.primed.Get(ctx, project) // errors are logged by scanInstances
	}
	s.mu.Lock()
	hs := s.insts[hostID]
	if hs != nil && hs.known && hs.project == project {
		f, gen := hs.inst, hs.gen.Load()
		s.mu.Unlock()
		return f, hs, gen, nil
	}
	if hs == nil || hs.project != project {
		hs = &hostState{project: shared(project)}
		s.insts[hostID] = hs
	}
	gen := hs.gen.Load()
	s.mu.Unlock()

	var f instFacts
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		in, err := instanceOf(ctx, tx, hostID)
		if in != nil {
			f = factsOf(in)
		}
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return instFacts{}, nil, 0, err
	}
	if s.insts[hostID] == hs && hs.gen.Load() == gen {
		hs.inst, hs.known = f, true
		if f.InstanceID != "" {
			s.instHost[f.InstanceID] = hostID
		}
	}
	return f, hs, gen, nil
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
