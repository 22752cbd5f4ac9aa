package onboarding_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/onboarding"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

const (
	sbEnabled   = provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED
	sbDisabled  = provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED
	sbSetupMode = provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE
	sbNotUEFI   = provisioningv1.SecureBootState_SECURE_BOOT_STATE_NOT_UEFI
)

// instance gives host h an instance with the security feature.
func (e *env) instance(h *eim.Host, feature eim.SecurityFeature) *eim.Instance {
	e.t.Helper()
	osr, err := e.inv.Create(e.ctx, e.proj, &eim.OS{Name: "os-" + randHex(3), ImageURL: "https://x/img", Sha256: randHex(32)})
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.inv.Create(e.ctx, e.proj, &eim.Instance{Name: "i", Kind: eim.InstanceKindMetal, HostID: h.ResourceID,
		OSID: osr.Base().ResourceID, SecurityFeature: feature})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.(*eim.Instance)
}

// The Secure Boot state a device reports at Discover is recorded on its
// host with when it was read; an unchanged one is not written again, and
// UNSPECIFIED (an older agent) does not hide what was reported.
func TestDiscoverRecordsSecureBoot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.register(inventory.HostRegistration{UUID: newUUID()}) // REGISTERED: Discover answers without credentials
		if got := e.host(h.ResourceID); got.SecureBootState != eim.SecureBootStateUnspecified || got.SecureBootStateTimestamp != 0 {
			t.Fatalf("a new host: secureBootState %q at %d, want UNSPECIFIED at 0", got.SecureBootState, got.SecureBootStateTimestamp)
		}
		resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: sbEnabled})
		if err != nil || resp.GetStatus() != onboardingv1.DiscoverResponse_STATUS_REGISTERED {
			t.Fatalf("discover: got %v, %v; want REGISTERED", resp, err)
		}
		got := e.host(h.ResourceID)
		if got.SecureBootState != eim.SecureBootStateEnabled || got.SecureBootStateTimestamp == 0 {
			t.Fatalf("after discover: secureBootState %q at %d, want ENABLED with a time", got.SecureBootState, got.SecureBootStateTimestamp)
		}
		rev, _ := e.writes()
		for _, sb := range []provisioningv1.SecureBootState{sbEnabled, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED} {
			if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: sb}); err != nil {
				t.Fatal(err)
			}
		}
		if now, _ := e.writes(); now != rev {
			t.Errorf("an unchanged state and an unreported one wrote (revision %d, want %d)", now, rev)
		}
		if got := e.host(h.ResourceID); got.SecureBootState != eim.SecureBootStateEnabled {
			t.Errorf("after an unreported state: %q, want ENABLED kept", got.SecureBootState)
		}
		// The firmware changed: recorded at once.
		if _, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: sbNotUEFI}); err != nil {
			t.Fatal(err)
		}
		if got := e.host(h.ResourceID); got.SecureBootState != eim.SecureBootStateNotUEFI {
			t.Errorf("after a legacy BIOS boot: %q, want NOT_UEFI", got.SecureBootState)
		}
		// An onboarded device's state is recorded with its credentials.
		o := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
		resp, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: o.UUID, SecureBoot: sbDisabled})
		if err != nil {
			t.Fatal(err)
		}
		e.checkOnboarded(resp, o.ResourceID, 1)
		if got := e.host(o.ResourceID); got.SecureBootState != eim.SecureBootStateDisabled {
			t.Errorf("onboarded: %q, want DISABLED", got.SecureBootState)
		}
	})
}

// A device whose instance is known at Discover and asks for another
// Secure Boot state than the device booted with is refused there, as the
// original's onboarding does: no credentials, the host status "SecureBoot
// status mismatch" and the onboarding status saying why (both ERROR).
// Once the firmware (or the instance) is right it is onboarded, and the
// host status no longer shows the mismatch.
func TestDiscoverSecureBootMismatch(t *testing.T) {
	tests := []struct {
		name    string
		feature eim.SecurityFeature
		state   provisioningv1.SecureBootState
		reason  string // in the onboarding status
		fixed   provisioningv1.SecureBootState
	}{
		{"asks, setup mode", eim.SecurityFeatureSecureBootFDE, sbSetupMode, "setup mode", sbEnabled},
		{"asks, disabled", eim.SecurityFeatureSecureBootFDE, sbDisabled, "booted with Secure Boot disabled", sbEnabled},
		{"asks, legacy BIOS", eim.SecurityFeatureSecureBootFDE, sbNotUEFI, "legacy BIOS", sbEnabled},
		{"none, enforced", "SECURITY_FEATURE_NONE", sbEnabled, "has securityFeature SECURITY_FEATURE_NONE and the node booted with Secure Boot enforced", sbDisabled},
		{"unspecified, enforced", "", sbEnabled, "SECURITY_FEATURE_UNSPECIFIED", sbSetupMode},
	}
	run(t, func(t *testing.T, e *env) {
		for _, tt := range tests {
			h := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
			in := e.instance(h, tt.feature)
			_, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: tt.state})
			wantCode(t, err, connect.CodeFailedPrecondition, tt.name)
			if !strings.Contains(err.Error(), "SecureBoot status mismatch: ") {
				t.Errorf("%s: refusal %q does not say SecureBoot status mismatch", tt.name, err)
			}
			got := e.host(h.ResourceID)
			if got.HostStatus != eim.SecureBootMismatch || got.HostStatusIndicator != eim.StatusError {
				t.Errorf("%s: host status %q %s, want %q ERROR", tt.name, got.HostStatus, got.HostStatusIndicator, eim.SecureBootMismatch)
			}
			want := "SecureBoot status mismatch: instance " + in.ResourceID + " "
			if !strings.HasPrefix(got.OnboardingStatus, want) || !strings.Contains(got.OnboardingStatus, tt.reason) || got.OnboardingStatusIndicator != eim.StatusError {
				t.Errorf("%s: onboarding status %q %s, want %q… naming %q, ERROR", tt.name, got.OnboardingStatus, got.OnboardingStatusIndicator, want, tt.reason)
			}
			if got.NodeSecretHash != "" || got.CurrentState == eim.HostStateOnboarded {
				t.Errorf("%s: the refused device was onboarded (current %s)", tt.name, got.CurrentState)
			}
			if got.SecureBootState != eim.SecureBootState(tt.state.String()) {
				t.Errorf("%s: secureBootState %q, want %s", tt.name, got.SecureBootState, tt.state)
			}
			// Asking again changes nothing (a read-only answer on SQLite).
			rev, _ := e.writes()
			_, err = e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: tt.state})
			wantCode(t, err, connect.CodeFailedPrecondition, tt.name+", again")
			if now, _ := e.writes(); now != rev {
				t.Errorf("%s: a repeated refusal wrote (revision %d, want %d)", tt.name, now, rev)
			}
			// The firmware set right: onboarded.
			resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: tt.fixed})
			if err != nil {
				t.Fatalf("%s, fixed: %v", tt.name, err)
			}
			e.checkOnboarded(resp, h.ResourceID, 1)
			got = e.host(h.ResourceID)
			if got.HostStatus != onboarding.StatusBooting || got.HostStatusIndicator != eim.StatusInProgress {
				t.Errorf("%s, fixed: host status %q %s, want %q IN_PROGRESS", tt.name, got.HostStatus, got.HostStatusIndicator, onboarding.StatusBooting)
			}
			if got.SecureBootState != eim.SecureBootState(tt.fixed.String()) {
				t.Errorf("%s, fixed: secureBootState %q, want %s", tt.name, got.SecureBootState, tt.fixed)
			}
		}
		// Not checked here: an agent that does not report the state (left to
		// provisioning, which refuses it for an instance asking for Secure
		// Boot), a matching state, and a device that runs its OS already.
		for _, c := range []struct {
			name      string
			feature   eim.SecurityFeature
			state     provisioningv1.SecureBootState
			installed bool
		}{
			{"not reported", eim.SecurityFeatureSecureBootFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED, false},
			{"asks, enforced", eim.SecurityFeatureSecureBootFDE, sbEnabled, false},
			{"none, disabled", "SECURITY_FEATURE_NONE", sbDisabled, false},
			{"installed", eim.SecurityFeatureSecureBootFDE, sbDisabled, true},
		} {
			h := e.register(inventory.HostRegistration{UUID: newUUID(), AutoOnboard: true})
			e.instance(h, c.feature)
			resp, err := e.discover(&onboardingv1.DiscoverRequest{Uuid: h.UUID, SecureBoot: c.state, Installed: c.installed})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			e.checkOnboarded(resp, h.ResourceID, 1)
		}
	})
}
