-- Day 0: project settings, node credentials on hosts, provisioning workflows.

-- A project's onboarding settings (eim.ProjectSettings) as JSON.
ALTER TABLE projects ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';

-- Node credentials: never on the wire (json:"-"), so invisible to filters.
ALTER TABLE hosts ADD COLUMN node_secret_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN node_cred_gen BIGINT NOT NULL DEFAULT 0;

-- One workflow per instance; it goes with its instance or host.
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
    actions TEXT NOT NULL DEFAULT '[]',
    started_at BIGINT NOT NULL DEFAULT 0,
    finished_at BIGINT NOT NULL DEFAULT 0,
    log TEXT NOT NULL DEFAULT '[]',
    CONSTRAINT workflows_project_id_key UNIQUE (project, id),
    CONSTRAINT workflows_instance_id_fkey FOREIGN KEY (project, instance_id) REFERENCES instances (project, id) ON DELETE CASCADE,
    CONSTRAINT workflows_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX workflows_instance_id_key ON workflows (project, instance_id);
CREATE INDEX workflows_host_id_idx ON workflows (project, host_id, id) WHERE host_id IS NOT NULL;
CREATE INDEX workflows_state_idx ON workflows (project, state);

-- Onboarding looks devices up by serial number across all projects.
CREATE INDEX hosts_serial_number_idx ON hosts (serial_number);
