package eim

import "context"

// Recovery keys (full-disk encryption, docs/security.md): an instance of
// SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION has its root
// encrypted by the node, which unlocks it at boot with a key sealed to its
// TPM. The node also makes a recovery key, the way in when the TPM will not
// unseal (a changed Secure Boot configuration, a replaced board), and sends
// it to EIM before it encrypts; EIM keeps it sealed under the deployment's
// secrets key and shows it only to administrators, each read audited.

// KindRecoveryKey names an instance's recovery key in the audit log (its
// resource ID is the instance's).
const KindRecoveryKey Kind = "recoverykey"

// AuditRead is the action of the audit record of a recovery key's read.
const AuditRead = "READ"

// RecoveryKey is the escrowed recovery key of an instance's encrypted disk.
type RecoveryKey struct {
	Project    string
	InstanceID string
	HostID     string // the node that sent it
	// VolumeUUID is the LUKS2 UUID of the volume it opens.
	VolumeUUID string
	// SealedKey is the key sealed with the deployment's secrets key
	// (seal.Key.SealText, RecoveryKeyPurpose); never in the clear.
	SealedKey  string
	EscrowedAt Time
	// Attempt is the attempt of the instance's provisioning workflow that
	// escrowed it: a key is replaced only by a later attempt's (the
	// instance provisioned again), never within one.
	Attempt int
	// Digest recognises the same key sent again (a node's retry after a
	// lost answer) without opening the sealed one: an HMAC of the key
	// under a key derived from the secrets key (the provisioning module's).
	Digest string
	// Key is the key opened, for an administrator's read: set by the
	// provisioning service, never stored.
	Key string
}

// RecoveryKeyPurpose binds an instance's sealed recovery key to it (the
// associated data of seal.Key.SealText): a value copied into another row
// does not open there.
func RecoveryKeyPurpose(project, instanceID string) string {
	return "recovery-key/" + project + "/" + instanceID
}

// MaxRecoveryKey bounds a recovery key's length (a passphrase).
const MaxRecoveryKey = 512

// RecoveryKeyStore keeps instances' recovery keys (see sqlstore), one per
// instance, going with it. PutRecoveryKey stores the key of an existing
// instance of the project (ENOTFOUND otherwise) and sets its EscrowedAt;
// its audit record shows the key as Redacted. It replaces a kept key only
// when k.Attempt is later than the kept key's (the instance is being
// provisioned again); the same key again from the same attempt (equal
// non-empty Digest) changes nothing and succeeds; anything else is
// EPRECONDITION and the kept key stays: a node's identity must not be
// enough to swap the key that opens its disk for one of its choosing, or
// to destroy the only way in when the TPM will not unseal. ReadRecoveryKey
// returns the key (ENOTFOUND when the instance has none) and records the
// read in the audit log (AuditRead, by the context's actor), in one
// transaction: a read that is not recorded does not happen.
type RecoveryKeyStore interface {
	PutRecoveryKey(ctx context.Context, k *RecoveryKey) error
	ReadRecoveryKey(ctx context.Context, project, instanceID string) (*RecoveryKey, error)
}
