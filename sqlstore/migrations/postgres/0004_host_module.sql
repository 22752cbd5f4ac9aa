-- The host module: hardware children of hosts, and when each node was last
-- heard from.

-- Hardware children as JSON (eim.HostStorage, …): always read with their
-- host, never queried inside.
ALTER TABLE hosts ADD COLUMN host_storages JSONB NOT NULL DEFAULT '[]';
ALTER TABLE hosts ADD COLUMN host_nics JSONB NOT NULL DEFAULT '[]';
ALTER TABLE hosts ADD COLUMN host_usbs JSONB NOT NULL DEFAULT '[]';
ALTER TABLE hosts ADD COLUMN host_gpus JSONB NOT NULL DEFAULT '[]';
ALTER TABLE hosts ADD COLUMN hardware_digest TEXT NOT NULL DEFAULT '';

-- Liveness lives here, not in the host row: the host module keeps it in
-- memory and flushes it in batches, and writes the host only when its
-- status changes. Not a resource: no events, no API. It goes with its host.
CREATE TABLE host_liveness (
    host_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    last_seen BIGINT NOT NULL,
    CONSTRAINT host_liveness_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);

-- Hosts by status within a project: the host module finds the hosts stuck
-- "Rebooting" through it (few hosts share a transient status, so it reads
-- only those), and counts by status (the summary, dashboards polling the
-- "No Connection" hosts) read index entries, not the wide rows.
CREATE INDEX hosts_host_status_idx ON hosts (project, host_status);
