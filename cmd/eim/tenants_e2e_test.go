package main

import (
	"context"
	"regexp"
	"testing"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/onboarding"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
)

// One tenant cannot take another's machines: with project B registering
// the identity of a machine project A registered (its serial number, or
// its serial where A gave the UUID), the machine is held until it proves
// its project — both hosts say so, the machine is told to retry — and,
// booted with A's enrollment token, a simulated node with that fixed
// identity is provisioned to RUNNING in A; B's host shows the conflict,
// in B only.
func TestCrossTenantOnboardingSQLite(t *testing.T) { testCrossTenantOnboarding(t, startDay0(t)) }

func TestCrossTenantOnboardingPostgres(t *testing.T) {
	testCrossTenantOnboarding(t, startDay0(t, "--database", freshPostgres(t)))
}

// namesHostRE matches a host ID in a message.
var namesHostRE = regexp.MustCompile(`host-[0-9a-f]{8}`)

func testCrossTenantOnboarding(t *testing.T, s *day0Server) {
	ctx := context.Background()
	for _, p := range []string{"proja", "projb"} {
		if _, err := s.admin.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	osA, osB := s.createOS(t, "proja"), s.createOS(t, "projb")
	pa, err := s.admin.UpdateProjectSettings(ctx, "proja", client.SettingsChange{EnrollmentToken: "new"})
	if err != nil || pa.EnrollmentToken == "" {
		t.Fatalf("proja's enrollment token: %v, %v", pa, err)
	}
	tests := []struct {
		name string
		// the machine, and what each project registers of it
		machine sim.Identity
		regA    sim.Identity
		regB    sim.Identity
	}{
		{"the same serial",
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a1", Serial: "SNPROJA001"},
			sim.Identity{Serial: "SNPROJA001", Hostname: "a-1"},
			sim.Identity{Serial: "SNPROJA001", Hostname: "b-1"}},
		{"UUID in A, serial in B",
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a2", Serial: "SNPROJA002"},
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a2", Hostname: "a-2"},
			sim.Identity{Serial: "SNPROJA002", Hostname: "b-2"}},
		{"the same UUID",
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a3", Serial: "SNPROJA003"},
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a3", Hostname: "a-3"},
			sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-0000000000a3", Hostname: "b-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hostA := register(t, s, "proja", osA, []sim.Identity{tt.regA})[0]
			// B's registration is accepted (409 would tell B that the
			// identity exists elsewhere) and comes later.
			hostB := register(t, s, "projb", osB, []sim.Identity{tt.regB})[0]

			machine := tt.machine
			machine.Hostname = "machine"
			status := func(project, id string) eim.Host {
				t.Helper()
				var h eim.Host
				if err := s.admin.Get(ctx, project, eim.KindHost, id, &h); err != nil {
					t.Fatal(err)
				}
				return h
			}
			// Without proof of its project the machine is held: told to
			// retry, naming nothing, and both projects see it.
			ob := onboardingv1connect.NewOnboardingServiceClient(s.agentClient(t), s.agentURL)
			resp, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: machine.UUID, Serial: machine.Serial}))
			if err != nil || resp.Msg.GetStatus() != onboardingv1.DiscoverResponse_STATUS_REGISTERED || resp.Msg.GetHostId() != "" || resp.Msg.GetProject() != "" {
				t.Fatalf("discover without a token: got %v, %v; want REGISTERED naming no host or project", resp, err)
			}
			for _, h := range []struct{ project, id string }{{"proja", hostA}, {"projb", hostB}} {
				if got := status(h.project, h.id); got.RegistrationStatus != onboarding.StatusHeld || got.CurrentState == eim.HostStateOnboarded {
					t.Errorf("%s's host while held: registration %q, current %s; want %q, not onboarded", h.project, got.RegistrationStatus, got.CurrentState, onboarding.StatusHeld)
				}
			}

			// Booted with A's enrollment token it is A's.
			rep := s.fleet(t, ctx, []sim.Identity{machine}, sim.Options{Seed: 7, EnrollToken: pa.EnrollmentToken})
			wantReport(t, rep, 1, 0)
			s.checkRunning(t, "proja", []string{hostA})

			if b := status("projb", hostB); b.RegistrationStatus != onboarding.StatusClaimed || b.RegistrationStatusIndicator != eim.StatusError || b.CurrentState == eim.HostStateOnboarded {
				t.Errorf("B's host: registration %q %s, current %s; want %q ERROR, not onboarded", b.RegistrationStatus, b.RegistrationStatusIndicator, b.CurrentState, onboarding.StatusClaimed)
			}
			// A sees nothing of B.
			hosts, _, err := client.ListOf[eim.Host](ctx, s.admin, "proja", client.ListOptions{PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hosts {
				if h.ResourceID == hostA && (h.RegistrationStatus != onboarding.StatusRegistered || h.RegistrationStatusIndicator != eim.StatusIdle) {
					t.Errorf("A's host: registration %q %s, want %q IDLE", h.RegistrationStatus, h.RegistrationStatusIndicator, onboarding.StatusRegistered)
				}
			}

			// The machine calling again (an unauthenticated caller) is
			// refused as provisioned, naming no host.
			_, err = ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: machine.UUID, Serial: machine.Serial}))
			if connect.CodeOf(err) != connect.CodeFailedPrecondition || namesHostRE.MatchString(err.Error()) {
				t.Errorf("discover of the provisioned machine: got %v, want FailedPrecondition naming no host", err)
			}
		})
	}
}
