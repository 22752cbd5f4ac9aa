package inventory

import (
	"github.com/eimhq/eim"
)

// NewRegisteredHost returns the host RegisterHost would store for reg,
// validated and with the inventory's defaults, for modules that create it
// inside their own transaction (onboarding of enrolled devices). Its
// project is not set.
func NewRegisteredHost(reg HostRegistration) (*eim.Host, error) {
	if err := checkRegistration(&reg, false); err != nil {
		return nil, err
	}
	h := &eim.Host{Name: reg.Name, SerialNumber: reg.SerialNumber, UUID: reg.UUID, UserLvmSize: reg.UserLvmSize}
	if h.Name == "" {
		h.Name = reg.SerialNumber
		if h.Name == "" {
			h.Name = reg.UUID
		}
	}
	h.DesiredState = eim.HostStateRegistered
	if reg.AutoOnboard {
		h.DesiredState = eim.HostStateOnboarded
	}
	if reg.EnableVpro {
		h.DesiredAmtState = eim.AmtStateProvisioned
	}
	hostDefaults(h)
	if err := eim.Validate(h); err != nil {
		return nil, err
	}
	normalizeEnums(h)
	return h, nil
}

// NewInstance applies the inventory's defaults and validation to an
// instance a module creates in its own transaction (zero-touch
// provisioning); only its writable fields are taken. References are the
// caller's to check (the store's keys keep them inside the project).
func NewInstance(in *eim.Instance) (*eim.Instance, error) {
	out := &eim.Instance{}
	copyWritable(out, in, nil)
	out.Project = in.Project
	instanceDefaults(out)
	if err := eim.Validate(out); err != nil {
		return nil, err
	}
	normalizeEnums(out)
	return out, nil
}
