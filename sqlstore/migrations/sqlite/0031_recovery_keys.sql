-- The provisioning module (docs/security.md, full-disk encryption): the
-- recovery key of an instance's encrypted disk, one per instance, sent by
-- its node before it encrypted. Not a Store resource (its own statements,
-- sqlstore/recoverykey.go), scoped to the project like one; it goes with its
-- instance. sealed_key is sealed (AES-GCM under the server's secrets key,
-- package seal): never in the clear here. escrowed_at is unix milliseconds.
CREATE TABLE recovery_keys (
    project TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    host_id TEXT NOT NULL DEFAULT '',
    volume_uuid TEXT NOT NULL DEFAULT '',
    sealed_key TEXT NOT NULL,
    escrowed_at BIGINT NOT NULL,
    PRIMARY KEY (project, instance_id),
    CONSTRAINT recovery_keys_instance_id_fkey FOREIGN KEY (project, instance_id) REFERENCES instances (project, id) ON DELETE CASCADE
);
