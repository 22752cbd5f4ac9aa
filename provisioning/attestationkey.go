package provisioning

import (
	"context"

	"github.com/eimhq/eim"
)

// The attestation keys pinned to hosts, for the API: read, and reset by an
// administrator when a host's TPM was replaced (its next verified quote
// pins the new keys).

// AttestationKey returns the attestation key pinned to host hostID of
// project; ENOTFOUND when none is.
func (s *Service) AttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error) {
	if !eim.ValidID(eim.KindHost, hostID) {
		return nil, eim.Errorf(eim.EINVALID, "resourceId: %q is not a host ID", hostID)
	}
	return s.keys.AttestationKey(ctx, project, hostID)
}

// ResetAttestationKey removes the attestation key pinned to host hostID of
// project, recorded in the audit log by ctx's actor, and returns it
// (ENOTFOUND when none is). Who may is the caller's to check: the API lets
// administrators only.
func (s *Service) ResetAttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error) {
	if !eim.ValidID(eim.KindHost, hostID) {
		return nil, eim.Errorf(eim.EINVALID, "resourceId: %q is not a host ID", hostID)
	}
	k, err := s.keys.ResetAttestationKey(ctx, project, hostID)
	if err != nil {
		return nil, err
	}
	s.log.Info("provisioning: attestation key reset; the host's next verified quote pins its keys", "project", project, "host", hostID, "ak", k.Name, "ek", k.EKName)
	return k, nil
}

// EKCertificatesChecked reports whether this server checks the EK
// certificates of quotes against TPM makers' CAs (Options.EKRoots); when
// not, keys are pinned on first use.
func (s *Service) EKCertificatesChecked() bool { return s.ekRoots != nil }
