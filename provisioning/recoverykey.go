package provisioning

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// Full-disk encryption's recovery keys (docs/security.md): the node sends
// the key before it encrypts (EscrowRecoveryKey), the server keeps it
// sealed with the secrets key, and an administrator reads it (RecoveryKey),
// each read audited.

// maxVolumeUUID bounds the volume UUID a node sends (a LUKS2 UUID is 36).
const maxVolumeUUID = 40

func checkEscrow(m *provisioningv1.EscrowRecoveryKeyRequest) error {
	switch k := m.GetRecoveryKey(); {
	case !eim.ValidID(eim.KindWorkflow, m.GetWorkflowId()):
		return fmt.Errorf("workflow_id: %q is not a workflow ID", m.GetWorkflowId())
	case m.GetAttempt() == 0:
		return errors.New("attempt: required")
	case k == "":
		return errors.New("recovery_key: required")
	case len(k) > eim.MaxRecoveryKey:
		return fmt.Errorf("recovery_key: %d bytes, at most %d", len(k), eim.MaxRecoveryKey)
	case !utf8.ValidString(k):
		return errors.New("recovery_key: not UTF-8")
	case len(m.GetVolumeUuid()) > maxVolumeUUID:
		return fmt.Errorf("volume_uuid: %d bytes, at most %d", len(m.GetVolumeUuid()), maxVolumeUUID)
	}
	return nil
}

// EscrowRecoveryKey implements provisioningv1connect.ProvisioningServiceHandler:
// the node's current workflow attempt must have an encrypt-root action at
// the index given; the key is sealed for the instance. It replaces a kept
// key only when that was escrowed by an earlier attempt (the instance is
// being provisioned again); within one attempt only the same key is taken
// again (a retry), anything else is FailedPrecondition and the kept key
// stays (eim.RecoveryKeyStore).
func (s *Service) EscrowRecoveryKey(ctx context.Context, req *connect.Request[provisioningv1.EscrowRecoveryKeyRequest]) (*connect.Response[provisioningv1.EscrowRecoveryKeyResponse], error) {
	n, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkEscrow(m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if s.secrets == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("this server has no secrets key to seal the recovery key with; it cannot take one"))
	}
	var in *eim.Instance
	err = s.store.View(ctx, n.Project, func(tx eim.Tx) error {
		st, err := s.load(ctx, tx, n, false)
		if err != nil {
			return err
		}
		wf := st.workflow
		switch {
		case st.instance == nil || wf == nil || wf.ResourceID != m.GetWorkflowId():
			return eim.Errorf(eim.ENOTFOUND, "workflow %s is not this node's", m.GetWorkflowId())
		case wf.Attempt != int(m.GetAttempt()):
			return eim.Errorf(eim.EPRECONDITION, "workflow %s: attempt %d is not the current one (%d)", wf.ResourceID, m.GetAttempt(), wf.Attempt)
		case int(m.GetIndex()) >= len(wf.Actions) || wf.Actions[m.GetIndex()].Type != eim.ActionEncryptRoot:
			return eim.Errorf(eim.EINVALID, "index: action %d of workflow %s is not an %s action", m.GetIndex(), wf.ResourceID, eim.ActionEncryptRoot)
		}
		in = st.instance
		return nil
	})
	if err != nil {
		return nil, s.rpcError(ctx, "escrow recovery key", err)
	}
	purpose := eim.RecoveryKeyPurpose(n.Project, in.ResourceID)
	k := &eim.RecoveryKey{Project: n.Project, InstanceID: in.ResourceID, HostID: n.HostID, VolumeUUID: m.GetVolumeUuid(),
		SealedKey: s.secrets.SealText(m.GetRecoveryKey(), purpose), Attempt: int(m.GetAttempt()), Digest: s.recoveryKeyDigest(purpose, m.GetRecoveryKey())}
	if err := s.store.PutRecoveryKey(eim.WithActor(ctx, eim.NodeActor(n.HostID)), k); err != nil {
		if eim.ErrorCode(err) == eim.EPRECONDITION {
			// A node replacing the key it escrowed, within one attempt:
			// a failed action run again on a disk that may carry the kept
			// key already, or someone holding the node's identity.
			s.log.Warn("provisioning: a new recovery key refused; the kept one stays", "project", n.Project, "instance", in.ResourceID, "host", n.HostID, "attempt", k.Attempt, "reason", eim.ErrorMessage(err))
		}
		return nil, s.rpcError(ctx, "escrow recovery key", err)
	}
	s.log.Info("provisioning: recovery key escrowed", "project", n.Project, "instance", in.ResourceID, "volume", k.VolumeUUID)
	return connect.NewResponse(&provisioningv1.EscrowRecoveryKeyResponse{}), nil
}

// recoveryKeyDigest is the HMAC-SHA-256 (hex) of an instance's recovery key
// under a key derived from the secrets key: the store tells the same key
// sent again from another without opening the sealed one.
func (s *Service) recoveryKeyDigest(purpose, key string) string {
	m := hmac.New(sha256.New, s.secrets.Derive("eim-recovery-key-digest"))
	m.Write([]byte(purpose + "\x00" + key))
	return hex.EncodeToString(m.Sum(nil))
}

// RecoveryKey returns the recovery key of the instance's encrypted disk,
// recording the read in the audit log by ctx's actor (ENOTFOUND when the
// instance has none). Who may read it is the caller's to check: the API
// lets administrators only.
func (s *Service) RecoveryKey(ctx context.Context, project, instanceID string) (*eim.RecoveryKey, error) {
	if s.secrets == nil {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "this server has no secrets key: it cannot open recovery keys")
	}
	if !eim.ValidID(eim.KindInstance, instanceID) {
		return nil, eim.Errorf(eim.EINVALID, "resourceId: %q is not an instance ID", instanceID)
	}
	k, err := s.store.ReadRecoveryKey(ctx, project, instanceID)
	if err != nil {
		return nil, err
	}
	key, err := s.secrets.OpenText(k.SealedKey, eim.RecoveryKeyPurpose(project, instanceID))
	if err != nil {
		return nil, fmt.Errorf("open the recovery key of %s: %w", instanceID, err)
	}
	k.Key = key
	return k, nil
}
