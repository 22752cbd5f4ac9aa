// Package exporter is the exporter module: the fleet's state as
// Prometheus metrics on GET /metrics. It serves the original EIM
// exporter's per-host series under their names and labels
// (edge_host_status{status} and its siblings, one series per possible
// value), aggregates that stay small at any fleet size (eim_hosts{project,
// site,status} and friends), and histograms of onboarding, provisioning
// and time-to-RUNNING durations computed from stored timestamps.
//
// A scrape reads no database: every process of the module keeps a
// snapshot of the projects, locations and schedules, loaded once and kept
// by the change feed (feed.go), and of the hosts and their instances as a
// projection over the process's host view (hostview), whose records it
// shares. Per-host series can
// be turned off for the whole process (Options.PerHost false, the
// server's --exporter-per-host=false) and per project (its
// exporterPerHostOff setting). docs/metrics.md describes every series.
package exporter

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/hostview"
)

// Options configure a Service.
type Options struct {
	Store  eim.Store
	Logger *slog.Logger
	// Hosts, when set, is the process's read model of the hosts, which
	// the snapshot is a projection over (the process runs it); nil: the
	// exporter keeps a view of Store of its own, and Run runs it.
	Hosts *hostview.View
	// PerHost turns the original's per-host series on (for the projects
	// that do not turn them off); off, only the aggregates are served.
	PerHost bool
	// RetryWait is the pause after the feed failed (default 2 s).
	RetryWait time.Duration
	// Now is the clock that decides which maintenance windows are open
	// (default time.Now).
	Now func() time.Time
	// ProjectsEvery is how often the projects are read again, for their
	// settings, which the change feed does not carry (default 10 s).
	ProjectsEvery time.Duration
	// Own, when set, are the process's own series (metrics.NewRegistry's),
	// served in the same answer: the process then has one /metrics.
	Own prometheus.Gatherer
	// Metrics, when set, gets the change-feed series of the snapshot's
	// loop (consumer "exporter").
	Metrics prometheus.Registerer
}

// Service is the exporter of one process.
type Service struct {
	store   eim.Store
	log     *slog.Logger
	perHost bool
	retry   time.Duration
	now     func() time.Time

	projectsEvery time.Duration
	own           prometheus.Gatherer

	hosts    *hostview.View
	ownHosts bool
	snap     *snapshot
	cache    *hostCache
	feed     feed.Series
	live     atomic.Bool // following the feed
	loaded   atomic.Bool // a first load finished
}

// New returns an exporter; Run keeps its snapshot.
func New(opts Options) *Service {
	s := &Service{store: opts.Store, log: opts.Logger, perHost: opts.PerHost, retry: opts.RetryWait, now: opts.Now,
		projectsEvery: opts.ProjectsEvery, own: opts.Own, snap: newSnapshot(), cache: newHostCache(),
		feed: feed.NewSeries(opts.Metrics, "exporter")}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.retry <= 0 {
		s.retry = 2 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.projectsEvery <= 0 {
		s.projectsEvery = 10 * time.Second
	}
	s.hosts, s.ownHosts = hostview.Shared(opts.Hosts, hostview.Options{Store: opts.Store, Logger: s.log})
	s.hosts.Project(s.snap.put)
	return s
}

// Run loads the snapshot and keeps it by the change feed until ctx ends
// (then it returns nil). It may be called again after it returned.
func (s *Service) Run(ctx context.Context) error {
	return hostview.RunAlong(ctx, s.hosts, s.ownHosts, s.follow)
}

// Loaded reports whether the snapshot was loaded once and the host view
// read the whole fleet: until then a scrape shows no host.
func (s *Service) Loaded() bool { return s.loaded.Load() && s.hosts.Primed() }

// followed reports whether the snapshot follows the feed: its own loop
// and the host view.
func (s *Service) followed() bool { return s.live.Load() && s.hosts.Live() }

func (s *Service) hostCount() int {
	s.snap.mu.RLock()
	defer s.snap.mu.RUnlock()
	return len(s.snap.hosts)
}

// contentType is the text exposition format (0.0.4), which every
// Prometheus reads.
var contentType = string(expfmt.NewFormat(expfmt.TypeTextPlain))

// ServeHTTP answers a scrape: the aggregates, the histograms and the
// exporter's own gauges, then the per-host series, all from one view of
// the snapshot; gzip-compressed when the scraper accepts it (Prometheus
// does).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var v *view
	if s.Loaded() {
		v = s.take(s.now())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(fleetCollector{v: v, live: s.followed()})
	reg.MustRegister(workloadCollector{ctx: r.Context(), store: s.store, log: s.log})
	var g prometheus.Gatherer = reg
	if s.own != nil {
		g = prometheus.Gatherers{s.own, reg}
	}
	fams, err := g.Gather()
	if err != nil {
		// Ours to fix (a label set twice, say); the scrape shows it.
		s.log.Error("exporter: gather", "err", err)
		http.Error(w, "gather: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		s.writeGzip(w, fams, v)
		return
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	enc := expfmt.NewEncoder(bw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away
		}
	}
	if v != nil && s.perHost {
		if err := s.writeHostSeries(bw, v); err != nil {
			return
		}
	}
}

// writeGzip writes the answer compressed: the families gathered,
// compressed now, then the per-host series as the cache keeps them
// (cache.go).
func (s *Service) writeGzip(w io.Writer, fams []*dto.MetricFamily, v *view) {
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			s.log.Error("exporter: encode", "family", mf.GetName(), "err", err)
		}
	}
	c := compressors.Get().(*compressor)
	head := c.compress(text.Bytes())
	compressors.Put(c)
	var hosts []segment
	if v != nil && s.perHost {
		hosts = s.cache.segments(v)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	g := newGzipWriter(bw)
	g.add(&head)
	for i := range hosts {
		g.add(&hosts[i])
	}
	if g.close() == nil {
		bw.Flush()
	}
}

// compressors compress the answers' text and the cache's buckets.
var compressors = sync.Pool{New: func() any { return newCompressor() }}

func acceptsGzip(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept-Encoding"), ",") {
		enc, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}
