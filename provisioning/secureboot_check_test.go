package provisioning_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// An instance's securityFeature is checked against the Secure Boot state
// the node reports, as the original's onboarding does: Secure Boot + FDE
// needs Secure Boot enforced, and NONE or UNSPECIFIED refuses a node that
// enforces it. A mismatch fails the workflow with the reason, the
// instance shows "Provisioning Failed: SecureBoot status mismatch: …" and
// the host "SecureBoot status mismatch".
func TestGetWorkflowChecksSecureBoot(t *testing.T) {
	const (
		sbFDE = eim.SecurityFeature("SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION")
		none  = eim.SecurityFeature("SECURITY_FEATURE_NONE")
	)
	type sb = provisioningv1.SecureBootState
	tests := []struct {
		name    string
		feature eim.SecurityFeature
		state   sb
		reason  string // "" when provisioning goes ahead
	}{
		{"required and enforced", sbFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, ""},
		{"required, disabled", sbFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED, "booted with Secure Boot disabled"},
		{"required, setup mode", sbFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE, "setup mode"},
		{"required, legacy BIOS", sbFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_NOT_UEFI, "legacy BIOS"},
		{"required, not reported", sbFDE, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED, "did not report"},
		{"none, enforced", none, provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, "Secure Boot enforced"},
		{"unspecified, enforced", "", provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, "SECURITY_FEATURE_UNSPECIFIED"},
		{"none, disabled", none, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED, ""},
		{"unspecified, not reported", "", provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED, ""},
	}
	run(t, func(t *testing.T, e *env) {
		os := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		for _, tt := range tests {
			h := e.host()
			in := e.instance(h, os, func(in *eim.Instance) { in.SecurityFeature = tt.feature })
			got := e.getWorkflowSB(h.ResourceID, tt.state)
			inst, host := e.getInstance(in.ResourceID), e.getHost(h.ResourceID)
			if tt.reason == "" {
				if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN {
					t.Errorf("%s: got %v (%s), want RUN", tt.name, got.Disposition, got.Message)
				}
				continue
			}
			if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED ||
				!strings.HasPrefix(got.Message, "SecureBoot status mismatch: ") || !strings.Contains(got.Message, tt.reason) {
				t.Errorf("%s: got %v %q, want FAILED with the mismatch and %q", tt.name, got.Disposition, got.Message, tt.reason)
			}
			if !strings.HasPrefix(inst.ProvisioningStatus, "Provisioning Failed: SecureBoot status mismatch: ") || inst.ProvisioningStatusIndicator != eim.StatusError {
				t.Errorf("%s: instance status %q %s", tt.name, inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
			}
			if host.HostStatus != "SecureBoot status mismatch" || host.HostStatusIndicator != eim.StatusError {
				t.Errorf("%s: host status %q %s, want \"SecureBoot status mismatch\" ERROR", tt.name, host.HostStatus, host.HostStatusIndicator)
			}
		}
	})
}
