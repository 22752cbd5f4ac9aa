-- Day 0: project settings, node credentials on hosts, provisioning workflows.

-- A project's onboarding settings (eim.ProjectSettings) as JSON.
ALTER TABLE projects ADD COLUMN settings JSONB NOT NULL DEFAULT '{}';

-- Node credentials: never on the wire (json:"-"), so invisible to filters.
ALTER TABLE hosts ADD COLUMN node_secret_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN node_cred_gen BIGINT NOT NULL DEFAULT 0;

-- One workflow per instance; it goes with its instance or host. The log is
-- TEXT, not JSONB: it is rewritten whole on every report (up to ~1 MiB) and
-- never queried inside, so parsing it into JSONB would be wasted work.
CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    instance_id TEXT,
    host_id TEXT,
    attempt BIGINT NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    actions JSONB NOT NULL DEFAULT '[]',
    started_at BIGINT NOT NULL DEFAULT 0,
    finished_at BIGINT NOT NULL DEFAULT 0,
    log TEXT NOT NULL DEFAULT '[]',
    CONSTRAINT workflows_project_id_key UNIQUE (project, id),
    CONSTRAINT workflows_instance_id_fkey FOREIGN KEY (project, instance_id) REFERENCES instances (project, id) ON DELETE CASCADE,
    CONSTRAINT workflows_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX workflows_instance_id_key ON workflows (project, instance_id);
CREATE INDEX workflows_host_id_idx ON workflows (project, host_id, id);
CREATE INDEX workflows_state_idx ON workflows (project, state);

-- Tenant isolation and grants as for the other resource tables (0001).
GRANT SELECT, INSERT, UPDATE, DELETE ON workflows TO eim_tenant;
ALTER TABLE workflows ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON workflows TO eim_tenant
    USING (project = current_setting('eim.project', true))
    WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE workflows SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500,
    autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);

-- Onboarding looks devices up by serial number across all projects.
CREATE INDEX hosts_serial_number_idx ON hosts (serial_number);
