-- The telemetry module: groups of log sources or metrics, and the profiles
-- that turn a group on for an instance, a site or a region. Each table holds
-- two API types (logs and metrics), told apart by kind
-- (TELEMETRY_RESOURCE_KIND_LOGS or _METRICS), as in the original's inventory.

CREATE TABLE telemetry_groups (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    collector_kind TEXT NOT NULL DEFAULT '',
    group_items TEXT NOT NULL DEFAULT '[]',
    CONSTRAINT telemetry_groups_project_id_key UNIQUE (project, id)
);
CREATE INDEX telemetry_groups_kind_idx ON telemetry_groups (project, kind, id);

-- A profile targets exactly one instance, site or region (the inventory
-- checks it) and names one group of its kind. Profiles of an instance go
-- with it; sites, regions and groups in use cannot be deleted.
CREATE TABLE telemetry_profiles (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    target_instance TEXT,
    target_site TEXT,
    target_region TEXT,
    log_level TEXT NOT NULL DEFAULT '',
    logs_group_id TEXT,
    metrics_interval BIGINT NOT NULL DEFAULT 0,
    metrics_group_id TEXT,
    CONSTRAINT telemetry_profiles_project_id_key UNIQUE (project, id),
    CONSTRAINT telemetry_profiles_target_instance_fkey FOREIGN KEY (project, target_instance) REFERENCES instances (project, id) ON DELETE CASCADE,
    CONSTRAINT telemetry_profiles_target_site_fkey FOREIGN KEY (project, target_site) REFERENCES sites (project, id) ON DELETE RESTRICT,
    CONSTRAINT telemetry_profiles_target_region_fkey FOREIGN KEY (project, target_region) REFERENCES regions (project, id) ON DELETE RESTRICT,
    CONSTRAINT telemetry_profiles_logs_group_id_fkey FOREIGN KEY (project, logs_group_id) REFERENCES telemetry_groups (project, id) ON DELETE RESTRICT,
    CONSTRAINT telemetry_profiles_metrics_group_id_fkey FOREIGN KEY (project, metrics_group_id) REFERENCES telemetry_groups (project, id) ON DELETE RESTRICT
);
CREATE INDEX telemetry_profiles_kind_idx ON telemetry_profiles (project, kind, id);
CREATE INDEX telemetry_profiles_target_instance_idx ON telemetry_profiles (project, target_instance, id) WHERE target_instance IS NOT NULL;
CREATE INDEX telemetry_profiles_target_site_idx ON telemetry_profiles (project, target_site, id) WHERE target_site IS NOT NULL;
CREATE INDEX telemetry_profiles_target_region_idx ON telemetry_profiles (project, target_region, id) WHERE target_region IS NOT NULL;
CREATE INDEX telemetry_profiles_logs_group_id_idx ON telemetry_profiles (project, logs_group_id, id) WHERE logs_group_id IS NOT NULL;
CREATE INDEX telemetry_profiles_metrics_group_id_idx ON telemetry_profiles (project, metrics_group_id, id) WHERE metrics_group_id IS NOT NULL;
