package onboarding_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
)

func (e *env) instanceOf(hostID string) []*eim.Instance {
	e.t.Helper()
	var out []*eim.Instance
	if err := e.store.View(e.ctx, "", func(tx eim.Tx) error {
		items, _, err := tx.List(e.ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}})
		for _, r := range items {
			out = append(out, r.(*eim.Instance))
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Onboarded hosts of a project with a default OS get one instance with the
// settings' OS, local account and custom configs; others get none.
func TestZeroTouchProvisioning(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		osr, err := e.inv.Create(e.ctx, e.proj, &eim.OS{Name: "ubuntu-" + randHex(3), ImageURL: "https://x/img", Sha256: randHex(32),
			SecurityFeature: "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"})
		if err != nil {
			t.Fatal(err)
		}
		la, err := e.inv.Create(e.ctx, e.proj, &eim.LocalAccount{Username: "ops", SSHKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx4dnU0b2xcb0pXh8X8lYp2mHyqUXWfQ4YQz6P3G8yq ops@x"})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := e.inv.Create(e.ctx, e.proj, &eim.CustomConfig{Name: "cc-" + randHex(3), Config: "#cloud-config\n"})
		if err != nil {
			t.Fatal(err)
		}
		// Onboarded before the reconciler starts: found by the re-list.
		early := e.register(inventory.HostRegistration{Name: "early", UUID: newUUID(), AutoOnboard: true})
		if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: early.UUID}); err != nil {
			t.Fatal(err)
		}
		e.setSettings(e.proj, func(s *eim.ProjectSettings) {
			s.DefaultOSID, s.DefaultLocalAccountID = osr.Base().ResourceID, la.Base().ResourceID
			s.DefaultCustomConfigIDs = []string{cc.Base().ResourceID}
			s.OSSecurityFeatureEnable = true
		})
		plain := e.newProject()
		other, err := e.inv.RegisterHost(e.ctx, plain, inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		if err != nil {
			t.Fatal(err)
		}
		registered := e.register(inventory.HostRegistration{UUID: newUUID()})

		ctx, cancel := context.WithCancel(e.ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := e.svc.Run(ctx); err != nil {
				t.Error(err)
			}
		})
		defer func() { cancel(); wg.Wait() }()

		waitFor(t, "instance of a host onboarded before the start", func() bool { return len(e.instanceOf(early.ResourceID)) == 1 })
		// Onboarded while running: found by the change feed.
		late := e.register(inventory.HostRegistration{Name: "late", UUID: newUUID(), AutoOnboard: true})
		if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: late.UUID}); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{other.UUID, registered.UUID} {
			if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: d}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "instance of a host onboarded while running", func() bool { return len(e.instanceOf(late.ResourceID)) == 1 })
		in := e.instanceOf(late.ResourceID)[0]
		if in.Kind != eim.InstanceKindMetal || in.Name != "late" || in.OSID != osr.Base().ResourceID || in.LocalAccountID != la.Base().ResourceID ||
			len(in.CustomConfigIDs) != 1 || in.CustomConfigIDs[0] != cc.Base().ResourceID || in.DesiredState != eim.InstanceStateRunning ||
			in.SecurityFeature != "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION" {
			t.Fatalf("instance: %+v", in)
		}
		// Once more a host event: still one instance.
		e.edit(late.ResourceID, func(h *eim.Host) { h.Note = "touched" })
		e.edit(early.ResourceID, func(h *eim.Host) { h.Note = "touched" })
		// The feed is ordered: once a later host's instance exists, the
		// events above were handled.
		marker := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: marker.UUID}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "instance of the marker host", func() bool { return len(e.instanceOf(marker.ResourceID)) == 1 })
		for _, h := range []*eim.Host{early, late} {
			if n := len(e.instanceOf(h.ResourceID)); n != 1 {
				t.Errorf("host %s: %d instances, want 1", h.ResourceID, n)
			}
		}
		for _, h := range []*eim.Host{other, registered} {
			if n := len(e.instanceOf(h.ResourceID)); n != 0 {
				t.Errorf("host %s (no default OS or not onboarded): %d instances, want 0", h.ResourceID, n)
			}
		}
	})
}
