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
			// A node with a TPM: full-disk encryption can seal to it.
			got := e.getWorkflowMB(h.ResourceID, tt.state, &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, Error: "not read in this test"})
			inst, host := e.getInstance(in.ResourceID), e.getHost(h.ResourceID)
			// The state is recorded on the host, when reported.
			wantState, wantAt := eim.SecureBootState(tt.state.String()), true
			if tt.state == provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED {
				wantAt = false
			}
			if host.SecureBootState != wantState || (host.SecureBootStateTimestamp != 0) != wantAt {
				t.Errorf("%s: host secureBootState %q at %d, want %q (a time: %v)", tt.name, host.SecureBootState, host.SecureBootStateTimestamp, wantState, wantAt)
			}
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

// Full-disk encryption needs a TPM 2.0 to seal the disk's key to: an
// instance asking for it on a node that reported none (or nothing: an
// agent older than the report) fails before anything is written, the
// instance saying why and the host "No TPM for full-disk encryption". With
// a TPM the workflow encrypts the root right after the image is written,
// sealing to PCR 7; an instance that does not ask has no such action.
func TestGetWorkflowChecksTPM(t *testing.T) {
	const (
		sbFDE = eim.SecurityFeature("SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION")
		none  = eim.SecurityFeature("SECURITY_FEATURE_NONE")
	)
	enabled, disabled := provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED
	present := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, Error: "not read in this test"}
	absent := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}
	tests := []struct {
		name    string
		feature eim.SecurityFeature
		sb      provisioningv1.SecureBootState
		mb      *provisioningv1.MeasuredBoot
		reason  string // "" when provisioning goes ahead
		encrypt bool
	}{
		{"FDE with a TPM", sbFDE, enabled, present, "", true},
		{"FDE without a TPM", sbFDE, enabled, absent, "the node has no TPM 2.0 to seal its disk key to", false},
		{"FDE, TPM not reported", sbFDE, enabled, nil, "did not report its TPM", false},
		{"none without a TPM", none, disabled, absent, "", false},
		{"none with a TPM", none, disabled, present, "", false},
	}
	run(t, func(t *testing.T, e *env) {
		os := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		for _, tt := range tests {
			h := e.host()
			in := e.instance(h, os, func(in *eim.Instance) { in.SecurityFeature = tt.feature })
			got := e.getWorkflowMB(h.ResourceID, tt.sb, tt.mb)
			inst, host := e.getInstance(in.ResourceID), e.getHost(h.ResourceID)
			if tt.reason != "" {
				const want = "No TPM for full-disk encryption: "
				if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED || !strings.HasPrefix(got.Message, want) || !strings.Contains(got.Message, tt.reason) {
					t.Errorf("%s: got %v %q, want FAILED %q… with %q", tt.name, got.Disposition, got.Message, want, tt.reason)
				}
				if !strings.HasPrefix(inst.ProvisioningStatus, "Provisioning Failed: "+want) || inst.ProvisioningStatusIndicator != eim.StatusError {
					t.Errorf("%s: instance status %q %s", tt.name, inst.ProvisioningStatus, inst.ProvisioningStatusIndicator)
				}
				if host.HostStatus != "No TPM for full-disk encryption" || host.HostStatusIndicator != eim.StatusError {
					t.Errorf("%s: host status %q %s, want \"No TPM for full-disk encryption\" ERROR", tt.name, host.HostStatus, host.HostStatusIndicator)
				}
				continue
			}
			if got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN {
				t.Fatalf("%s: got %v (%s), want RUN", tt.name, got.Disposition, got.Message)
			}
			var names []string
			var enc *provisioningv1.EncryptRoot
			for _, a := range got.Workflow.GetActions() {
				names = append(names, a.GetName())
				if a.GetEncryptRoot() != nil {
					enc = a.GetEncryptRoot()
				}
			}
			if !tt.encrypt {
				if enc != nil {
					t.Errorf("%s: actions %q: an encrypt-root the instance does not ask for", tt.name, names)
				}
				continue
			}
			if len(names) < 3 || names[1] != "stream-image" || names[2] != "encrypt-root" || enc == nil {
				t.Fatalf("%s: actions %q, want encrypt-root right after stream-image", tt.name, names)
			}
			if len(enc.GetPcrs()) != 1 || enc.GetPcrs()[0] != 7 || enc.GetLabel() != "eim-root" || enc.GetPartition() != 0 || enc.GetRecoveryKey() != "" {
				t.Errorf("%s: encrypt-root %v, want PCR 7, label eim-root, the largest partition, no key", tt.name, enc)
			}
		}
	})
}

// A node waiting for its instance has its Secure Boot state recorded on
// its host by its first request; the next requests, with the state
// unchanged, write nothing (the recorded time is renewed only after
// inventory.SecureBootRefresh); a changed state is recorded at once.
func TestGetWorkflowRecordsSecureBoot(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host()
		enabled, disabled := provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED, provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED
		if got := e.getWorkflowMB(h.ResourceID, enabled, nil); got.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT {
			t.Fatalf("got %v, want WAIT (no instance)", got.Disposition)
		}
		got := e.getHost(h.ResourceID)
		if got.SecureBootState != eim.SecureBootStateEnabled || got.SecureBootStateTimestamp == 0 {
			t.Fatalf("host secureBootState %q at %d, want ENABLED with a time", got.SecureBootState, got.SecureBootStateTimestamp)
		}
		rev, err := e.store.Revision(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.getWorkflowMB(h.ResourceID, enabled, nil)
		e.getWorkflowMB(h.ResourceID, provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED, nil)
		if now, err := e.store.Revision(e.ctx); err != nil || now != rev {
			t.Errorf("unchanged and unreported states: revision %d (%v), want %d: nothing written", now, err, rev)
		}
		e.getWorkflowMB(h.ResourceID, disabled, nil)
		if got := e.getHost(h.ResourceID); got.SecureBootState != eim.SecureBootStateDisabled {
			t.Errorf("after a boot with Secure Boot off: %q, want DISABLED", got.SecureBootState)
		}
	})
}
