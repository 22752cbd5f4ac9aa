package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
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
	// Backoff spaces the retries of a call the server did not answer (it
	// is restarting or unreachable: the client's EUNAVAILABLE), as the
	// nodes' calls are spaced: from a quarter of Min, doubling up to Max,
	// with jitter; zero values are agent.DefaultBackoff's.
	Backoff agent.Backoff
	// OnHost is called after each host (and its instance) is created.
	OnHost func()
	// OnRetry, when set, is called before each retry.
	OnRetry func(err error)
}

// Register registers every identity as a host named after its hostname with
// autoOnboard, and creates its instance when r.OSID is set. It returns the
// host IDs in the order of ids, or the first error.
//
// A call that got no answer is retried until ctx ends; since it may have
// been carried out, the retry first looks for what it would create (the
// host by UUID or serial with the identity's name, the host's instance),
// so that a registration outlives a server restart at any moment without
// duplicates or a host left without its instance. A refusal (a host that
// already existed before, a bad OS ID) is not retried.
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
			var hostID string
			err := r.retry(ctx, func(retried bool) error {
				if retried {
					found, err := r.findHost(ctx, id)
					if err != nil || found != "" {
						hostID = found
						return err
					}
				}
				h, err := r.Client.RegisterHost(ctx, r.Project, client.HostRegistration{
					Name: id.Hostname, UUID: id.UUID, SerialNumber: id.Serial, AutoOnboard: true,
				})
				if err == nil {
					hostID = h.ResourceID
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("register %s: %w", id.Hostname, err)
			}
			hostIDs[i] = hostID
			if r.OSID != "" {
				in := map[string]string{"kind": string(eim.InstanceKindMetal), "name": id.Hostname, "hostID": hostID, "osID": r.OSID}
				err := r.retry(ctx, func(retried bool) error {
					if retried {
						found, err := r.count(ctx, eim.KindInstance, `host.resourceId="`+hostID+`"`)
						if err != nil || found > 0 {
							return err
						}
					}
					return r.Client.Create(ctx, r.Project, eim.KindInstance, in, nil)
				})
				if err != nil {
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

// retry calls call until it succeeds, fails for a reason other than an
// unanswered call, or ctx ends; retried tells call that an earlier try may
// have been carried out.
func (r Registration) retry(ctx context.Context, call func(retried bool) error) error {
	b := r.Backoff
	if b.Min <= 0 {
		b.Min = agent.DefaultBackoff.Min
	}
	if b.Max < b.Min {
		b.Max = max(b.Min, agent.DefaultBackoff.Max)
	}
	d := max(b.Min/4, time.Millisecond)
	for try := 1; ; try++ {
		err := call(try > 1)
		if err == nil || eim.ErrorCode(err) != eim.EUNAVAILABLE || ctx.Err() != nil {
			return err
		}
		if r.OnRetry != nil {
			r.OnRetry(err)
		}
		t := time.NewTimer(d + rand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (tried %d times)", err, try)
		case <-t.C:
		}
		d = min(2*d, b.Max)
	}
}

// findHost returns the ID of the host registered with id's UUID (or
// serial) and name, "" if there is none; a host with them under another
// name is a conflict.
func (r Registration) findHost(ctx context.Context, id Identity) (string, error) {
	f := `uuid="` + id.UUID + `"`
	if id.UUID == "" {
		f = `serialNumber="` + id.Serial + `"`
	}
	page, err := r.Client.List(ctx, r.Project, eim.KindHost, client.ListOptions{Filter: f, PageSize: 1})
	if err != nil || len(page.Items) == 0 {
		return "", err
	}
	var h struct {
		ResourceID string `json:"resourceId"`
		Name       string `json:"name"`
	}
	if err := json.Unmarshal(page.Items[0], &h); err != nil {
		return "", fmt.Errorf("host: %w", err)
	}
	if h.Name != id.Hostname {
		return "", eim.Errorf(eim.ECONFLICT, "host %s has this identity under the name %s", h.ResourceID, strconv.Quote(h.Name))
	}
	return h.ResourceID, nil
}

// count counts the resources of kind that filter selects.
func (r Registration) count(ctx context.Context, kind eim.Kind, filter string) (int, error) {
	page, err := r.Client.List(ctx, r.Project, kind, client.ListOptions{Filter: filter, PageSize: 1})
	if err != nil {
		return 0, err
	}
	return page.Total, nil
}
