// Package oob is the out-of-band control module: hosts' BMCs (Redfish,
// IPMI, Intel AMT) as resources of the v1 API, at
// /v1/projects/{projectName}/compute/hosts/{hostId}/bmc — the address,
// the credentials (the password sealed under the deployment's secrets
// key, never answered, redacted in the audit log) and the TLS trust —
// and the power jobs carried out through them (job.go, power.go,
// worker.go), among them the network-boot jobs that start a registered
// machine's Day 0 (day0.go); docs/oob.md. Its drivers are packages below
// it (oob/ipmi, oob/redfish, oob/amt), each adapted to Driver by a file of
// this package (ipmidriver.go, redfishdriver.go, amtdriver.go).
package oob

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
	"github.com/eimhq/eim/seal"
)

// Store is what the module uses of the store.
type Store interface {
	eim.BMCStore
	eim.PowerJobStore
	FindProject(ctx context.Context, name string) (*eim.Project, error)
	ListProjects(ctx context.Context) ([]*eim.Project, error)
	View(ctx context.Context, project string, fn func(eim.Tx) error) error
	Update(ctx context.Context, project string, fn func(eim.Tx) error) error
	Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// Options configure a Service.
type Options struct {
	Store Store
	// Authenticator verifies the API's callers (auth.Verifier).
	Authenticator apiv2.Authenticator
	// Key seals the BMCs' passwords in the database (required).
	Key    *seal.Key
	Logger *slog.Logger

	// Feed is the store whose change feed Follow follows.
	Feed eim.Store
	// Drivers talk to the BMCs, by protocol; a BMC of a protocol without
	// one fails its jobs ("no driver").
	Drivers map[eim.BMCProtocol]Driver
	// Holder names this process in the jobs' leases (unique per process).
	Holder string
	// Workers is the size of the worker pool (default 4): jobs carried out
	// at once by this process, and the fewest BMCs polled at once.
	// PollWorkers is the most BMCs polled at once (default 256; never
	// fewer than Workers): the poll runs as many reads at once as finish
	// a round within 3/4 of PollEvery (PollOnce).
	Workers, PollWorkers int
	// Lease is how long a worker holds a job without renewing it (default
	// 30 s): a job of a process that died is taken over after it.
	Lease time.Duration
	// ClaimEvery is how often an idle worker looks for a job (default 1 s).
	ClaimEvery time.Duration
	// JobTimeout is a job's deadline from when a worker first takes it up
	// (default 10 min); time queued for a site slot does not count.
	JobTimeout time.Duration
	// ConfirmTimeout is how long a sent action has to show in the BMC's
	// state before it is sent again (default 60 s); ConfirmEvery how
	// often the state is read meanwhile (default 2 s).
	ConfirmTimeout, ConfirmEvery time.Duration
	// GracefulTimeout is how long a graceful shutdown has before the
	// machine is forced off (default 60 s).
	GracefulTimeout time.Duration
	// HTTPBootURL is EIM's iPXE script's URL for UEFI HTTP boot: a
	// network-boot job boots a machine whose BMC lists HTTP boot from it
	// (empty: PXE always). CallHomeTimeout bounds a network-boot job's
	// wait for the node to call home (default 10 min).
	HTTPBootURL     string
	CallHomeTimeout time.Duration
	// VirtualMediaURL is the http(s) URL of EIM's micro-OS CD image
	// (/boot/artifacts/eim-microos.iso) that a virtual-media job has the
	// BMC insert (vmedia.go); empty: such jobs are refused.
	VirtualMediaURL string
	// MaxSends bounds the sends of one step's action (default 3).
	MaxSends int
	// SiteLimit power-ons start per site per SiteWindow at most (defaults
	// 20 and 10 s; a negative limit: none).
	SiteLimit  int
	SiteWindow time.Duration
	// PollEvery is how often Poll reads every BMC (default 60 s);
	// ReachableEvery how often an unchanged Reachable condition is
	// written again (default 5 min).
	PollEvery, ReachableEvery time.Duration
	// RelistEvery is how often Follow re-lists the BMCs (default 5 min);
	// RetryWait the first pause after a store failure (default 1 s).
	RelistEvery, RetryWait time.Duration
	// RestoreBackoff is how long after the power policy powered a host on
	// again it does not do so again (default 10 min).
	RestoreBackoff time.Duration
	Metrics        prometheus.Registerer
}

// Service is the oob module.
type Service struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	reach map[string]eim.BMCReachable // the last written, by project/host
	pol   policyState
	drift driftState // hosts recorded off while their agent ran (drift.go)

	slots slotQueues // jobs waiting for site slots (siteslot.go)
	pace  pollPace   // the poll's read time (PollOnce)
	bmcs  bmcHosts   // which hosts have a BMC, as the follower knows (power.go)
}

// New returns the module.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Authenticator == nil {
		return nil, errors.New("oob: a store and an authenticator are required")
	}
	if o.Key == nil {
		return nil, errors.New("oob: a secrets key is required to seal BMC passwords")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.PollWorkers <= 0 {
		o.PollWorkers = 256
	}
	o.PollWorkers = max(o.PollWorkers, o.Workers)
	if o.MaxSends <= 0 {
		o.MaxSends = 3
	}
	if o.SiteLimit == 0 {
		o.SiteLimit = 20
	}
	if o.Holder == "" {
		o.Holder = eim.NewID("oob")
	}
	def(&o.Lease, 30*time.Second)
	def(&o.ClaimEvery, time.Second)
	def(&o.JobTimeout, 10*time.Minute)
	def(&o.ConfirmTimeout, time.Minute)
	def(&o.ConfirmEvery, 2*time.Second)
	def(&o.GracefulTimeout, time.Minute)
	def(&o.CallHomeTimeout, 10*time.Minute)
	def(&o.SiteWindow, 10*time.Second)
	def(&o.PollEvery, time.Minute)
	def(&o.ReachableEvery, 5*time.Minute)
	def(&o.RelistEvery, 5*time.Minute)
	def(&o.RetryWait, time.Second)
	def(&o.RestoreBackoff, 10*time.Minute)
	return &Service{o: o, log: o.Logger, wake: make(chan struct{}, o.Workers), reach: map[string]eim.BMCReachable{}}, nil
}

// BMCPath is the ServeMux path of a host's BMC.
const BMCPath = "/v1/projects/{projectName}/compute/hosts/{hostId}/bmc"

// Routes returns the module's handlers by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"PUT " + BMCPath:                       s.api(s.putBMC),
		"GET " + BMCPath:                       s.api(s.getBMC),
		"DELETE " + BMCPath:                    s.api(s.deleteBMC),
		"GET " + JobsPath:                      s.api(s.listJobs),
		"POST " + JobsPath:                     s.api(s.postJob),
		"GET " + JobsPath + "/{jobId}":         s.api(s.getJob),
		"POST " + JobsPath + "/{jobId}/cancel": s.api(s.cancelJob),
		"DELETE " + JobsPath + "/{jobId}":      s.api(s.cancelJob),
	}
}

// call is what a handler works with: the project and the host of the path.
type call struct {
	project, hostID string
}

// api wraps a handler as the v1 API's project routes are: authenticate,
// find the project (one the caller may not see answers as not theirs),
// check the project's read role for reads and its write role for the
// rest, and check the host's ID.
func (s *Service) api(fn func(http.ResponseWriter, *http.Request, *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
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
			id := r.PathValue("hostId")
			if err := eim.CheckID(eim.KindHost, "hostId", id); err != nil {
				return err
			}
			ctx := eim.WithActor(r.Context(), eim.UserActor(p.Subject))
			return fn(w, r.WithContext(ctx), &call{project: proj.Name, hostID: id})
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
