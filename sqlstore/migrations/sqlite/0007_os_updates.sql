-- OS updates: policies (how an instance's OS is updated) and runs (each
-- update of an instance, written by the maintenance module).

CREATE TABLE os_update_policies (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    update_sources TEXT NOT NULL DEFAULT '[]',
    update_packages TEXT NOT NULL DEFAULT '',
    update_kernel_command TEXT NOT NULL DEFAULT '',
    target_os_id TEXT,
    update_policy TEXT NOT NULL DEFAULT '',
    CONSTRAINT os_update_policies_project_id_key UNIQUE (project, id),
    CONSTRAINT os_update_policies_target_os_id_fkey FOREIGN KEY (project, target_os_id) REFERENCES operating_systems (project, id) ON DELETE RESTRICT
);
CREATE INDEX os_update_policies_target_os_id_idx ON os_update_policies (project, target_os_id, id) WHERE target_os_id IS NOT NULL;

-- A run goes with its instance (and its host); a policy that runs applied
-- cannot be deleted while they are kept.
CREATE TABLE os_update_runs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    instance_id TEXT,
    applied_policy_id TEXT,
    host_id TEXT,
    status TEXT NOT NULL DEFAULT '',
    status_indicator TEXT NOT NULL DEFAULT '',
    status_details TEXT NOT NULL DEFAULT '',
    status_timestamp BIGINT NOT NULL DEFAULT 0,
    start_time BIGINT NOT NULL DEFAULT 0,
    end_time BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT os_update_runs_project_id_key UNIQUE (project, id),
    CONSTRAINT os_update_runs_instance_id_fkey FOREIGN KEY (project, instance_id) REFERENCES instances (project, id) ON DELETE CASCADE,
    CONSTRAINT os_update_runs_applied_policy_id_fkey FOREIGN KEY (project, applied_policy_id) REFERENCES os_update_policies (project, id) ON DELETE RESTRICT,
    CONSTRAINT os_update_runs_host_id_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX os_update_runs_instance_id_idx ON os_update_runs (project, instance_id, id) WHERE instance_id IS NOT NULL;
CREATE INDEX os_update_runs_applied_policy_id_idx ON os_update_runs (project, applied_policy_id, id) WHERE applied_policy_id IS NOT NULL;
CREATE INDEX os_update_runs_host_id_idx ON os_update_runs (project, host_id, id) WHERE host_id IS NOT NULL;

-- An instance's policy becomes a reference. The column was free text
-- without a table to point into, so what it held named nothing: it starts
-- over empty. SQLite cannot add a table constraint to an existing table,
-- so the reference is a column constraint on the policy's ID (deleting a
-- policy in use fails) and two triggers keep it within the instance's
-- project, as the composite keys of the other references do.
ALTER TABLE instances DROP COLUMN os_update_policy_id;
ALTER TABLE instances ADD COLUMN os_update_policy_id TEXT REFERENCES os_update_policies (id) ON DELETE RESTRICT;
CREATE INDEX instances_os_update_policy_id_idx ON instances (os_update_policy_id) WHERE os_update_policy_id IS NOT NULL;
CREATE TRIGGER instances_os_update_policy_id_insert BEFORE INSERT ON instances
    WHEN NEW.os_update_policy_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM os_update_policies p WHERE p.id = NEW.os_update_policy_id AND p.project = NEW.project)
BEGIN
    SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed');
END;
CREATE TRIGGER instances_os_update_policy_id_update BEFORE UPDATE OF os_update_policy_id, project ON instances
    WHEN NEW.os_update_policy_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM os_update_policies p WHERE p.id = NEW.os_update_policy_id AND p.project = NEW.project)
BEGIN
    SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed');
END;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('instances', 'instances_os_update_policy_id_idx', '100000 1000'),
    ('os_update_runs', 'os_update_runs_instance_id_idx', '100000 10000 10 1'),
    ('os_update_runs', 'os_update_runs_applied_policy_id_idx', '100000 10000 1000 1'),
    ('os_update_runs', 'os_update_runs_host_id_idx', '100000 10000 10 1');
