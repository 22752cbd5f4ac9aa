// Package workloads is EIM's device workloads module (server side):
// edge workloads — containers run as podman pods on devices, EIM hosts
// running eim-agent on their installed OS — as a project resource of the
// v1 API (/v1/projects/{projectName}/edgeworkloads), and the devices'
// WorkloadService.
//
// A workload selects its devices by label (eim.DeviceLabels: the host's
// metadata over what it inherits, and the eim.io/ facts) or names one
// host. Every change of its spec is a new revision, stored. Which revision
// a device must run is its target, stored per (workload, host): the
// targets loop (run-once, woken by the change feed: workloads, hosts,
// sites, regions, instances) sets it to the latest revision for every
// selected device and removes it from the others, or, for a workload with
// a rollout policy, to what its rollout lets the device have (the rollout
// engine, rollout.go: batches, success thresholds, disruption budgets,
// maintenance windows). Each change of a device's
// targets, and a log request for it, gives the device a new version (a
// growing number): heartbeat answers carry it (Version, from memory kept
// by the change feed), and the device then fetches its rendered set
// (GetWorkloads), reports its status when it changes (ReportStatus), and
// asks leave to upload its egress data through the project's object
// storage (GrantUploads, through eim.UploadGranter) without ever holding
// the storage's credentials.
package workloads

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/seal"
)

// Store is what the module uses of the store.
type Store interface {
	eim.EdgeWorkloadStore
	FindProject(ctx context.Context, name string) (*eim.Project, error)
	ListProjects(ctx context.Context) ([]*eim.Project, error)
}

// Options configure a Service. Store, FeedStore, Inventory and Key are
// required.
type Options struct {
	Store Store
	// FeedStore is the store whose change feed the loops follow.
	FeedStore eim.Store
	// Inventory reads the devices (hosts, expanded with what they
	// inherit) for the selectors.
	Inventory *inventory.Service
	// Authenticator verifies the API's callers (auth.Verifier); required
	// for Routes.
	Authenticator apiv2.Authenticator
	// Key seals the workloads' secrets and registry passwords.
	Key *seal.Key
	// Uploads grants devices' uploads to their project's object storage;
	// nil: none configured (GrantUploads answers FailedPrecondition).
	Uploads eim.UploadGranter
	// Downloads lists and grants the files of devices' ingress data
	// paths; nil: none configured (ListDownloads answers
	// FailedPrecondition).
	Downloads eim.DownloadGranter
	Logger    *slog.Logger
	Metrics   prometheus.Registerer
	Now       func() time.Time
	// Relist is how often every project's targets are reconciled again
	// (default 5 min).
	Relist time.Duration
	// LogWait bounds how long GET …/logs waits for the device's answer
	// before answering 202 (default 10 s).
	LogWait time.Duration
	// RetryWait is the first pause of the feed runners after a failure.
	RetryWait time.Duration
	// RolloutTick is how often the targets loop steps the rollouts
	// (default 10 s): devices' status reports and timeouts move them.
	RolloutTick time.Duration
	// StatusGrace is how long a device has to report the status of a new
	// version before the server asks for its full status in a heartbeat
	// answer (default 2 min); the targets loop looks for such devices
	// every quarter of it, and a process asks one device again only after
	// it.
	StatusGrace time.Duration
}

// Service is the workloads module.
type Service struct {
	o        Options
	log      *slog.Logger
	versions *Versions
	recMu    sync.Mutex // one reconciliation of targets at a time
	// reconciles counts the targets loop's reconciliations by scope:
	// "project" (every device of a project), "hosts" (the hosts a batch
	// of events named).
	reconciles *prometheus.CounterVec
}

// New returns a Service.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.FeedStore == nil || o.Inventory == nil {
		return nil, errors.New("workloads: a store and an inventory are required")
	}
	if o.Key == nil {
		return nil, errors.New("workloads: a secrets key is required to seal workloads' secrets")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Relist <= 0 {
		o.Relist = 5 * time.Minute
	}
	if o.RolloutTick <= 0 {
		o.RolloutTick = 10 * time.Second
	}
	if o.LogWait <= 0 {
		o.LogWait = 10 * time.Second
	}
	if o.StatusGrace <= 0 {
		o.StatusGrace = 2 * time.Minute
	}
	s := &Service{o: o, log: o.Logger.With("module", "workloads"),
		reconciles: metrics.Register(o.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_workloads_reconciles_total",
			Help: "Reconciliations of edge workload targets by the targets loop, by scope: project (every device of a project) or hosts (the hosts a batch of change events named)."},
			[]string{"scope"}))}
	s.versions = newVersions(o.FeedStore, o.Store, s.log, o.Metrics, o.RetryWait, o.Now, o.StatusGrace)
	return s, nil
}

// Versions is the per-device cache of versions that heartbeats read.
func (s *Service) Versions() *Versions { return s.versions }

// Version implements hostmgr.Workloads: the version of the device's set
// of workloads, from memory; "" when it has none (or the cache is not
// live).
func (s *Service) Version(ctx context.Context, project, hostID string) string {
	return s.versions.Version(project, hostID)
}

// StatusWanted implements hostmgr.Workloads: whether the heartbeat's
// answer asks the device for its full status, from memory.
func (s *Service) StatusWanted(ctx context.Context, project, hostID string) bool {
	return s.versions.StatusWanted(project, hostID)
}

// Routes returns the module's API handlers by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	const base = "/v1/projects/{projectName}/edgeworkloads"
	return map[string]http.Handler{
		"POST " + base:                      s.api(s.create),
		"GET " + base:                       s.api(s.list),
		"GET " + base + "/{name}":           s.api(s.get),
		"PUT " + base + "/{name}":           s.api(s.put),
		"DELETE " + base + "/{name}":        s.api(s.delete),
		"GET " + base + "/{name}/revisions": s.api(s.revisions),
		"GET " + base + "/{name}/status":    s.api(s.status),
		"GET " + base + "/{name}/devices":   s.api(s.devices),
		"GET " + base + "/{name}/logs":      s.api(s.logs),
		"GET " + base + "/{name}/logs/{id}": s.api(s.logResult),
		"GET " + base + "/{name}/rollout":   s.api(s.rolloutStatus),
		"POST " + base + "/{name}/rollout/pause": s.api(s.rolloutAction([]string{eim.RolloutProgressing}, eim.RolloutPaused,
			"paused by %s")),
		"POST " + base + "/{name}/rollout/resume": s.api(s.rolloutAction([]string{eim.RolloutPaused, eim.RolloutFailed}, eim.RolloutProgressing,
			"resumed by %s")),
		"POST " + base + "/{name}/rollout/abort": s.api(s.rolloutAction([]string{eim.RolloutProgressing, eim.RolloutPaused, eim.RolloutFailed}, eim.RolloutAborted,
			"aborted by %s: the devices keep the revision they have")),
		"POST " + base + "/{name}/rollout/rollback": s.api(s.rollback),
	}
}

// call is what a handler works with.
type call struct {
	proj *eim.Project
	name string // the path's workload name, when it has one
}

// api wraps a handler as the v1 API's project routes are: authenticate,
// find the project (one the caller may not see answers as not theirs),
// check the project's read role for reads and its write role for the
// rest, and check the path's workload name.
func (s *Service) api(fn func(http.ResponseWriter, *http.Request, *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
			if s.o.Authenticator == nil {
				return eim.Errorf(eim.EINTERNAL, "workloads: no authenticator")
			}
			p, err := apiv2.Authenticate(r, s.o.Authenticator)
			if err != nil {
				return err
			}
			name := r.PathValue("projectName")
			if name == "" || len(name) > 100 {
				return eim.Errorf(eim.EINVALID, "projectName: must be 1 to 100 characters")
			}
			proj, err := s.o.Store.FindProject(r.Context(), name)
			if eim.ErrorCode(err) == eim.ENOTFOUND && !p.CanRead(&eim.Project{Name: name}) {
				return noAccess(name)
			}
			if err != nil {
				return err
			}
			allowed := p.CanWrite(proj)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				allowed = p.CanRead(proj)
			}
			if !allowed {
				return noAccess(name)
			}
			if proj.Deleting && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
				return eim.Errorf(eim.ECONFLICT, "project %s is being deleted", proj.Name)
			}
			c := &call{proj: proj, name: r.PathValue("name")}
			if c.name != "" {
				if err := eim.CheckEdgeWorkloadName(c.name); err != nil {
					return err
				}
			}
			ctx := eim.WithActor(r.Context(), eim.UserActor(p.Subject))
			return fn(w, r.WithContext(ctx), c)
		}()
		if err != nil {
			if eim.ErrorCode(err) == eim.EINTERNAL {
				s.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
			}
			apiv2.WriteError(w, err)
		}
	})
}

func noAccess(project string) error {
	return eim.Errorf(eim.EFORBIDDEN, "no access to project %q", project)
}
