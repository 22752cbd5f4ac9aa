// Package oob is the out-of-band control module: hosts' BMCs (Redfish,
// IPMI, Intel AMT) as resources of the v1 API, at
// /v1/projects/{projectName}/compute/hosts/{hostId}/bmc. Today it keeps
// them — the address, the credentials (the password sealed under the
// deployment's secrets key, never answered, redacted in the audit log) and
// the TLS trust — and nothing talks to the BMCs yet: power jobs, boot
// overrides and the capabilities and Reachable condition they fill come
// next (docs/oob.md). Its drivers are packages below it (oob/ipmi,
// oob/redfish, oob/amt), each adapted to Driver by a file of this package
// (redfishdriver.go, amtdriver.go).
package oob

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/seal"
)

// Store is what the module uses of the store.
type Store interface {
	eim.BMCStore
	FindProject(ctx context.Context, name string) (*eim.Project, error)
}

// Options configure a Service.
type Options struct {
	Store Store
	// Authenticator verifies the API's callers (auth.Verifier).
	Authenticator apiv2.Authenticator
	// Key seals the BMCs' passwords in the database (required).
	Key    *seal.Key
	Logger *slog.Logger
}

// Service is the oob module.
type Service struct {
	o   Options
	log *slog.Logger
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
	return &Service{o: o, log: o.Logger}, nil
}

// BMCPath is the ServeMux path of a host's BMC.
const BMCPath = "/v1/projects/{projectName}/compute/hosts/{hostId}/bmc"

// Routes returns the module's handlers by ServeMux pattern.
func (s *Service) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"PUT " + BMCPath:    s.api(s.putBMC),
		"GET " + BMCPath:    s.api(s.getBMC),
		"DELETE " + BMCPath: s.api(s.deleteBMC),
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
			if proj.Deleting && r.Method == http.MethodPut {
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
