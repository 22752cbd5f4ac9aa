package eim

import "context"

// Attestation keys (docs/security.md, measured boot and attestation): a
// node's TPM quotes the PCR values of its boot with an attestation key
// (AK) made from a fixed template, so the same TPM gives the same key at
// every boot. EIM pins a host's AK at its first verified quote (trust on
// first use) and refuses a quote by another later: the key pinned is what
// makes a later boot's quote evidence of that node's TPM.

// KindAttestationKey names a host's pinned attestation key in the audit
// log (its resource ID is the host's): the pin is recorded, by the node.
const KindAttestationKey Kind = "attestationkey"

// AttestationKey is the AK pinned to a host.
type AttestationKey struct {
	Project string
	HostID  string
	// Public is the key's public area (TPMT_PUBLIC); Name its TPM name in
	// hex ("000b…"), which messages call it by.
	Public []byte
	Name   string
	// EKName is the TPM name, in hex, of the endorsement key of the TPM
	// the key was proven to live in (TPM2_ActivateCredential of the
	// nonce), pinned with it.
	EKName string
	// EKCertIssuer and EKCertSerial name the EK's certificate (its
	// issuer's distinguished name, its serial number in hex) when it was
	// checked against the TPM makers' CAs the deployment configures: at
	// the pin, or at a later quote of a key pinned on first use. Empty: the
	// EK was trusted on first use.
	EKCertIssuer string
	EKCertSerial string
	// PinnedAt is when the host's first verified quote pinned it.
	PinnedAt Time
	// NonceAt is when the nonce of the last quote accepted from the host
	// was issued (unix nanoseconds): a quote over a nonce issued at or
	// before it is refused, so each nonce is used once.
	NonceAt int64
}

// AttestationKeyStore keeps hosts' pinned attestation keys (see sqlstore),
// one per host, going with it.
//
// UseAttestationKey records a verified quote by k (its Project, HostID,
// Public, Name, EKName, NonceAt and, when the EK's certificate was checked,
// EKCertIssuer and EKCertSerial): with no key pinned to the host it pins k
// (PinnedAt set, an audit record of it created by the context's actor)
// and returns it; with another key pinned it returns that
// one and changes nothing (the caller reports the mismatch, of the AK or
// the EK); with k pinned
// it moves NonceAt forward (and records k's EK certificate, when it names
// one) and returns the pinned key, or fails with
// ECONFLICT when k.NonceAt is not after the recorded one (a replayed
// nonce). ENOTFOUND when the host is not the project's.
//
// AttestationKey returns the key pinned to a host, ENOTFOUND when none is.
//
// ResetAttestationKey removes the key pinned to a host (its TPM was
// replaced: the next verified quote pins the new one) with an audit
// record of it (OpDeleted, by the context's actor, naming the keys) in the
// same transaction, and returns the key removed; ENOTFOUND when the host
// is not the project's or has none.
type AttestationKeyStore interface {
	UseAttestationKey(ctx context.Context, k *AttestationKey) (*AttestationKey, error)
	AttestationKey(ctx context.Context, project, hostID string) (*AttestationKey, error)
	ResetAttestationKey(ctx context.Context, project, hostID string) (*AttestationKey, error)
}
