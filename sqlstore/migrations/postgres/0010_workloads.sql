-- Workloads (named groups of instances, e.g. clusters) and their members,
-- each linking one instance to one workload.

CREATE TABLE workloads (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    external_id TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT '',
    CONSTRAINT workloads_project_id_key UNIQUE (project, id)
);
CREATE INDEX workloads_name_idx ON workloads (project, name, id);
-- A workload's external ID names one workload of the project.
CREATE UNIQUE INDEX workloads_external_id_key ON workloads (project, external_id) WHERE external_id <> '';

-- A workload with members cannot be deleted (the inventory says which
-- members); a member goes with its instance. An instance is a member of
-- at most one workload.
CREATE TABLE workload_members (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    workload_id TEXT,
    instance_id TEXT,
    CONSTRAINT workload_members_project_id_key UNIQUE (project, id),
    CONSTRAINT workload_members_workload_id_fkey FOREIGN KEY (project, workload_id) REFERENCES workloads (project, id) ON DELETE RESTRICT,
    CONSTRAINT workload_members_instance_id_fkey FOREIGN KEY (project, instance_id) REFERENCES instances (project, id) ON DELETE CASCADE
);
CREATE INDEX workload_members_workload_id_idx ON workload_members (project, workload_id, id);
CREATE UNIQUE INDEX workload_members_instance_id_key ON workload_members (project, instance_id);

-- Tenant isolation and grants as for the other resource tables (0001).
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['workloads', 'workload_members']
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO eim_tenant', t);
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY eim_tenant_isolation ON %I TO eim_tenant
            USING (project = current_setting('eim.project', true))
            WITH CHECK (project = current_setting('eim.project', true))$p$, t);
    END LOOP;
END
$$;
