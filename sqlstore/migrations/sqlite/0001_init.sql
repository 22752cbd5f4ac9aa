-- Initial schema (SQLite). Column names and types follow the storage
-- conventions shared with package filter: TEXT ('' when empty) for strings and
-- enums, NULL for absent references, INTEGER for numbers and booleans, unix
-- milliseconds for times, JSON text for lists and structs.

CREATE TABLE projects (
    name TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    created_at BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT projects_id_key UNIQUE (id)
);

-- The change feed. revision is assigned from eim_revision at commit time.
CREATE TABLE events (
    revision BIGINT PRIMARY KEY,
    project TEXT NOT NULL,
    kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    op TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX events_kind_idx ON events (kind, revision);

-- One row: the newest revision handed out.
CREATE TABLE eim_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
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
    metadata TEXT NOT NULL DEFAULT '[]',
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
    metadata TEXT NOT NULL DEFAULT '[]',
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
    api_credentials TEXT NOT NULL DEFAULT '[]',
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
    metadata TEXT NOT NULL DEFAULT '[]',
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
    custom_config_id TEXT NOT NULL DEFAULT '[]',
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
-- serves tenant-scoped lookups and the composite foreign keys that keep
-- references inside one project.
CREATE INDEX regions_parent_id_idx ON regions (project, parent_id, id) WHERE parent_id IS NOT NULL;
CREATE INDEX regions_name_idx ON regions (project, name);
CREATE INDEX sites_region_id_idx ON sites (project, region_id, id) WHERE region_id IS NOT NULL;
CREATE INDEX sites_name_idx ON sites (project, name);
CREATE INDEX hosts_site_id_idx ON hosts (project, site_id, id) WHERE site_id IS NOT NULL;
CREATE INDEX hosts_provider_id_idx ON hosts (project, provider_id, id) WHERE provider_id IS NOT NULL;
CREATE INDEX hosts_desired_state_idx ON hosts (project, desired_state);
CREATE INDEX hosts_current_state_idx ON hosts (project, current_state);
CREATE INDEX hosts_name_idx ON hosts (project, name);
CREATE INDEX instances_os_id_idx ON instances (project, os_id, id) WHERE os_id IS NOT NULL;
CREATE INDEX instances_local_account_id_idx ON instances (project, local_account_id, id) WHERE local_account_id IS NOT NULL;
CREATE INDEX instances_desired_state_idx ON instances (project, desired_state);
CREATE INDEX instances_current_state_idx ON instances (project, current_state);
CREATE INDEX instances_name_idx ON instances (project, name);
CREATE INDEX single_schedules_target_host_id_idx ON single_schedules (project, target_host_id, id) WHERE target_host_id IS NOT NULL;
CREATE INDEX single_schedules_target_site_id_idx ON single_schedules (project, target_site_id, id) WHERE target_site_id IS NOT NULL;
CREATE INDEX single_schedules_target_region_id_idx ON single_schedules (project, target_region_id, id) WHERE target_region_id IS NOT NULL;
CREATE INDEX repeated_schedules_target_host_id_idx ON repeated_schedules (project, target_host_id, id) WHERE target_host_id IS NOT NULL;
CREATE INDEX repeated_schedules_target_site_id_idx ON repeated_schedules (project, target_site_id, id) WHERE target_site_id IS NOT NULL;
CREATE INDEX repeated_schedules_target_region_id_idx ON repeated_schedules (project, target_region_id, id) WHERE target_region_id IS NOT NULL;

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

-- Indexes on references end with id: a filtered page (WHERE project = ? AND
-- site_id = ? ORDER BY id LIMIT …) then reads one index range already in id
-- order, instead of walking every host of the project in id order (the
-- primary key) looking for the site's hosts, which is what SQLite chose with
-- (project, site_id) alone: 86 ms against < 1 ms for 1,000 of 100,000 hosts.
-- They are partial (NOT NULL) so that resources without the reference (a
-- host without a provider) cost no index entry. State and name indexes stay
-- (project, col): a state has most hosts and a page by state reads the
-- primary key in order anyway, and with a random id every insert would land
-- in the middle of the index instead of at its end (20 % slower creates).

-- Planner statistics until real ones exist (PRAGMA optimize replaces them):
-- without them SQLite takes any two-column equality as equally selective and
-- may walk 1/3 of all hosts through a state index instead of one site's
-- hosts. "rows per distinct prefix" below describe a typical fleet.
ANALYZE sqlite_schema;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('hosts', 'hosts_site_id_idx', '100000 10000 100 1'),
    ('hosts', 'hosts_provider_id_idx', '100000 10000 5000 1'),
    ('hosts', 'hosts_desired_state_idx', '100000 10000 3000'),
    ('hosts', 'hosts_current_state_idx', '100000 10000 3000'),
    ('hosts', 'hosts_name_idx', '100000 10000 2'),
    ('hosts', 'hosts_uuid_key', '100000 1'),
    ('hosts', 'hosts_serial_number_key', '100000 10000 1'),
    ('instances', 'instances_host_id_key', '100000 10000 1'),
    ('instances', 'instances_os_id_idx', '100000 10000 1000 1'),
    ('instances', 'instances_local_account_id_idx', '100000 10000 1000 1'),
    ('instances', 'instances_desired_state_idx', '100000 10000 3000'),
    ('instances', 'instances_current_state_idx', '100000 10000 3000'),
    ('instances', 'instances_name_idx', '100000 10000 2'),
    ('sites', 'sites_region_id_idx', '10000 1000 10 1'),
    ('sites', 'sites_name_idx', '10000 1000 2'),
    ('regions', 'regions_parent_id_idx', '1000 100 5 1'),
    ('regions', 'regions_name_idx', '1000 100 2');
