// Package objstore is where devices' workload data goes: each project's
// object storage setting (an S3-compatible bucket, its secret key sealed
// under the deployment's secrets key) at /v1/projects/{p}/objectstorage,
// the granter that gives a device leave to upload (or delete) one file at
// a time under its own prefix without ever holding the bucket's
// credentials (eim.UploadGranter: SigV4-presigned requests, bound to the
// file's SHA-256, short-lived), and the embedded store used when a project
// has no setting: files kept under the data directory, uploaded through
// HMAC-signed URLs of the agent listener and served back to users at
// /v1/projects/{p}/edgedata/{hostId}/… (docs/objectstorage.md).
//
// It is a shared part, not a module of its own: the workloads module
// calls its granter when a device asks (GrantUploads), and the server
// mounts its routes with the modules that need them.
package objstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/seal"
)

// Store is what the package uses of the store.
type Store interface {
	eim.ObjectStorageStore
	FindProject(ctx context.Context, name string) (*eim.Project, error)
	FindProjectByID(ctx context.Context, id string) (*eim.Project, error)
}

// Options configure a Service.
type Options struct {
	Store Store
	// Authenticator verifies the API's callers (auth.Verifier).
	Authenticator apiv2.Authenticator
	// Key seals the secret keys in the database and signs the embedded
	// store's upload URLs (required).
	Key *seal.Key
	// DataDir holds the embedded store (DataDir/objects).
	DataDir string
	// AgentURL is the agent listener's base URL as devices reach it: the
	// embedded store's uploads go there ("" disables the embedded store:
	// a project without object storage has its grants refused).
	AgentURL string
	// GrantTTL is how long a grant is valid (default 15 minutes).
	GrantTTL time.Duration
	// GrantRate and GrantBurst limit the grants of one device: at most
	// GrantBurst at once, refilled at GrantRate per second (defaults
	// 1000 and 1000/60: a thousand files a minute).
	GrantRate  float64
	GrantBurst int
	// CheckTimeout bounds the check of a bucket at PUT (default 10 s).
	CheckTimeout time.Duration
	// DialContext dials for the check (default a net.Dialer's).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Service is the object storage part.
type Service struct {
	o   Options
	log *slog.Logger
	mac []byte // signs the embedded store's URLs

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by project/host
	buckets  map[string]bool          // the devices' buckets known to exist
}

// New returns the part.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Authenticator == nil {
		return nil, errors.New("objstore: a store and an authenticator are required")
	}
	if o.Key == nil {
		return nil, errors.New("objstore: a secrets key is required to seal object storage secrets")
	}
	if o.GrantTTL <= 0 {
		o.GrantTTL = 15 * time.Minute
	}
	if o.GrantBurst <= 0 {
		o.GrantBurst = 1000
	}
	if o.GrantRate <= 0 {
		o.GrantRate = 1000.0 / 60
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.AgentURL = strings.TrimSuffix(o.AgentURL, "/")
	return &Service{o: o, log: o.Logger, mac: o.Key.Derive("objstore-upload-url"), limiters: map[string]*rate.Limiter{}, buckets: map[string]bool{}}, nil
}

var (
	_ eim.UploadGranter   = (*Service)(nil)
	_ eim.DownloadGranter = (*Service)(nil)
)

// Paths of the API and of the agent listener.
const (
	SettingPath  = "/v1/projects/{projectName}/objectstorage"
	EdgeDataPath = "/v1/projects/{projectName}/edgedata/{hostId}"
	// UploadPath is the embedded store's endpoint on the agent listener.
	UploadPath = "/objects/"
)

// Routes returns the API's handlers by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"PUT " + SettingPath:                    s.api(s.putSetting),
		"GET " + SettingPath:                    s.api(s.getSetting),
		"DELETE " + SettingPath:                 s.api(s.deleteSetting),
		"GET " + EdgeDataPath:                   s.api(s.listEdgeData),
		"GET " + EdgeDataPath + "/{path...}":    s.api(s.getEdgeData),
		"PUT " + EdgeDataPath + "/{path...}":    s.api(s.putEdgeData),
		"DELETE " + EdgeDataPath + "/{path...}": s.api(s.deleteEdgeData),
	}
}

// AgentRoutes returns the embedded store's handlers for the agent
// listener, by ServeMux pattern. They need no node token: the URL's
// signature is the leave.
func (s *Service) AgentRoutes() map[string]http.Handler {
	h := http.HandlerFunc(s.serveUpload)
	return map[string]http.Handler{
		"GET " + UploadPath + "{project}/{key...}":    h,
		"PUT " + UploadPath + "{project}/{key...}":    h,
		"DELETE " + UploadPath + "{project}/{key...}": h,
	}
}

// root is the embedded store's directory.
func (s *Service) root() string { return filepath.Join(s.o.DataDir, "objects") }

// call is what an API handler works with.
type call struct {
	project string
}

// api wraps a handler as the v1 API's project routes are: authenticate,
// find the project (one the caller may not see answers as not theirs),
// check the project's read role for reads and its write role for the
// rest.
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
			proj, err := apiv2.Project(r, s.o.Store)
			if err != nil {
				return err
			}
			allowed := p.CanWrite(proj)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				allowed = p.CanRead(proj)
			}
			if !allowed {
				return eim.Errorf(eim.EFORBIDDEN, "no access to project %q", name)
			}
			if proj.Deleting && r.Method == http.MethodPut {
				return eim.Errorf(eim.ECONFLICT, "project %s is being deleted", proj.Name)
			}
			ctx := eim.WithActor(r.Context(), eim.UserActor(p.Subject))
			return fn(w, r.WithContext(ctx), &call{project: proj.Name})
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
