-- Coordination of the server processes sharing the database (package
-- coord): leases for work that must run in one process at a time, and
-- the processes that are running. Not resources: no events, no API, no
-- project. Only the store's own (unscoped) connections use them, so they
-- take no part in the tenant role's grants or row-level security.

-- A lease is held by holder until expires_at (unix milliseconds, the
-- database's clock on PostgreSQL); since is when holder took it.
CREATE TABLE eim_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    since BIGINT NOT NULL,
    renewed_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- A running process, renewed while it runs; modules is a JSON array of
-- the module names it runs.
CREATE TABLE eim_members (
    id TEXT PRIMARY KEY,
    modules TEXT NOT NULL,
    started BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
