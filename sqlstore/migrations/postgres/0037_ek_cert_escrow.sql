-- Issue 30. A host's pinned attestation key records the EK certificate it
-- was checked with (docs/security.md, "The key is pinned to the host"):
-- its issuer's distinguished name and serial number (hex); empty when the
-- EK was trusted on first use.
ALTER TABLE attestation_keys ADD COLUMN ek_cert_issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE attestation_keys ADD COLUMN ek_cert_serial TEXT NOT NULL DEFAULT '';

-- An escrowed recovery key records the workflow attempt that sent it: a
-- key is replaced only by a later attempt's (the instance provisioned
-- again). key_digest is an HMAC of the key under a key derived from the
-- secrets key, to recognise a node's retry of the same escrow. The keys
-- escrowed before this migration are taken as their instance's current
-- attempt's, so that they too are replaced only by a new attempt.
ALTER TABLE recovery_keys ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE recovery_keys ADD COLUMN key_digest TEXT NOT NULL DEFAULT '';
UPDATE recovery_keys SET attempt = COALESCE((SELECT w.attempt FROM workflows w
    WHERE w.project = recovery_keys.project AND w.instance_id = recovery_keys.instance_id), 0);
