package eim

import "strings"

// PowerPolicy says what the oob module does when a host's BMC reports it
// off although its desiredPowerState is ON. It is set on the host's BMC,
// on its site and in its project's settings; the first of those that
// sets one decides (EffectivePowerPolicy), REPORT when none does.
type PowerPolicy string

const (
	// PowerPolicyUnset leaves the choice to the next level.
	PowerPolicyUnset PowerPolicy = ""
	// PowerPolicyReport shows the drift (the host's mismatch status and
	// the host.power_mismatch event) and leaves the machine as it is.
	PowerPolicyReport PowerPolicy = "REPORT"
	// PowerPolicyAlwaysOn also powers the machine on again (a power job
	// whose reason says so), at most once per host per
	// PowerRestoreBackoff.
	PowerPolicyAlwaysOn PowerPolicy = "ALWAYS_ON"
)

// PowerPolicies are the values a power policy may be set to.
func PowerPolicies() []string {
	return []string{string(PowerPolicyAlwaysOn), string(PowerPolicyReport)}
}

// ParsePowerPolicy reads the value of field (case-insensitive; "" unset).
// The error is EINVALID naming the field.
func ParsePowerPolicy(field, v string) (PowerPolicy, error) {
	p := PowerPolicy(strings.ToUpper(strings.TrimSpace(v)))
	switch p {
	case PowerPolicyUnset, PowerPolicyReport, PowerPolicyAlwaysOn:
		return p, nil
	}
	return "", Errorf(EINVALID, "%s: %q is not one of %s (or empty: unset)", field, v, strings.Join(PowerPolicies(), ", "))
}

// EffectivePowerPolicy is a host's power policy: its BMC's, else its
// site's, else its project's, else REPORT.
func EffectivePowerPolicy(bmc, site, project PowerPolicy) PowerPolicy {
	for _, p := range []PowerPolicy{bmc, site, project} {
		if p != PowerPolicyUnset {
			return p
		}
	}
	return PowerPolicyReport
}
