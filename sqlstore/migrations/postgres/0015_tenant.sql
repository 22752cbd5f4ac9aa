-- The tenant module's records of each project (package tenant). Not
-- resources: no events, no API of their own; read and written by the
-- store's own role only (no grant to eim_tenant). They go with their
-- project (ON DELETE CASCADE), so that a name deleted is free to be used
-- again.

-- Which version of the tenant's defaults a project was last brought to.
CREATE TABLE project_defaults (
    project TEXT PRIMARY KEY REFERENCES projects (name) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    applied_at BIGINT NOT NULL
);

-- Each default applied to a project (key names it in the definition), the
-- resource that holds it and the digest of what was written: a resource
-- gone was deleted by a user, one whose content no longer has the digest
-- was changed by one, and neither is touched again. An empty digest: a
-- resource of the project's own that the default adopted by its name.
CREATE TABLE project_default_items (
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
    key TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (project, key)
);

-- A module's readiness for a project: whether the module has initialised
-- it, since when.
CREATE TABLE project_conditions (
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
    module TEXT NOT NULL,
    ready BOOLEAN NOT NULL,
    message TEXT NOT NULL,
    since BIGINT NOT NULL,
    PRIMARY KEY (project, module)
);

-- A project being deleted: the cascade's phase and how much of it is
-- left. The row goes with the project at the cascade's last step.
CREATE TABLE project_deletions (
    project TEXT PRIMARY KEY REFERENCES projects (name) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    remaining BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    error TEXT NOT NULL
);
