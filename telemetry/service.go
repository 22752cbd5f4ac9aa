// Package telemetry is EIM's telemetry module: the effective telemetry
// configuration of each node, merged from the profiles of its instance, its
// host's site and the site's regions (per metrics group the shortest
// interval, per logs group the most verbose level), and the southbound call
// that hands it to the node's agent.
//
// Heartbeats carry the configuration's version (a digest), so a node learns
// of a change within one heartbeat; they must not cost a database read, so
// the module keeps each project's tree (profiles, groups, sites, regions)
// and each host's site in memory and drops what the change feed says
// changed: a profile, group, site or region drops its project's tree, a
// host its own entry. A version is then computed again, in memory, on the
// node's next heartbeat.
package telemetry

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
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
)

// Options configure a Service. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	// RetryWait is the first pause before Run follows the feed again
	// after it failed (default 1 s, growing with failures in a row: see
	// feed.Options.MinWait); the caches are off meanwhile.
	RetryWait time.Duration
}

// Service computes and caches nodes' effective configurations. Its
// methods work before Run is called, but cache nothing until Run watches
// the change feed.
type Service struct {
	store eim.Store
	log   *slog.Logger

	feed  *feed.Runner
	trees feedcache.Loader[*Tree] // by project

	// primed fills every host's site of a project in a paged scan, once
	// per feed generation, the first time one of its hosts is asked for.
	primed feedcache.Loader[bool]

	mu    sync.Mutex
	hosts map[string]*hostState // by host ID (IDs are unique across projects)
	// seq counts drops, dropped holds each host's last: a scan fills only
	// the hosts not dropped since it started.
	seq     uint64
	dropped map[string]uint64
}

// hostState caches what one host's configuration depends on, and the
// result.
type hostState struct {
	project string
	gen     uint64 // bumped when the host changed
	known   bool
	siteID  string
	// The version computed from tree generation treeGen.
	treeGen uint64
	cfg     *Config
	version string
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Store == nil {
		panic("telemetry.New: Store is required")
	}
	s := &Service{store: opts.Store, log: opts.Logger, hosts: map[string]*hostState{}, dropped: map[string]uint64{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.trees.Load = func(ctx context.Context, project string) (*Tree, error) {
		var tree *Tree
		err := s.store.View(ctx, project, func(tx eim.Tx) error {
			var err error
			tree, err = LoadTree(ctx, tx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("load the telemetry tree of %s: %w", project, err)
		}
		return tree, nil
	}
	s.primed.Load = s.prime
	s.feed = feed.New(feed.Options{Store: opts.Store, Kinds: watched, Name: "telemetry", Logger: s.log, MinWait: opts.RetryWait,
		Reset: s.dropAll, Handle: func(_ context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				if ev.Kind == eim.KindHost {
					s.dropHost(ev.ID, ev.Op == eim.OpDeleted)
				} else {
					s.trees.Drop(ev.Project)
				}
			}
			return nil
		}})
	return s
}

// watched are the kinds whose changes can change a configuration.
// Instances are not among them: an instance's host never changes, and the
// profiles targeting one come and go with events of their own.
var watched = []eim.Kind{eim.KindTelemetryProfile, eim.KindTelemetryGroup, eim.KindSite, eim.KindRegion, eim.KindHost}

// Run watches the change feed and drops what changed from the caches,
// until ctx ends (it then returns nil). When the feed fails the caches are
// off until it is back. It may be called once.
func (s *Service) Run(ctx context.Context) error { return s.feed.Run(ctx) }

func (s *Service) dropAll() {
	s.trees.DropAll()
	s.primed.DropAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	clear(s.dropped)
	s.dropped[""] = s.seq // every host
	for _, hs := range s.hosts {
		hs.gen++
		hs.known = false
		hs.cfg, hs.version = nil, ""
	}
}

func (s *Service) dropHost(id string, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.dropped[id] = s.seq
	hs := s.hosts[id]
	if hs == nil {
		return
	}
	if deleted {
		delete(s.hosts, id)
		return
	}
	hs.gen++
	hs.known = false
	hs.cfg, hs.version = nil, ""
}

// Version returns the version of host hostID's effective configuration, ""
// when it cannot be read (the error is logged). Once cached, it costs no
// database access: it is called on every heartbeat.
func (s *Service) Version(ctx context.Context, project, hostID string) string {
	_, v, err := s.Config(ctx, project, hostID)
	if err != nil {
		if ctx.Err() == nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			s.log.Warn("telemetry: configuration of a host", "host", hostID, "project", project, "err", err)
		}
		return ""
	}
	return v
}

// Config returns host hostID's effective configuration and its version.
// The host must be in project (ENOTFOUND otherwise).
func (s *Service) Config(ctx context.Context, project, hostID string) (Config, string, error) {
	if project == "" {
		return Config{}, "", eim.Errorf(eim.EINVALID, "project is required")
	}
	if !s.feed.Live() {
		return s.configUncached(ctx, project, hostID)
	}
	if cfg, v, ok := s.cached(project, hostID); ok {
		return cfg, v, nil
	}
	tree, treeGen, err := s.trees.Get(ctx, project)
	if err != nil {
		return Config{}, "", err
	}
	site, hostGen, err := s.hostSite(ctx, project, hostID)
	if err != nil {
		return Config{}, "", err
	}
	s.mu.Lock()
	hs := s.hosts[hostID]
	if hs != nil && hs.known && hs.gen == hostGen && hs.cfg != nil && hs.treeGen == treeGen {
		cfg, v := *hs.cfg, hs.version
		s.mu.Unlock()
		return cfg, v, nil
	}
	s.mu.Unlock()
	cfg := tree.Effective(Node{HostID: hostID, SiteID: site})
	v := cfg.Version()
	s.mu.Lock()
	if s.trees.Current(project, treeGen) && hs != nil && hs.gen == hostGen && hs.known {
		hs.cfg, hs.version, hs.treeGen = &cfg, v, treeGen
	}
	s.mu.Unlock()
	return cfg, v, nil
}

// cached returns the host's configuration when nothing it depends on
// changed since it was computed: the heartbeats' path.
func (s *Service) cached(project, hostID string) (Config, string, bool) {
	s.mu.Lock()
	hs := s.hosts[hostID]
	if hs == nil || !hs.known || hs.project != project || hs.cfg == nil {
		s.mu.Unlock()
		return Config{}, "", false
	}
	cfg, v, gen := *hs.cfg, hs.version, hs.treeGen
	s.mu.Unlock()
	if !s.trees.Current(project, gen) {
		return Config{}, "", false
	}
	return cfg, v, true
}

// configUncached reads everything afresh: the caches are off.
func (s *Service) configUncached(ctx context.Context, project, hostID string) (Config, string, error) {
	var cfg Config
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		site, err := readSite(ctx, tx, hostID)
		if err != nil {
			return err
		}
		tree, err := LoadTree(ctx, tx)
		if err != nil {
			return err
		}
		cfg = tree.Effective(Node{HostID: hostID, SiteID: site})
		return nil
	})
	if err != nil {
		return Config{}, "", err
	}
	return cfg, cfg.Version(), nil
}

// prime fills the site of every host of the project that is not cached,
// from a paged scan instead of a read per host: after a restart a whole
// fleet heartbeats within one interval. Hosts dropped by the feed while it
// scans are left to be read on their own. A failed scan is not retried
// before the feed restarts.
func (s *Service) prime(ctx context.Context, project string) (bool, error) {
	ctx = context.WithoutCancel(ctx) // the first heartbeat's: the scan serves all
	s.mu.Lock()
	start := s.seq
	s.mu.Unlock()
	sites := map[string]string{}
	err := feedcache.Each(ctx, s.store, project, eim.KindHost, 2000, func(r eim.Resource) {
		h := r.(*eim.Host)
		sites[h.ResourceID] = h.SiteID
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("telemetry: hosts not read ahead", "project", project, "err", err)
		}
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped[""] > start {
		return true, nil
	}
	for id, site := range sites {
		if s.dropped[id] > start {
			continue
		}
		hs := s.hosts[id]
		if hs == nil {
			hs = &hostState{project: project}
			s.hosts[id] = hs
		}
		if !hs.known && hs.project == project {
			hs.siteID, hs.known = site, true
		}
	}
	return true, nil
}

// hostSite returns the site of the host and the host entry's generation.
func (s *Service) hostSite(ctx context.Context, project, hostID string) (string, uint64, error) {
	if !s.primed.Cached(project) {
		s.primed.Get(ctx, project) // errors are logged by prime
	}
	s.mu.Lock()
	hs := s.hosts[hostID]
	if hs != nil && hs.known && hs.project == project {
		site, gen := hs.siteID, hs.gen
		s.mu.Unlock()
		return site, gen, nil
	}
	if hs == nil || hs.project != project {
		hs = &hostState{project: project}
		s.hosts[hostID] = hs
	}
	gen := hs.gen
	s.mu.Unlock()

	var site string
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		var err error
		site, err = readSite(ctx, tx, hostID)
		return err
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND && s.hosts[hostID] == hs {
			delete(s.hosts, hostID)
		}
		return "", 0, err
	}
	if s.hosts[hostID] == hs && hs.gen == gen {
		hs.siteID, hs.known = site, true
	}
	return site, gen, nil
}

func readSite(ctx context.Context, tx eim.Tx, hostID string) (string, error) {
	r, err := tx.Get(ctx, eim.KindHost, hostID)
	if err != nil {
		return "", err
	}
	return r.(*eim.Host).SiteID, nil
}

// GetTelemetryConfig serves HostService.GetTelemetryConfig (through the
// host module): the calling node's configuration, or only its version when
// the node has it already.
func (s *Service) GetTelemetryConfig(ctx context.Context, req *connect.Request[hostv1.GetTelemetryConfigRequest]) (*connect.Response[hostv1.GetTelemetryConfigResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Msg.Version) > 128 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("version: longer than 128 bytes"))
	}
	cfg, v, err := s.Config(ctx, n.Project, n.HostID)
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "telemetry: get config", err)
	}
	if req.Msg.Version == v {
		return connect.NewResponse(&hostv1.GetTelemetryConfigResponse{Version: v, Unchanged: true}), nil
	}
	return connect.NewResponse(cfg.Proto(v)), nil
}

// Proto returns c as the answer of GetTelemetryConfig.
func (c Config) Proto(version string) *hostv1.GetTelemetryConfigResponse {
	out := &hostv1.GetTelemetryConfigResponse{Version: version}
	for _, m := range c.Metrics {
		out.MetricsGroups = append(out.MetricsGroups, &hostv1.TelemetryMetricsGroup{
			GroupId: m.GroupID, Name: m.Name, CollectorKind: collectorKind(m.CollectorKind),
			Inputs: m.Inputs, IntervalSeconds: m.IntervalSeconds,
		})
	}
	for _, l := range c.Logs {
		out.LogsGroups = append(out.LogsGroups, &hostv1.TelemetryLogsGroup{
			GroupId: l.GroupID, Name: l.Name, CollectorKind: collectorKind(l.CollectorKind),
			Inputs: l.Inputs, Level: hostv1.TelemetryLogsGroup_Level(l.Level.Verbosity()),
		})
	}
	return out
}

// collectorKind maps the API's enum to the protocol's: their names are the
// same.
func collectorKind(k eim.TelemetryCollectorKind) hostv1.TelemetryCollectorKind {
	return hostv1.TelemetryCollectorKind(hostv1.TelemetryCollectorKind_value[string(k)])
}
