-- The oob module (package oob): a host's BMC, one per host. Not a Store
-- resource (its own statements, sqlstore/bmc.go), but scoped to a project
-- like one; it goes with its host (and so with its project). password is
-- sealed (AES-GCM under the server's secrets key, package seal): never in
-- the clear here. capabilities and reachable are what the module found
-- (JSON). Times are unix milliseconds.
CREATE TABLE bmcs (
    project TEXT NOT NULL,
    host_id TEXT NOT NULL,
    protocol TEXT NOT NULL,
    address TEXT NOT NULL,
    system_id TEXT NOT NULL DEFAULT '',
    username TEXT NOT NULL,
    password TEXT NOT NULL,
    ca_cert TEXT NOT NULL DEFAULT '',
    insecure BOOLEAN NOT NULL DEFAULT FALSE,
    capabilities TEXT NOT NULL DEFAULT '{}',
    reachable TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, host_id),
    CONSTRAINT bmcs_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
