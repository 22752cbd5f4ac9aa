// Package telemetry is EIM's telemetry module: the effective telemetry
// configuration of each node, merged from the profiles of its instance, its
// host's site and the site's regions (per metrics group the shortest
// interval, per logs group the most verbose level), and the southbound call
// that hands it to the node's agent.
//
// Heartbeats carry the configuration's version (a digest), so a node learns
// of a change within one heartbeat; they must not cost a database read, so
// the module keeps each project's tree (profiles, groups, sites, regions)
// in memory and drops what the change feed says changed, and reads each
// host's site from the process's host view (package hostview), where it
// keeps the host's computed configuration: a profile, group, site or
// region drops its project's tree, a host's change its view. A version is
// then computed again, in memory, on the node's next heartbeat.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/feedcache"
	"github.com/eimhq/eim/hostview"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
)

// Options configure a Service. Store is required.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
	// RetryWait is the first pause before Run follows the feed again
	// after it failed (default 1 s, growing with failures in a row: see
	// feed.Options.MinWait); the caches are off meanwhile.
	RetryWait time.Duration
	// Hosts is the process's shared per-host view (each host's site);
	// nil: the service keeps a view of its own, which Run follows.
	Hosts *hostview.View
}

// Service computes and caches nodes' effective configurations. Its
// methods work before Run is called, but cache nothing until Run watches
// the change feed.
type Service struct {
	store eim.Store
	log   *slog.Logger

	feed  *feed.Runner
	trees feedcache.Loader[*Tree] // by project

	hosts    *hostview.View
	ownHosts bool
	slot     hostview.Slot // a host's configuration, on its view
}

// memo is a host's configuration, kept on its host view: computed from
// the host's facts it is kept on, and tree generation treeGen. Hosts with
// the same configuration share one (Tree.shared); it is never changed.
type memo struct {
	treeGen uint64
	cfg     Config
	version string
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Store == nil {
		panic("telemetry.New: Store is required")
	}
	s := &Service{store: opts.Store, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.hosts, s.ownHosts = hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: s.log})
	s.slot = s.hosts.NewSlot()
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
	s.feed = feed.New(feed.Options{Store: opts.Store, Kinds: watched, Name: "telemetry", Logger: s.log, Metrics: opts.Metrics, MinWait: opts.RetryWait,
		Reset: s.trees.DropAll, Handle: func(_ context.Context, evs []eim.Event) error {
			for _, ev := range evs {
				s.trees.Drop(ev.Project)
			}
			return nil
		}})
	return s
}

// watched are the kinds whose changes can change a project's tree. Hosts
// are the host view's; instances are not among them: an instance's host
// never changes, and the profiles targeting one come and go with events
// of their own.
var watched = []eim.Kind{eim.KindTelemetryProfile, eim.KindTelemetryGroup, eim.KindSite, eim.KindRegion}

// Run watches the change feed and drops what changed from the caches
// (and follows the service's own host view, when it has one), until ctx
// ends (it then returns nil). When the feed fails the caches are off
// until it is back. It may be called once.
func (s *Service) Run(ctx context.Context) error {
	return hostview.RunAlong(ctx, s.hosts, s.ownHosts, s.feed.Run)
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
// The configuration may be shared with other hosts: it must not be changed.
func (s *Service) Config(ctx context.Context, project, hostID string) (Config, string, error) {
	if project == "" {
		return Config{}, "", eim.Errorf(eim.EINVALID, "project is required")
	}
	if !s.feed.Live() || !s.hosts.Live() {
		return s.configUncached(ctx, project, hostID)
	}
	h, err := s.hosts.Host(ctx, project, hostID)
	if err != nil {
		return Config{}, "", err
	}
	if m, ok := h.Memo(s.slot).(*memo); ok && s.trees.Current(project, m.treeGen) {
		return m.cfg, m.version, nil // the heartbeats' path
	}
	tree, treeGen, err := s.trees.Get(ctx, project)
	if err != nil {
		return Config{}, "", err
	}
	cfg := tree.Effective(Node{HostID: hostID, SiteID: h.SiteID()})
	m := tree.shared(cfg, cfg.Version(), treeGen)
	if s.trees.Current(project, treeGen) {
		h.SetMemo(s.slot, m)
	}
	return m.cfg, m.version, nil
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
