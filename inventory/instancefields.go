package inventory

import (
	"context"

	"github.com/eimhq/eim"
)

// The modules' writes of instances (see status.go). in is always the
// instance as the caller read it in tx, and on success holds what was
// written.

// CreateInstance creates in tx the instance a module gives a host (the
// onboarding module's zero-touch provisioning), as NewInstance makes it:
// only in's writable fields (and its project) are taken, with the
// inventory's defaults, validated. References are the caller's to check
// (the store's keys keep them inside the project). It returns the stored
// instance.
func CreateInstance(ctx context.Context, tx eim.Tx, in *eim.Instance) (*eim.Instance, error) {
	out, err := NewInstance(in)
	if err != nil {
		return nil, err
	}
	if err := tx.Create(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SetProvisioningStatus records an instance's provisioning status (the
// provisioning module, as its workflow moves; its callers write the
// workflow in the same transaction, over the version they read).
func SetProvisioningStatus(ctx context.Context, tx eim.Tx, in *eim.Instance, st Status) error {
	if err := st.check("provisioningStatus"); err != nil {
		return err
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID},
		ProvisioningStatus: st.Text, ProvisioningStatusIndicator: st.Indicator, ProvisioningStatusTimestamp: st.Timestamp}
	if err := tx.UpdateFields(ctx, w, "provisioningStatus", "provisioningStatusIndicator", "provisioningStatusTimestamp"); err != nil {
		return err
	}
	in.ProvisioningStatus, in.ProvisioningStatusIndicator, in.ProvisioningStatusTimestamp = w.ProvisioningStatus, w.ProvisioningStatusIndicator, w.ProvisioningStatusTimestamp
	stamp(in, w)
	return nil
}

// SetUpdateStatus records an instance's update status (the maintenance
// module, from its node's reports), whether or not it changed: a
// repeated "Updating" with a newer timestamp says the node is alive. The
// texts the API documents are eim.UpdateStatus*.
func SetUpdateStatus(ctx context.Context, tx eim.Tx, in *eim.Instance, st Status) error {
	if err := st.check("updateStatus"); err != nil {
		return err
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID},
		UpdateStatus: st.Text, UpdateStatusIndicator: st.Indicator, UpdateStatusTimestamp: st.Timestamp}
	if err := tx.UpdateFields(ctx, w, "updateStatus", "updateStatusIndicator", "updateStatusTimestamp"); err != nil {
		return err
	}
	in.UpdateStatus, in.UpdateStatusIndicator, in.UpdateStatusTimestamp = w.UpdateStatus, w.UpdateStatusIndicator, w.UpdateStatusTimestamp
	stamp(in, w)
	return nil
}

// SetAttestationStatus records the result of checking an instance's
// measured boot (the provisioning module, when its node reports the
// measurements with its request for the workflow): the original's
// trustedAttestationStatus, its indicator and timestamp.
func SetAttestationStatus(ctx context.Context, tx eim.Tx, in *eim.Instance, st Status) error {
	if err := st.check("trustedAttestationStatus"); err != nil {
		return err
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID},
		TrustedAttestationStatus: st.Text, TrustedAttestationStatusIndicator: st.Indicator, TrustedAttestationStatusTimestamp: st.Timestamp}
	if err := tx.UpdateFields(ctx, w, "trustedAttestationStatus", "trustedAttestationStatusIndicator", "trustedAttestationStatusTimestamp"); err != nil {
		return err
	}
	in.TrustedAttestationStatus, in.TrustedAttestationStatusIndicator, in.TrustedAttestationStatusTimestamp = w.TrustedAttestationStatus, w.TrustedAttestationStatusIndicator, w.TrustedAttestationStatusTimestamp
	stamp(in, w)
	return nil
}

// SwitchInstanceOS records the OS an instance runs after an image update
// (the maintenance module, when the node reports the update done): its
// osID. The OS must be in the instance's project (the store's keys see to
// it); the write is made only while the instance still has in's OS.
func SwitchInstanceOS(ctx context.Context, tx eim.Tx, in *eim.Instance, osID string) error {
	if err := eim.CheckID(eim.KindOS, "osID", osID); err != nil {
		return err
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, OSID: osID}
	if err := tx.UpdateFieldsIf(ctx, w, []eim.Cond{{Field: "osID", Value: in.OSID}}, "osID"); err != nil {
		return err
	}
	in.OSID = osID
	stamp(in, w)
	return nil
}

// maxOSUpdateAvailable bounds an instance's osUpdateAvailable.
const maxOSUpdateAvailable = 1024

// SetOSUpdateAvailable records what newer OS an instance could update to
// ("" for none), as the OS catalog computes it from the instance's OS:
// the write is made only while the instance still has in's OS.
func SetOSUpdateAvailable(ctx context.Context, tx eim.Tx, in *eim.Instance, available string) error {
	if err := checkText("osUpdateAvailable", available, maxOSUpdateAvailable); err != nil {
		return err
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, OsUpdateAvailable: available}
	if err := tx.UpdateFieldsIf(ctx, w, []eim.Cond{{Field: "osID", Value: in.OSID}}, "osUpdateAvailable"); err != nil {
		return err
	}
	in.OsUpdateAvailable = available
	stamp(in, w)
	return nil
}
