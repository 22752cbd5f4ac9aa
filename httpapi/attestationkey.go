package httpapi

import (
	"context"
	"net/http"

	"github.com/eimhq/eim"
)

// A host's pinned TPM keys (EIM's own endpoints; the original had none):
// what the host's quotes are held to, and their reset by an administrator
// when the host's TPM was replaced (docs/security.md).

// AttestationKeys reads and resets the attestation keys pinned to hosts
// (see provisioning.Service): ResetAttestationKey records the reset in
// the audit log by the context's actor. EKCertificatesChecked says whether
// the deployment checks EK certificates against TPM makers' CAs.
type AttestationKeys interface {
	AttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error)
	ResetAttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error)
	EKCertificatesChecked() bool
}

// The values of attestationKey.Trust.
const (
	trustEKCertificate = "EK_CERTIFICATE"
	trustFirstUse      = "FIRST_USE"
)

// attestationKey is the wire shape of GET …/attestationkey.
type attestationKey struct {
	HostID string `json:"hostId"`
	// AKName and EKName are the TPM names (hex) of the attestation and
	// endorsement keys.
	AKName   string   `json:"akName"`
	EKName   string   `json:"ekName"`
	PinnedAt eim.Time `json:"pinnedAt"`
	// Trust is what the EK was believed on: its maker's certificate, or
	// the host's first quote; TrustNote says it in words.
	Trust         string         `json:"trust"`
	TrustNote     string         `json:"trustNote"`
	EKCertificate *ekCertificate `json:"ekCertificate,omitempty"`
}

type ekCertificate struct {
	Issuer string `json:"issuer"`
	Serial string `json:"serial"`
}

func (h *handler) attestationKeyRoutes() {
	h.handle("GET /compute/hosts/{resourceId}/attestationkey", h.attestationKey)
	h.handle("DELETE /compute/hosts/{resourceId}/attestationkey", h.resetAttestationKey)
}

// attestationKey answers the keys pinned to the host, to anyone who may
// read the project: names, not secrets.
func (h *handler) attestationKey(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindHost)
	if err != nil {
		return err
	}
	if h.akeys == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "provisioning is not running on this server")
	}
	k, err := h.akeys.AttestationKey(r.Context(), c.project, id)
	if err != nil {
		return err
	}
	out := &attestationKey{HostID: id, AKName: k.Name, EKName: k.EKName, PinnedAt: k.PinnedAt}
	switch {
	case k.EKCertSerial != "":
		out.Trust = trustEKCertificate
		out.TrustNote = "the endorsement key's certificate chained to a TPM maker CA this deployment configures"
		out.EKCertificate = &ekCertificate{Issuer: k.EKCertIssuer, Serial: k.EKCertSerial}
	case h.akeys.EKCertificatesChecked():
		out.Trust = trustFirstUse
		out.TrustNote = "trusted on first use: pinned before this deployment checked EK certificates; " +
			"the host's next quote must bring one that chains to a configured TPM maker CA"
	default:
		out.Trust = trustFirstUse
		out.TrustNote = "trusted on first use: no TPM maker CA is configured (eim server --tpm-ek-ca-file), " +
			"so the keys of the host's first quote were pinned as they came"
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// resetAttestationKey removes the keys pinned to the host, to
// administrators only (eim-admin): the host's next verified quote pins
// whatever keys it brings. An audit record (kind attestationkey, action
// DELETED, the administrator as principal) names the keys removed.
func (h *handler) resetAttestationKey(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindHost)
	if err != nil {
		return err
	}
	if !c.p.IsAdmin() {
		return eim.Errorf(eim.EFORBIDDEN, "resetting the attestation key of host %s needs the %s role", id, eim.RoleAdmin)
	}
	if h.akeys == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "provisioning is not running on this server")
	}
	if _, err := h.akeys.ResetAttestationKey(r.Context(), c.project, id); err != nil {
		return err
	}
	h.writeEmpty(w)
	return nil
}
