-- The provisioning module (docs/security.md, measured boot and
-- attestation): the TPM attestation key pinned to a host at its first
-- verified quote, one per host. Not a Store resource (its own statements,
-- sqlstore/attestationkey.go), scoped to the project like one; it goes with
-- its host. public is the key's TPMT_PUBLIC in hex, name its TPM name in hex,
-- ek_name that of the endorsement key of the TPM it was proven to live in.
-- pinned_at is unix milliseconds; nonce_at the issue time of the nonce of
-- the last quote accepted, unix nanoseconds (each nonce is used once).
CREATE TABLE attestation_keys (
    project TEXT NOT NULL,
    host_id TEXT NOT NULL,
    public TEXT NOT NULL,
    name TEXT NOT NULL,
    ek_name TEXT NOT NULL DEFAULT '',
    pinned_at BIGINT NOT NULL,
    nonce_at BIGINT NOT NULL,
    PRIMARY KEY (project, host_id),
    CONSTRAINT attestation_keys_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);

-- Tenant isolation and grants as for the resource tables (0001).
GRANT SELECT, INSERT, UPDATE, DELETE ON attestation_keys TO eim_tenant;
ALTER TABLE attestation_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON attestation_keys TO eim_tenant
    USING (project = current_setting('eim.project', true))
    WITH CHECK (project = current_setting('eim.project', true));
