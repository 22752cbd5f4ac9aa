-- Initial schema (PostgreSQL). Column names and types follow the storage
-- conventions shared with package filter: TEXT ('' when empty) for strings and
-- enums, NULL for absent references, BIGINT for numbers, BOOLEAN for booleans, unix
-- milliseconds for times, JSONB for lists and structs.

CREATE TABLE projects (
    name TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    created_at BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT projects_id_key UNIQUE (id)
);

-- The change feed. A writer inserts its events with revision NULL (seq
-- orders them) and commits without any global lock; the sequencer (see
-- sequencer.go, one at a time across processes) then numbers all committed
-- NULL rows in one short transaction that also advances eim_revision.
CREATE TABLE events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    revision BIGINT,
    project TEXT NOT NULL,
    kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    op TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE UNIQUE INDEX events_revision_key ON events (revision);
CREATE INDEX events_kind_idx ON events (kind, revision);
CREATE INDEX events_unsequenced_idx ON events (seq) WHERE revision IS NULL;

-- One row: the newest revision handed out (and committed) by the sequencer.
CREATE TABLE eim_revision (
    id INT PRIMARY KEY CHECK (id = 1),
    revision BIGINT NOT NULL
);
INSERT INTO eim_revision (id, revision) VALUES (1, 0);

CREATE TABLE regions (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    parent_id TEXT,
    metadata JSONB NOT NULL DEFAULT '[]',
    CONSTRAINT regions_project_id_key UNIQUE (project, id),
    CONSTRAINT regions_parent_id_fkey FOREIGN KEY (project, parent_id) REFERENCES regions (project, id) ON DELETE RESTRICT
);

CREATE TABLE sites (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    region_id TEXT,
    site_lat BIGINT NOT NULL DEFAULT 0,
    site_lng BIGINT NOT NULL DEFAULT 0,
    metadata JSONB NOT NULL DEFAULT '[]',
    CONSTRAINT sites_project_id_key UNIQUE (project, id),
    CONSTRAINT sites_region_id_fkey FOREIGN KEY (project, region_id) REFERENCES regions (project, id) ON DELETE RESTRICT
);

CREATE TABLE providers (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    provider_kind TEXT NOT NULL DEFAULT '',
    provider_vendor TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    api_endpoint TEXT NOT NULL DEFAULT '',
    api_credentials JSONB NOT NULL DEFAULT '[]',
    config TEXT NOT NULL DEFAULT '',
    CONSTRAINT providers_project_id_key UNIQUE (project, id)
);

CREATE TABLE hosts (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    desired_state TEXT NOT NULL DEFAULT '',
    current_state TEXT NOT NULL DEFAULT '',
    site_id TEXT,
    provider_id TEXT,
    note TEXT NOT NULL DEFAULT '',
    serial_number TEXT NOT NULL DEFAULT '',
    uuid TEXT NOT NULL DEFAULT '',
    memory_bytes BIGINT NOT NULL DEFAULT 0,
    cpu_model TEXT NOT NULL DEFAULT '',
    cpu_sockets BIGINT NOT NULL DEFAULT 0,
    cpu_cores BIGINT NOT NULL DEFAULT 0,
    cpu_capabilities TEXT NOT NULL DEFAULT '',
    cpu_architecture TEXT NOT NULL DEFAULT '',
    cpu_threads BIGINT NOT NULL DEFAULT 0,
    cpu_topology TEXT NOT NULL DEFAULT '',
    bmc_kind TEXT NOT NULL DEFAULT '',
    bmc_ip TEXT NOT NULL DEFAULT '',
    hostname TEXT NOT NULL DEFAULT '',
    product_name TEXT NOT NULL DEFAULT '',
    bios_version TEXT NOT NULL DEFAULT '',
    bios_release_date TEXT NOT NULL DEFAULT '',
    bios_vendor TEXT NOT NULL DEFAULT '',
    desired_power_state TEXT NOT NULL DEFAULT '',
    current_power_state TEXT NOT NULL DEFAULT '',
    power_status TEXT NOT NULL DEFAULT '',
    power_status_indicator TEXT NOT NULL DEFAULT '',
    power_status_timestamp BIGINT NOT NULL DEFAULT 0,
    power_command_policy TEXT NOT NULL DEFAULT '',
    power_on_time BIGINT NOT NULL DEFAULT 0,
    host_status TEXT NOT NULL DEFAULT '',
    host_status_indicator TEXT NOT NULL DEFAULT '',
    host_status_timestamp BIGINT NOT NULL DEFAULT 0,
    onboarding_status TEXT NOT NULL DEFAULT '',
    onboarding_status_indicator TEXT NOT NULL DEFAULT '',
    onboarding_status_timestamp BIGINT NOT NULL DEFAULT 0,
    registration_status TEXT NOT NULL DEFAULT '',
    registration_status_indicator TEXT NOT NULL DEFAULT '',
    registration_status_timestamp BIGINT NOT NULL DEFAULT 0,
    amt_sku TEXT NOT NULL DEFAULT '',
    desired_amt_state TEXT NOT NULL DEFAULT '',
    current_amt_state TEXT NOT NULL DEFAULT '',
    amt_status TEXT NOT NULL DEFAULT '',
    amt_status_indicator TEXT NOT NULL DEFAULT '',
    amt_status_timestamp BIGINT NOT NULL DEFAULT 0,
    user_lvm_size BIGINT NOT NULL DEFAULT 0,
    amt_control_mode TEXT NOT NULL DEFAULT '',
    amt_dns_suffix TEXT NOT NULL DEFAULT '',
    kvm_status TEXT NOT NULL DEFAULT '',
    desired_kvm_state TEXT NOT NULL DEFAULT '',
    current_kvm_state TEXT NOT NULL DEFAULT '',
    kvm_session_status TEXT NOT NULL DEFAULT '',
    sol_status TEXT NOT NULL DEFAULT '',
    desired_sol_state TEXT NOT NULL DEFAULT '',
    current_sol_state TEXT NOT NULL DEFAULT '',
    sol_session_status TEXT NOT NULL DEFAULT '',
    metadata JSONB NOT NULL DEFAULT '[]',
    CONSTRAINT hosts_project_id_key UNIQUE (project, id),
    CONSTRAINT hosts_site_id_fkey FOREIGN KEY (project, site_id) REFERENCES sites (project, id) ON DELETE RESTRICT,
    CONSTRAINT hosts_provider_id_fkey FOREIGN KEY (project, provider_id) REFERENCES providers (project, id) ON DELETE RESTRICT
);

CREATE TABLE operating_systems (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    architecture TEXT NOT NULL DEFAULT '',
    image_url TEXT NOT NULL DEFAULT '',
    image_id TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    sha256 TEXT NOT NULL DEFAULT '',
    profile_name TEXT NOT NULL DEFAULT '',
    profile_version TEXT NOT NULL DEFAULT '',
    installed_packages TEXT NOT NULL DEFAULT '',
    installed_packages_url TEXT NOT NULL DEFAULT '',
    security_feature TEXT NOT NULL DEFAULT '',
    os_type TEXT NOT NULL DEFAULT '',
    os_provider TEXT NOT NULL DEFAULT '',
    platform_bundle TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '',
    tls_ca_cert TEXT NOT NULL DEFAULT '',
    existing_cves_url TEXT NOT NULL DEFAULT '',
    existing_cves TEXT NOT NULL DEFAULT '',
    fixed_cves_url TEXT NOT NULL DEFAULT '',
    fixed_cves TEXT NOT NULL DEFAULT '',
    repo_url TEXT NOT NULL DEFAULT '',
    CONSTRAINT operating_systems_project_id_key UNIQUE (project, id)
);

CREATE TABLE local_accounts (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    username TEXT NOT NULL DEFAULT '',
    ssh_key TEXT NOT NULL DEFAULT '',
    CONSTRAINT local_accounts_project_id_key UNIQUE (project, id)
);

CREATE TABLE custom_configs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    config TEXT NOT NULL DEFAULT '',
    CONSTRAINT custom_configs_project_id_key UNIQUE (project, id)
);

CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    desired_state TEXT NOT NULL DEFAULT '',
    current_state TEXT NOT NULL DEFAULT '',
    host_id TEXT,
    os_id TEXT,
    security_feature TEXT NOT NULL DEFAULT '',
    instance_status TEXT NOT NULL DEFAULT '',
    instance_status_indicator TEXT NOT NULL DEFAULT '',
    instance_status_timestamp BIGINT NOT NULL DEFAULT 0,
    provisioning_status TEXT NOT NULL DEFAULT '',
    provisioning_status_indicator TEXT NOT NULL DEFAULT '',
    provisioning_status_timestamp BIGINT NOT NULL DEFAULT 0,
    update_status TEXT NOT NULL DEFAULT '',
    update_status_indicator TEXT NOT NULL DEFAULT '',
    update_status_timestamp BIGINT NOT NULL DEFAULT 0,
    trusted_attestation_status TEXT NOT NULL DEFAULT '',
    trusted_attestation_status_indicator TEXT NOT NULL DEFAULT '',
    trusted_attestation_status_timestamp BIGINT NOT NULL DEFAULT 0,
    instance_status_detail TEXT NOT NULL DEFAULT '',
    existing_cves TEXT NOT NULL DEFAULT '',
    runtime_packages TEXT NOT NULL DEFAULT '',
    os_update_available TEXT NOT NULL DEFAULT '',
    local_account_id TEXT,
    os_update_policy_id TEXT NOT NULL DEFAULT '',
    custom_config_id JSONB NOT NULL DEFAULT '[]',
    CONSTRAINT instances_project_id_key UNIQUE (project, id),
    CONSTRAINT instances_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE RESTRICT,
    CONSTRAINT instances_os_id_fkey FOREIGN KEY (project, os_id) REFERENCES operating_systems (project, id) ON DELETE RESTRICT,
    CONSTRAINT instances_local_account_id_fkey FOREIGN KEY (project, local_account_id) REFERENCES local_accounts (project, id) ON DELETE RESTRICT
);

CREATE TABLE single_schedules (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    schedule_status TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    start_seconds BIGINT NOT NULL DEFAULT 0,
    end_seconds BIGINT NOT NULL DEFAULT 0,
    target_host_id TEXT,
    target_site_id TEXT,
    target_region_id TEXT,
    CONSTRAINT single_schedules_project_id_key UNIQUE (project, id),
    CONSTRAINT single_schedules_target_host_id_fkey FOREIGN KEY (project, target_host_id) REFERENCES hosts (project, id) ON DELETE CASCADE,
    CONSTRAINT single_schedules_target_site_id_fkey FOREIGN KEY (project, target_site_id) REFERENCES sites (project, id) ON DELETE RESTRICT,
    CONSTRAINT single_schedules_target_region_id_fkey FOREIGN KEY (project, target_region_id) REFERENCES regions (project, id) ON DELETE RESTRICT
);

CREATE TABLE repeated_schedules (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    schedule_status TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    duration_seconds BIGINT NOT NULL DEFAULT 0,
    cron_minutes TEXT NOT NULL DEFAULT '',
    cron_hours TEXT NOT NULL DEFAULT '',
    cron_day_month TEXT NOT NULL DEFAULT '',
    cron_month TEXT NOT NULL DEFAULT '',
    cron_day_week TEXT NOT NULL DEFAULT '',
    target_host_id TEXT,
    target_site_id TEXT,
    target_region_id TEXT,
    CONSTRAINT repeated_schedules_project_id_key UNIQUE (project, id),
    CONSTRAINT repeated_schedules_target_host_id_fkey FOREIGN KEY (project, target_host_id) REFERENCES hosts (project, id) ON DELETE CASCADE,
    CONSTRAINT repeated_schedules_target_site_id_fkey FOREIGN KEY (project, target_site_id) REFERENCES sites (project, id) ON DELETE RESTRICT,
    CONSTRAINT repeated_schedules_target_region_id_fkey FOREIGN KEY (project, target_region_id) REFERENCES regions (project, id) ON DELETE RESTRICT
);

-- Lookups and filters. Every resource table has UNIQUE (project, id), which
-- serves tenant-scoped lookups, the composite foreign keys that keep
-- references inside one project, and unfiltered pages (ORDER BY id). Indexes
-- of references and names end with id: a page of one site (or in name
-- order) is read in ORDER BY order and stops at LIMIT instead of sorting
-- every match. State indexes do not: their few distinct keys deduplicate
-- into a small index that makes COUNT(*) of a state (or of the whole
-- project) a short index-only scan, and a page of a common state is read
-- from (project, id) with a filter.
CREATE INDEX regions_parent_id_idx ON regions (project, parent_id, id);
CREATE INDEX regions_name_idx ON regions (project, name, id);
CREATE INDEX sites_region_id_idx ON sites (project, region_id, id);
CREATE INDEX sites_name_idx ON sites (project, name, id);
CREATE INDEX hosts_site_id_idx ON hosts (project, site_id, id);
CREATE INDEX hosts_provider_id_idx ON hosts (project, provider_id, id);
CREATE INDEX hosts_desired_state_idx ON hosts (project, desired_state);
CREATE INDEX hosts_current_state_idx ON hosts (project, current_state);
CREATE INDEX hosts_name_idx ON hosts (project, name, id);
CREATE INDEX instances_os_id_idx ON instances (project, os_id, id);
CREATE INDEX instances_local_account_id_idx ON instances (project, local_account_id, id);
CREATE INDEX instances_desired_state_idx ON instances (project, desired_state);
CREATE INDEX instances_current_state_idx ON instances (project, current_state);
CREATE INDEX instances_name_idx ON instances (project, name, id);
CREATE INDEX single_schedules_target_host_id_idx ON single_schedules (project, target_host_id, id);
CREATE INDEX single_schedules_target_site_id_idx ON single_schedules (project, target_site_id, id);
CREATE INDEX single_schedules_target_region_id_idx ON single_schedules (project, target_region_id, id);
CREATE INDEX repeated_schedules_target_host_id_idx ON repeated_schedules (project, target_host_id, id);
CREATE INDEX repeated_schedules_target_site_id_idx ON repeated_schedules (project, target_site_id, id);
CREATE INDEX repeated_schedules_target_region_id_idx ON repeated_schedules (project, target_region_id, id);

-- Uniqueness (see the reference's "Uniqueness"). Index names are
-- <table>_<column>_key: the store maps them back to the field in conflicts.
CREATE UNIQUE INDEX hosts_uuid_key ON hosts (uuid) WHERE uuid <> '';
-- A serial identifies a host only when it has no UUID: boards with
-- placeholder serials share them and are told apart by UUID.
CREATE UNIQUE INDEX hosts_serial_number_key ON hosts (project, serial_number) WHERE serial_number <> '' AND uuid = '';
-- A host has at most one instance.
CREATE UNIQUE INDEX instances_host_id_key ON instances (project, host_id);
CREATE UNIQUE INDEX operating_systems_name_key ON operating_systems (project, name) WHERE name <> '';
CREATE UNIQUE INDEX providers_name_key ON providers (project, name) WHERE name <> '';
CREATE UNIQUE INDEX custom_configs_name_key ON custom_configs (project, name) WHERE name <> '';
CREATE UNIQUE INDEX local_accounts_username_key ON local_accounts (project, username) WHERE username <> '';

-- Row-level security: project-scoped transactions run as the NOLOGIN role
-- eim_tenant with eim.project set (see Store.begin); the policy lets that role
-- see and write only its project's rows, even if a query forgets the project
-- predicate. The policy applies TO eim_tenant only and is exactly
-- `project = current_setting(...)`: current_setting is stable, so PostgreSQL
-- evaluates it once per statement and uses it as an index condition, rather
-- than testing current_user per row. The store's own login role (unscoped
-- transactions) owns the tables and, as RLS is enabled but not forced,
-- bypasses the policies as owners (and superusers) do; any other role gets
-- no policy and so no rows. Roles are cluster-wide: create it only if missing, and
-- tolerate a concurrent creator in another database.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'eim_tenant') THEN
        BEGIN
            CREATE ROLE eim_tenant NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    IF NOT pg_has_role(current_user, 'eim_tenant', 'MEMBER') THEN
        EXECUTE format('GRANT eim_tenant TO %I', current_user);
    END IF;
END
$$;

DO $$
DECLARE
    t TEXT;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO eim_tenant', current_schema());
    GRANT SELECT ON projects TO eim_tenant;
    GRANT SELECT ON eim_revision TO eim_tenant;
    GRANT SELECT, INSERT ON events TO eim_tenant;
    FOREACH t IN ARRAY ARRAY['regions', 'sites', 'providers', 'hosts', 'operating_systems',
        'local_accounts', 'custom_configs', 'instances', 'single_schedules', 'repeated_schedules', 'events']
    LOOP
        IF t <> 'events' THEN
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO eim_tenant', t);
        END IF;
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY eim_tenant_isolation ON %I TO eim_tenant
            USING (project = current_setting('eim.project', true))
            WITH CHECK (project = current_setting('eim.project', true))$p$, t);
    END LOOP;
END
$$;

-- Planner statistics and the visibility map follow growth closely: the
-- default thresholds (20% of the table) leave a table loaded from empty
-- with stale estimates, and COUNT(*) without index-only scans, for long.
-- The store also runs ANALYZE itself as a table grows (see analyze.go).
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['regions', 'sites', 'providers', 'hosts', 'operating_systems',
        'local_accounts', 'custom_configs', 'instances', 'single_schedules', 'repeated_schedules', 'events']
    LOOP
        EXECUTE format('ALTER TABLE %I SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500,
            autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05)', t);
    END LOOP;
END
$$;
