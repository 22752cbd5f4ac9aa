package southbound

import (
	"context"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
)

// Run follows the change feed for the server's own host view (when
// Options.Hosts is nil) until ctx ends, and returns nil then; with a
// shared view, whose owner runs it, it only waits for ctx. Until the view
// follows the feed, node authentication reads the store on every call.
func (s *Server) Run(ctx context.Context) error {
	return hostview.RunAlong(ctx, s.hosts, s.ownHosts, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
}

// nodeCredentials returns host id's credentials from the host view,
// which reads the store for a host it does not hold (or while it does not
// follow the feed). A call whose read finds the store away is answered
// with what the view held when it lost the feed, for at most a node
// token's lifetime after the loss: a database restart then does not
// refuse a fleet's heartbeats (and so does not make its nodes look
// silent), while a host revoked through this process is still refused at
// once (its commit drops it from the view) and one revoked through
// another process within the token lifetime that nodes' tokens are
// trusted for anyway.
func (s *Server) nodeCredentials(ctx context.Context, project, id string) (eim.NodeCredentials, error) {
	h, err := s.hosts.Host(ctx, project, id)
	if err == nil {
		return h.Credentials(), nil
	}
	if eim.ErrorCode(err) == eim.EUNAVAILABLE && ctx.Err() == nil {
		if old, ok := s.hosts.Stale(id, s.ttl); ok && (project == "" || old.Project() == project) {
			return old.Credentials(), nil
		}
	}
	return eim.NodeCredentials{}, err
}
