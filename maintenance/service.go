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
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/southbound"
)

// Options configure a Service. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	Now    func() time.Time
	// RetryWait is how long Run waits to follow the feed again after it
	// failed (default 2 s); the caches are off meanwhile.
	RetryWait time.Duration
}

// Service serves MaintenanceService and the plan versions of heartbeats.
// Its methods work before Run is called, but cache nothing until Run
// follows the change feed.
type Service struct {
	store eim.Store
	log   *slog.Logger
	now   func() time.Time
	retry time.Duration

	live atomic.Bool

	mu       sync.Mutex
	projects map[string]*projectState
	hosts    map[string]*hostState // by host ID
	instHost map[string]string     // instance ID → host ID, of cached hosts
	runOnce  sync.Once
}

var _ maintenancev1connect.MaintenanceServiceHandler = (*Service)(nil)

type projectState struct {
	gen     uint64
	tree    *Tree
	loading chan struct{}
}

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
	s := &Service{store: opts.Store, log: opts.Logger, now: opts.Now, retry: opts.RetryWait,
		projects: map[string]*projectState{}, hosts: map[string]*hostState{}, instHost: map[string]string{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.retry <= 0 {
		s.retry = 2 * time.Second
	}
	return s
}

// treeKinds are the kinds whose changes drop a project's tree.
var treeKinds = []eim.Kind{eim.KindSingleSchedule, eim.KindRepeatedSchedule, eim.KindRegion, eim.KindSite, eim.KindOSUpdatePolicy, eim.KindOS}

// Run follows the change feed and drops what changed from the caches,
// until ctx ends (it then returns nil). When the feed fails it turns the
// caches off, waits and starts again. It may be called once.
func (s *Service) Run(ctx context.Context) error {
	first := false
	s.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("maintenance: Run called twice")
	}
	defer s.live.Store(false)
	for {
		err := s.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("maintenance: change feed failed; plans are read afresh until it is back", "err", err, "retry_in", s.retry)
		t := time.NewTimer(s.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (s *Service) follow(ctx context.Context) error {
	s.live.Store(false)
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return err
	}
	s.dropAll()
	s.live.Store(true)
	kinds := append([]eim.Kind{eim.KindHost, eim.KindInstance}, treeKinds...)
	for ev, err := range s.store.Watch(ctx, rev, kinds...) {
		if err != nil {
			s.live.Store(false)
			return err
		}
		switch ev.Kind {
		case eim.KindHost:
			s.dropHost(ev.ID, ev.Op == eim.OpDeleted)
		case eim.KindInstance:
			s.dropInstance(ev.Project, ev.ID)
		default:
			s.dropProject(ev.Project)
		}
	}
	return ctx.Err()
}

func (s *Service) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ps := range s.projects {
		ps.gen++
		ps.tree = nil
	}
	for _, hs := range s.hosts {
		hs.gen++
		hs.known, hs.plan = false, nil
	}
	clear(s.instHost)
}

func (s *Service) dropProject(project string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.projects[project]; ps != nil {
		ps.gen++
		ps.tree = nil
	}
}

func (s *Service) dropHost(id string, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHostLocked(id, deleted)
}

func (s *Service) dropHostLocked(id string, deleted bool) {
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
	if !s.live.Load() {
		return s.planUncached(ctx, project, hostID)
	}
	if p, v, ok := s.cached(project, hostID); ok {
		return p, v, nil
	}
	tree, treeGen, err := s.projectTree(ctx, project)
	if err != nil {
		return nil, "", err
	}
	facts, hostGen, err := s.hostFacts(ctx, project, hostID)
	if err != nil {
		return nil, "", err
	}
	p, v := tree.Plan(facts)
	s.mu.Lock()
	if ps, hs := s.projects[project], s.hosts[hostID]; ps != nil && ps.gen == treeGen && hs != nil && hs.gen == hostGen && hs.known {
		hs.plan, hs.version, hs.treeGen = p, v, treeGen
	}
	s.mu.Unlock()
	return p, v, nil
}

func (s *Service) cached(project, hostID string) (*maintenancev1.GetPlanResponse, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, hs := s.projects[project], s.hosts[hostID]
	if ps == nil || ps.tree == nil || hs == nil || !hs.known || hs.project != project || hs.plan == nil || hs.treeGen != ps.gen {
		return nil, "", false
	}
	return hs.plan, hs.version, true
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

// projectTree returns the project's tree, loaded once for all the callers
// that ask while it is missing, and its generation.
func (s *Service) projectTree(ctx context.Context, project string) (*Tree, uint64, error) {
	s.mu.Lock()
	ps := s.projects[project]
	if ps == nil {
		ps = &projectState{}
		s.projects[project] = ps
	}
	for ps.tree == nil && ps.loading != nil {
		ch := ps.loading
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
		s.mu.Lock()
	}
	if ps.tree != nil {
		t, g := ps.tree, ps.gen
		s.mu.Unlock()
		return t, g, nil
	}
	ch := make(chan struct{})
	ps.loading = ch
	gen := ps.gen
	s.mu.Unlock()

	var tree *Tree
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		tree, err = LoadTree(ctx, tx)
		return err
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	ps.loading = nil
	close(ch)
	if err != nil {
		return nil, 0, fmt.Errorf("load the maintenance tree of %s: %w", project, err)
	}
	if ps.gen == gen {
		ps.tree = tree
	}
	return tree, gen, nil
}

// hostFacts returns the host's facts and its entry's generation.
func (s *Service) hostFacts(ctx context.Context, project, hostID string) (Facts, uint64, error) {
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
