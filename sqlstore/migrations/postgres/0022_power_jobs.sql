-- The oob module's power jobs (eim.PowerJobStore, sqlstore/powerjob.go):
-- a power change of a host through its BMC, its steps (JSON, the module's)
-- and how far it got, claimed by one process at a time under a lease
-- (holder, lease_until). The store's own role only (no grant to
-- eim_tenant); every statement names the project. Jobs go with their host.
-- Times are unix milliseconds.
CREATE TABLE power_jobs (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL,
    host_id TEXT NOT NULL,
    desired TEXT NOT NULL,
    state TEXT NOT NULL,
    steps TEXT NOT NULL DEFAULT '[]',
    step INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    deadline BIGINT NOT NULL,
    holder TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ended_at BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT power_jobs_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX power_jobs_host_idx ON power_jobs (project, host_id, seq);
CREATE INDEX power_jobs_open_idx ON power_jobs (seq) WHERE state IN ('PENDING', 'RUNNING');
