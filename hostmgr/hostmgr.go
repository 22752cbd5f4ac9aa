// Package hostmgr is EIM's host module: the southbound HostService that a
// node on its installed OS calls (report-in, heartbeats, hardware
// inventory), the liveness of every node ("Running", "No Connection"), and
// in-band host actions (reboot, shut down) carried in heartbeat answers.
//
// Liveness is kept in memory, not in the inventory: a heartbeat of a host
// whose status is already right costs no database access at all. The host
// row is written only when its status changes; when each node was last
// heard from is flushed to the store in batches (Store.SaveLastSeen), a
// host about once a timeout, so that a restarted server knows it and can
// date its silence. A
// host whose heartbeats stop is found through a deadline heap, so the cost
// of timeout detection follows the hosts that time out, not the fleet.
//
// The module can run as several replicas on one database (Options.Members),
// a node's heartbeats reaching any of them: a host is "No Connection" only
// when no replica heard it for its timeout. The hosts are divided into
// shards whose leases the replicas hold; only a shard's owner flags its
// hosts, after checking the times the other replicas saved (replicas.go;
// docs/architecture.md, "Replicas"). Alone (SQLite), a process watches
// every host and none of that costs anything.
package hostmgr

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/hostview"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// Telemetry is the telemetry module, as the host service carries it.
type Telemetry interface {
	// Version returns the version of the host's telemetry configuration,
	// "" when it is not known. It is called on every heartbeat: it must
	// answer from memory.
	Version(ctx context.Context, project, hostID string) string
	// GetTelemetryConfig serves the RPC of the same name.
	GetTelemetryConfig(context.Context, *connect.Request[hostv1.GetTelemetryConfigRequest]) (*connect.Response[hostv1.GetTelemetryConfigResponse], error)
}

// ReportInFunc handles a node's report-in (the provisioning module's: the
// first one after provisioning makes the instance RUNNING).
type ReportInFunc func(context.Context, *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error)

// Maintenance is the maintenance module, as heartbeats carry it.
type Maintenance interface {
	// Version returns the version of the host's maintenance plan, "" when
	// it is not known. It is called on every heartbeat: it must answer
	// from memory.
	Version(ctx context.Context, project, hostID string) string
}

// Clusters is the clusters module, as heartbeats carry it.
type Clusters interface {
	// Version returns the version of the host's cluster plan, "" when
	// the host is in no cluster (or it is not known). It is called on
	// every heartbeat: it must answer from memory.
	Version(ctx context.Context, project, hostID string) string
}

// Workloads is the workloads module, as heartbeats carry it.
type Workloads interface {
	// Version returns the version of the device's set of edge workloads,
	// "" when it has none (or it is not known). It is called on every
	// heartbeat: it must answer from memory.
	Version(ctx context.Context, project, hostID string) string
	// StatusWanted reports whether the answer asks the device for its
	// full workloads status. It is called on every heartbeat: it must
	// answer from memory.
	StatusWanted(ctx context.Context, project, hostID string) bool
}

// Options configure a Service. Store and ReportIn are required; zero values
// select defaults.
type Options struct {
	// Store is the store the module's shared parts run on: the
	// change-feed runner that waits for it at the start, the shards'
	// leases, and the module's own host view when Hosts is nil. What the
	// module itself reads and writes goes through Liveness.
	Store eim.Store
	// Liveness is what the module reads and writes (see Store); nil:
	// StoreOf(Store, Batcher).
	Liveness Store
	// Batcher runs the writes of StoreOf(Store, Batcher) in transactions
	// shared with other nodes' calls (inventory.Batcher); nil: one
	// Store.Update each. Unused with Liveness.
	Batcher  eim.TxRunner
	ReportIn ReportInFunc
	Logger   *slog.Logger
	Now      func() time.Time
	// Metrics, when set, gets the heartbeat series (eim_heartbeats_total,
	// eim_heartbeat_lateness_seconds), the change-feed runner's and the
	// shards' leases.
	Metrics prometheus.Registerer

	// Telemetry, when set, puts the node's telemetry version in heartbeat
	// answers and serves GetTelemetryConfig; nil answers it Unimplemented.
	Telemetry Telemetry
	// Maintenance, when set, puts the node's maintenance plan version in
	// heartbeat answers.
	Maintenance Maintenance
	// Clusters, when set, puts the node's cluster plan version in
	// heartbeat answers.
	Clusters Clusters
	// Workloads, when set, puts the device's edge workloads version in
	// heartbeat answers.
	Workloads Workloads

	// Interval and Timeout apply to projects whose settings name none
	// (defaults eim.DefaultHeartbeatInterval seconds, and that times
	// eim.DefaultHeartbeatMisses).
	Interval, Timeout time.Duration
	// HardwareInterval is how often nodes send their full hardware
	// inventory even when it did not change (default 1 h).
	HardwareInterval time.Duration
	// RebootTimeout is how long a host may take to come back from a reboot
	// it was asked for before it is "No Connection" (default 15 min).
	RebootTimeout time.Duration
	// UpdateTimeout is how long after its last update report a node whose
	// instance is updating may stay silent before it is "No Connection"
	// (default 2 h): an update reboots the node, and an image takes time.
	UpdateTimeout time.Duration
	// CheckInterval is how often deadlines are checked (default 1 s), and
	// FlushInterval how often last-seen times are saved (default 1 s: the
	// hosts due are saved in small batches, not in one long write every few
	// seconds that holds SQLite's writer and a core while heartbeats wait).
	CheckInterval, FlushInterval time.Duration
	// SettingsTTL is how long a project's heartbeat settings are cached
	// (default 10 s): a change reaches nodes within that and one interval.
	SettingsTTL time.Duration

	// Members, when set, makes this Service one of the replicas of the
	// host module that share the fleet on one database: it returns the
	// IDs of the live replicas (coord.Members of module "host"; the
	// process announces itself with coord.Announce, not the Service).
	// Each replica flags the hosts of the shards it holds the lease of.
	// Nil: this process is the only one and watches every host (SQLite).
	Members func(ctx context.Context) ([]string, error)
	// Replica is this replica's ID among Members (its coord holder);
	// required with Members.
	Replica string
	// LeaseTTL is the TTL of the shards' leases (default
	// coord.DefaultTTL): a replica that dies has its shards taken over
	// within about that and a third. It also bounds, at a quarter, how stale
	// the store's last-seen times may be while the fleet is shared.
	LeaseTTL time.Duration
	// Hosts is the process's shared per-host view, from which heartbeats
	// read their hosts; nil: the service keeps a view of its own, which
	// Run follows.
	Hosts *hostview.View
}

// Service implements hostv1connect.HostServiceHandler. Run drives its
// timers; handlers work before Run is called, but no host times out.
type Service struct {
	metrics     *serviceMetrics
	reg         prometheus.Registerer
	store       Store
	reportIn    ReportInFunc
	telemetry   Telemetry
	maintenance Maintenance
	clusters    Clusters
	workloads   Workloads
	log         *slog.Logger
	now         func() time.Time
	interval    time.Duration
	timeout     time.Duration
	hwEvery     time.Duration
	rebootMax   time.Duration
	updateMax   time.Duration
	check       time.Duration
	flush       time.Duration

	live     *tracker
	settings *settingsCache
	hosts    *hostview.View
	ownHosts bool

	shards   *coord.Shards // nil without replicas
	leaseTTL time.Duration
	shareMu  sync.Mutex
	share    sharing
	rescan   atomic.Bool // the owned shards' hosts are to be read from the store
	// trouble is when (Unix nanoseconds, the real clock) a call of this
	// replica to the store last failed or timed out: the store may lack
	// what the replicas heard meanwhile (see upToDate).
	trouble atomic.Int64

	restore        *feed.Runner  // reads liveness once the store answers
	restoredCh     chan struct{} // closed once it has
	flushMu        sync.Mutex    // one flush at a time
	restored       atomic.Bool
	storeState     atomic.Int32 // storeOK, storeSuspect or storeDown
	runOnce        sync.Once
	lastRebootScan time.Time // CheckTimeouts' own: not concurrent
	lastSweep      time.Time // likewise
}

var _ hostv1connect.HostServiceHandler = (*Service)(nil)

// New returns a Service.
func New(opts Options) *Service {
	if opts.Store == nil || opts.ReportIn == nil {
		panic("hostmgr.New: Store and ReportIn are required")
	}
	s := &Service{
		metrics: newServiceMetrics(opts.Metrics), reg: opts.Metrics,
		store: opts.Liveness, reportIn: opts.ReportIn, telemetry: opts.Telemetry, maintenance: opts.Maintenance, clusters: opts.Clusters, workloads: opts.Workloads, log: opts.Logger, now: opts.Now,
		interval: opts.Interval, timeout: opts.Timeout, hwEvery: opts.HardwareInterval,
		rebootMax: opts.RebootTimeout, updateMax: opts.UpdateTimeout, check: opts.CheckInterval, flush: opts.FlushInterval,
	}
	if s.store == nil {
		s.store = StoreOf(opts.Store, opts.Batcher)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.interval <= 0 {
		s.interval = eim.DefaultHeartbeatInterval * time.Second
	}
	if s.timeout <= 0 {
		s.timeout = eim.DefaultHeartbeatMisses * s.interval
	}
	if s.hwEvery <= 0 {
		s.hwEvery = time.Hour
	}
	if s.rebootMax <= 0 {
		s.rebootMax = 15 * time.Minute
	}
	if s.updateMax <= 0 {
		s.updateMax = 2 * time.Hour
	}
	if s.check <= 0 {
		s.check = time.Second
	}
	if s.flush <= 0 {
		s.flush = time.Second
	}
	ttl := opts.SettingsTTL
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	s.live = newTracker(opts.Members == nil)
	s.settings = newSettingsCache(s.store, s.now, ttl, s.interval, s.timeout)
	s.leaseTTL = opts.LeaseTTL
	if s.leaseTTL <= 0 {
		s.leaseTTL = coord.DefaultTTL
	}
	if opts.Members != nil {
		if opts.Replica == "" {
			panic("hostmgr.New: Replica is required with Members")
		}
		var err error
		s.shards, err = coord.NewShards(coord.Options{Store: opts.Store, Holder: opts.Replica, TTL: s.leaseTTL, Logger: s.log, Metrics: opts.Metrics},
			coord.ShardOptions{Prefix: leasePrefix, Count: shards, Members: opts.Members,
				Viewed: s.viewed, Gained: s.gained, Releasing: s.releasing, Lost: s.lost, Failed: s.troubled,
				// A replica that joins takes shards once its store times
				// are fresh (upToDate), not before: meanwhile the others
				// keep its share, and take a dead replica's, from fresh
				// times, so no deadline is counted anew from the gain.
				Settle: s.fresh() + s.leaseTTL/3})
		if err != nil {
			panic("hostmgr.New: " + err.Error())
		}
		// A replica may share the fleet with others at any time, whether
		// or not it sees them (a view of the members can lag: their
		// announcements time out when the database is slow), so it
		// always saves what it hears as sharing needs and judges
		// silences against the store (replicas.go).
		s.live.setShared(true, s.w(), s.slack())
	}
	// A store that is away is waited for: heartbeats are answered
	// meanwhile, and no host times out before its liveness is known.
	s.restoredCh = make(chan struct{})
	s.restore = feed.New(feed.Options{Store: opts.Store, Name: "hostmgr", Logger: s.log, Metrics: s.reg,
		Relist: func(ctx context.Context) error {
			if s.restored.Load() {
				return nil
			}
			if err := s.loadLastSeen(ctx); err != nil {
				return fmt.Errorf("read liveness from the store: %w", err)
			}
			close(s.restoredCh)
			return nil
		}})
	s.hosts, s.ownHosts = hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: s.log, Now: s.now})
	// A host changed (by this process, before its write returns, or
	// through the feed) is read again at its next heartbeat; a deleted
	// one is forgotten.
	s.hosts.OnChange(func(project, id string, deleted bool) {
		if deleted {
			s.live.forget(id)
		} else {
			s.live.changed(project, id, s.now())
		}
	})
	return s
}

// Run loads what the store knows of liveness and then, until ctx is done,
// flags hosts whose heartbeats stopped and saves last-seen times (and
// follows the service's own host view, when it has one). It returns nil
// when ctx ends (after a last flush) and may be called once.
func (s *Service) Run(ctx context.Context) error {
	first := false
	s.runOnce.Do(func() { first = true })
	if !first {
		return fmt.Errorf("hostmgr: Run called twice")
	}
	return hostview.RunAlong(ctx, s.hosts, s.ownHosts, s.run)
}

func (s *Service) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.restore.Run(ctx) })
	select {
	case <-ctx.Done():
		return nil
	case <-s.restoredCh:
	}
	wg.Go(func() { s.checkLoop(ctx) })
	wg.Go(func() { s.flushLoop(ctx) })
	if s.shards != nil {
		wg.Go(func() { s.shards.Run(ctx) })
	}
	return nil
}

// loadLastSeen restores the tracker after a restart: every host heard from
// before is due at the later of its last-seen time and now, plus its
// timeout (a server outage must not flag the fleet), and is read on its
// next heartbeat (from the host view, which reads every host ahead).
func (s *Service) loadLastSeen(ctx context.Context) error {
	all, err := s.store.LastSeen(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	if s.shards != nil {
		// A replica watches only the hosts of the shards it gains, and
		// gain reads their times then; the rest it learns as their
		// nodes call it. Restoring every host here would make each
		// replica hold the whole fleet.
		s.log.Info("hostmgr: liveness known to the store", "hosts", len(all))
		s.restored.Store(true)
		return nil
	}
	for _, ls := range all {
		s.live.restore(ls.Project, ls.HostID, ls.At, now, true)
	}
	s.log.Info("hostmgr: restored liveness", "hosts", len(all))
	s.restored.Store(true)
	return nil
}

// Restored reports whether Run has loaded what the store knew of liveness.
func (s *Service) Restored() bool { return s.restored.Load() }

// Tracked returns how many hosts the module tracks.
func (s *Service) Tracked() int {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return len(s.live.hosts)
}

func (s *Service) checkLoop(ctx context.Context) {
	t := time.NewTicker(s.check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.CheckTimeouts(ctx)
	}
}

func (s *Service) flushLoop(ctx context.Context) {
	t := time.NewTicker(s.flush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// A last flush of every host, so that a clean restart
			// dates silences exactly.
			s.live.saveAll()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.Flush(fctx)
			cancel()
			return
		case <-t.C:
		}
		s.Flush(ctx)
	}
}

// Flush saves the queued last-seen times: of the hosts first heard from
// since the last flush, and of the hosts the checker passed (about once a
// timeout for a live host).
func (s *Service) Flush(ctx context.Context) { s.flushAll(ctx) }

// flushAll saves the queued last-seen times and reports a failed save.
// Flushes run one at a time, so that when one returns, what was queued
// before it began is in the store, also when another flush had taken it
// (the handover of shards counts on it).
func (s *Service) flushAll(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	for {
		batch := s.live.unsaved(maxFlush)
		if len(batch) == 0 {
			return nil
		}
		if err := s.save(ctx, batch); err != nil || len(batch) < maxFlush {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// maxFlush bounds the rows of one save: on SQLite a save holds the single
// writer, and after a restart every host is due at once.
const maxFlush = 5000

// save writes batch.
func (s *Service) save(ctx context.Context, batch []eim.LastSeen) error {
	err := s.store.SaveLastSeen(ctx, batch)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("hostmgr: save last seen", "hosts", len(batch), "err", err)
		s.storeFailed(err)
	}
	s.live.saved(batch, err == nil)
	return err
}
