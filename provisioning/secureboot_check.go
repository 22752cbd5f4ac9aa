package provisioning

import (
	"fmt"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// SecureBootMismatch is the status text the original's onboarding gives a
// host whose firmware's Secure Boot state is not what its instance asks
// for; the instance's provisioning status says why after it.
const SecureBootMismatch = "SecureBoot status mismatch"

// sbRequired is the security feature that asks for Secure Boot.
const sbRequired = eim.SecurityFeature("SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION")

// checkSecureBoot compares the instance's security feature with the
// node's Secure Boot state, as the original's onboarding does: an instance
// asking for Secure Boot and FDE needs a node that booted with Secure Boot
// enforced; one asking for none (NONE or UNSPECIFIED) is refused a node
// that enforces it. A node that did not say (an agent older than the
// report) passes unless the instance asks for Secure Boot. The error is
// EINVALID, which fails the workflow with its message.
func checkSecureBoot(in *eim.Instance, state provisioningv1.SecureBootState) error {
	enforced := state == provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED
	switch {
	case in.SecurityFeature == sbRequired && state == provisioningv1.SecureBootState_SECURE_BOOT_STATE_UNSPECIFIED:
		return eim.Errorf(eim.EINVALID, "%s: instance %s asks for %s and the node did not report its Secure Boot state (an eim-agent older than the check, or efivarfs not readable)",
			SecureBootMismatch, in.ResourceID, sbRequired)
	case in.SecurityFeature == sbRequired && !enforced:
		return eim.Errorf(eim.EINVALID, "%s: instance %s asks for %s and the node booted %s: enroll the deployment's Secure Boot certificate (eim secureboot export) and turn Secure Boot on in its firmware",
			SecureBootMismatch, in.ResourceID, sbRequired, describeSB(state))
	case in.SecurityFeature != sbRequired && enforced:
		return eim.Errorf(eim.EINVALID, "%s: instance %s has securityFeature %s and the node booted with Secure Boot enforced: set the instance's securityFeature to %s, or turn Secure Boot off",
			SecureBootMismatch, in.ResourceID, orUnspecified(in.SecurityFeature), sbRequired)
	}
	return nil
}

func describeSB(s provisioningv1.SecureBootState) string {
	switch s {
	case provisioningv1.SecureBootState_SECURE_BOOT_STATE_NOT_UEFI:
		return "in legacy BIOS mode (no Secure Boot)"
	case provisioningv1.SecureBootState_SECURE_BOOT_STATE_DISABLED:
		return "with Secure Boot disabled"
	case provisioningv1.SecureBootState_SECURE_BOOT_STATE_SETUP_MODE:
		return "with its firmware in setup mode (no platform key: Secure Boot not enforced)"
	}
	return fmt.Sprintf("in Secure Boot state %v", s)
}

func orUnspecified(f eim.SecurityFeature) eim.SecurityFeature {
	if f == "" {
		return "SECURITY_FEATURE_UNSPECIFIED"
	}
	return f
}

// NoTPMForFDE is the host's status when its instance asks for full-disk
// encryption and the node has no TPM 2.0 to seal the disk's key to.
const NoTPMForFDE = "No TPM for full-disk encryption"

// fdePCRs are the PCRs the disk key is sealed to: 7, the Secure Boot
// state (its variables, and the db certificate that verified the boot
// loader), which the micro-OS and the installed OS share.
const fdePCRs = "7"

// checkTPM refuses full-disk encryption on a node that reported no TPM
// 2.0 (or nothing: an eim-agent older than the report, which cannot
// encrypt either), before anything is written to its disk. The error is
// EINVALID, which fails the workflow with its message.
func checkTPM(in *eim.Instance, tpm provisioningv1.MeasuredBoot_Tpm) error {
	if in.SecurityFeature != sbRequired {
		return nil
	}
	switch tpm {
	case provisioningv1.MeasuredBoot_TPM_ABSENT:
		return eim.Errorf(eim.EINVALID, "%s: instance %s asks for %s and the node has no TPM 2.0 to seal its disk key to: enable the TPM in its firmware, or set the instance's securityFeature to SECURITY_FEATURE_NONE",
			NoTPMForFDE, in.ResourceID, sbRequired)
	case provisioningv1.MeasuredBoot_TPM_UNSPECIFIED:
		return eim.Errorf(eim.EINVALID, "%s: instance %s asks for %s and the node did not report its TPM (an eim-agent older than full-disk encryption): rebuild the micro-OS (eim microos build)",
			NoTPMForFDE, in.ResourceID, sbRequired)
	}
	return nil
}
