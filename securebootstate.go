package eim

import "fmt"

// SecureBootMismatch is the status text the original's onboarding gives a
// host whose firmware's Secure Boot state is not what its instance asks
// for; the error of CheckSecureBoot says why after it.
const SecureBootMismatch = "SecureBoot status mismatch"

// SecurityFeatureSecureBootFDE is the security feature that asks for
// Secure Boot and full-disk encryption.
const SecurityFeatureSecureBootFDE SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"

// CheckSecureBoot compares the instance's security feature with the
// Secure Boot state its node reported, as the original's onboarding does:
// an instance asking for Secure Boot and FDE needs a node that booted with
// Secure Boot enforced; one asking for none (NONE or UNSPECIFIED) is
// refused a node that enforces it. A node that did not say (an agent older
// than the report) passes unless the instance asks for Secure Boot. The
// error is EINVALID, its message SecureBootMismatch and the reason.
func CheckSecureBoot(in *Instance, state SecureBootState) error {
	enforced := state == SecureBootStateEnabled
	asks := in.SecurityFeature == SecurityFeatureSecureBootFDE
	switch {
	case asks && (state == "" || state == SecureBootStateUnspecified):
		return Errorf(EINVALID, "%s: instance %s asks for %s and the node did not report its Secure Boot state (an eim-agent older than the check, or efivarfs not readable)",
			SecureBootMismatch, in.ResourceID, SecurityFeatureSecureBootFDE)
	case asks && !enforced:
		return Errorf(EINVALID, "%s: instance %s asks for %s and the node booted %s: enroll the deployment's Secure Boot certificate (eim secureboot export) and turn Secure Boot on in its firmware",
			SecureBootMismatch, in.ResourceID, SecurityFeatureSecureBootFDE, DescribeSecureBoot(state))
	case !asks && enforced:
		f := in.SecurityFeature
		if f == "" {
			f = SecurityFeature(f.Values()[0])
		}
		return Errorf(EINVALID, "%s: instance %s has securityFeature %s and the node booted with Secure Boot enforced: set the instance's securityFeature to %s, or turn Secure Boot off",
			SecureBootMismatch, in.ResourceID, f, SecurityFeatureSecureBootFDE)
	}
	return nil
}

// DescribeSecureBoot says how a node booted, for messages: "with Secure
// Boot disabled".
func DescribeSecureBoot(s SecureBootState) string {
	switch s {
	case SecureBootStateNotUEFI:
		return "in legacy BIOS mode (no Secure Boot)"
	case SecureBootStateDisabled:
		return "with Secure Boot disabled"
	case SecureBootStateSetupMode:
		return "with its firmware in setup mode (no platform key: Secure Boot not enforced)"
	case SecureBootStateEnabled:
		return "with Secure Boot enforced"
	}
	return fmt.Sprintf("in Secure Boot state %s", s)
}

// SecureBootRefresh is how old, in seconds, the recorded time of an
// unchanged Secure Boot state gets before a new report renews it.
const SecureBootRefresh = 600

// SecureBootDue reports whether a Secure Boot state read at (unix seconds)
// is to be recorded over the one recorded, read at recordedAt: it differs,
// or the recorded one is older than SecureBootRefresh. UNSPECIFIED (an
// agent older than the report) never is: it says nothing of the firmware
// and would hide what an earlier report said. A node that polls thus
// writes its state once, and its time again only every few minutes, so
// that callers answering from a read-only look first (SQLite) stay
// read-only.
func SecureBootDue(recorded SecureBootState, recordedAt uint64, state SecureBootState, at uint64) bool {
	switch {
	case state == "" || state == SecureBootStateUnspecified:
		return false
	case recorded != state:
		return true
	}
	return at >= recordedAt+SecureBootRefresh
}
