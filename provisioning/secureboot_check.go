package provisioning

import (
	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/southbound"
)

// SecureBootMismatch is the status text the original's onboarding gives a
// host whose firmware's Secure Boot state is not what its instance asks
// for; the instance's provisioning status says why after it.
const SecureBootMismatch = eim.SecureBootMismatch

// sbRequired is the security feature that asks for Secure Boot.
const sbRequired = eim.SecurityFeatureSecureBootFDE

// checkSecureBoot compares the instance's security feature with the
// node's Secure Boot state (eim.CheckSecureBoot): the onboarding module
// flags a mismatch at Discover already when the instance is known then;
// this check holds the nodes whose instance came later. The error is
// EINVALID, which fails the workflow with its message.
func checkSecureBoot(in *eim.Instance, state provisioningv1.SecureBootState) error {
	return eim.CheckSecureBoot(in, southbound.SecureBootState(state))
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
