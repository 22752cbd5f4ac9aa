package sim

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// Registration pre-registers a fleet through the northbound REST API.
type Registration struct {
	Client  *client.Client
	Project string
	// OSID, when set, gives every host an instance with this OS (zero-touch
	// by instance); empty relies on the project's default OS, or leaves the
	// hosts waiting for an instance.
	OSID        string
	Concurrency int // requests in flight; 0 means 16
	// OnHost is called after each host (and its instance) is created.
	OnHost func()
}

// Register registers every identity as a host named after its hostname with
// autoOnboard, and creates its instance when r.OSID is set. It returns the
// host IDs in the order of ids, or the first error.
func (r Registration) Register(ctx context.Context, ids []Identity) ([]string, error) {
	conc := r.Concurrency
	if conc <= 0 {
		conc = 16
	}
	hostIDs := make([]string, len(ids))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for i, id := range ids {
		g.Go(func() error {
			h, err := r.Client.RegisterHost(ctx, r.Project, client.HostRegistration{
				Name: id.Hostname, UUID: id.UUID, SerialNumber: id.Serial, AutoOnboard: true,
			})
			if err != nil {
				return fmt.Errorf("register %s: %w", id.Hostname, err)
			}
			hostIDs[i] = h.ResourceID
			if r.OSID != "" {
				in := map[string]string{"kind": string(eim.InstanceKindMetal), "name": id.Hostname, "hostID": h.ResourceID, "osID": r.OSID}
				if err := r.Client.Create(ctx, r.Project, eim.KindInstance, in, nil); err != nil {
					return fmt.Errorf("instance of %s: %w", id.Hostname, err)
				}
			}
			if r.OnHost != nil {
				r.OnHost()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return hostIDs, nil
}
