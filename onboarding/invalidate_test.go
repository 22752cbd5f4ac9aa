package onboarding_test

import (
	"context"
	"sync"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
)

// An invalidated host loses its node credentials and shows current
// UNTRUSTED, "Invalidated" (IDLE), as the original's onboarding manager
// wrote: whether invalidated before the module starts (the re-list) or
// while it runs (the change feed).
func TestInvalidationFinished(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		onboard := func(name string) *eim.Host {
			h := e.register(inventory.HostRegistration{Name: name, UUID: newUUID(), AutoOnboard: true})
			if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID}); err != nil {
				t.Fatal(err)
			}
			return e.host(h.ResourceID)
		}
		early := onboard("early")
		if err := e.inv.InvalidateHost(e.ctx, e.proj, early.ResourceID, "stolen"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := e.svc.Run(ctx); err != nil {
				t.Error(err)
			}
		})
		defer func() { cancel(); wg.Wait() }()

		late := onboard("late")
		registered := e.register(inventory.HostRegistration{UUID: newUUID()})
		for _, h := range []*eim.Host{late, registered} {
			if err := e.inv.InvalidateHost(e.ctx, e.proj, h.ResourceID, "stolen"); err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range []*eim.Host{early, late, registered} {
			waitFor(t, "invalidation of "+h.Name, func() bool { return e.host(h.ResourceID).CurrentState == eim.HostStateUntrusted })
			got := e.host(h.ResourceID)
			if got.HostStatus != "Invalidated" || got.HostStatusIndicator != eim.StatusIdle || got.HostStatusTimestamp == 0 {
				t.Errorf("%s: got status %q/%s/%d, want Invalidated/IDLE/now", h.Name, got.HostStatus, got.HostStatusIndicator, got.HostStatusTimestamp)
			}
			if got.NodeSecretHash != "" || (h.NodeSecretHash != "" && got.NodeCredGen != h.NodeCredGen+1) {
				t.Errorf("%s: credentials not revoked: hash %q gen %d (was %d)", h.Name, got.NodeSecretHash, got.NodeCredGen, h.NodeCredGen)
			}
			if got.Note != "stolen" || got.DesiredState != eim.HostStateUntrusted {
				t.Errorf("%s: got note %q desired %s, want them kept", h.Name, got.Note, got.DesiredState)
			}
		}
		// The node cannot come back.
		_, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: late.UUID})
		if err == nil {
			t.Fatal("discover of an invalidated host: got an answer, want a refusal")
		}
	})
}
