package inventory

import (
	"context"
	"time"

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

// StatusInvalidated is an invalidated host's status (the original's text).
const StatusInvalidated = "Invalidated"

// FinishInvalidation completes the invalidation of a host whose desired
// state is UNTRUSTED, as the module owning node credentials does: the
// node's credentials are revoked (secret cleared, generation bumped), the
// current state becomes UNTRUSTED and the host status "Invalidated" (IDLE,
// stamped at). Only those fields change. A host not being invalidated, or
// whose invalidation is complete, is left alone; done reports whether it
// was written. ENOTFOUND when the host does not exist.
func FinishInvalidation(ctx context.Context, tx eim.Tx, hostID string, at time.Time) (done bool, err error) {
	if err := eim.CheckID(eim.KindHost, "host", hostID); err != nil {
		return false, err
	}
	r, err := tx.Get(ctx, eim.KindHost, hostID)
	if err != nil {
		return false, err
	}
	h := r.(*eim.Host)
	if !InvalidationPending(h) {
		return false, nil
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, NodeCredGen: h.NodeCredGen, CurrentState: eim.HostStateUntrusted,
		HostStatus: StatusInvalidated, HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: uint64(at.Unix())}
	if h.NodeSecretHash != "" {
		w.NodeCredGen++
	}
	// Over the credentials read: a Discover issuing new ones meanwhile
	// (it read the host before the invalidation) runs this again.
	when := []eim.Cond{{Field: "desiredState", Value: eim.HostStateUntrusted}, {Field: "node_cred_gen", Value: h.NodeCredGen}}
	err = tx.UpdateFieldsIf(ctx, w, when, "node_secret_hash", "node_cred_gen", "currentState", "hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
	return err == nil, err
}

// InvalidationPending reports whether h is being invalidated and
// FinishInvalidation has something to write.
func InvalidationPending(h *eim.Host) bool {
	return h.DesiredState == eim.HostStateUntrusted &&
		(h.CurrentState != eim.HostStateUntrusted || h.NodeSecretHash != "" ||
			h.HostStatus != StatusInvalidated || h.HostStatusIndicator != eim.StatusIdle)
}
