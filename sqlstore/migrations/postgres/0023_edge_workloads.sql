-- The workloads module (package workloads): edge workloads and what
-- devices (hosts) run of them. Not Store resources (their own statements,
-- sqlstore/edgeworkload.go), scoped to a project like them. spec is the
-- JSON of eim.EdgeWorkloadSpec with secret values and registry passwords
-- sealed (package seal). Times are unix milliseconds.
CREATE TABLE edge_workloads (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    revision BIGINT NOT NULL,
    spec TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, name)
);

-- Every revision of a workload's spec, kept while the workload lives.
CREATE TABLE edge_workload_revisions (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    revision BIGINT NOT NULL,
    spec TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project, name, revision),
    CONSTRAINT edge_workload_revisions_fkey FOREIGN KEY (project, name) REFERENCES edge_workloads (project, name) ON DELETE CASCADE
);

-- The revision each device must run of each workload that selects it
-- (today the latest; the rollout engine will choose).
CREATE TABLE edge_workload_targets (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    host_id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    PRIMARY KEY (project, name, host_id),
    CONSTRAINT edge_workload_targets_fkey FOREIGN KEY (project, name) REFERENCES edge_workloads (project, name) ON DELETE CASCADE,
    CONSTRAINT edge_workload_targets_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX edge_workload_targets_host ON edge_workload_targets (project, host_id);

-- A device's version of its set of workloads: it only grows (a change of
-- its targets, a log request for it).
CREATE TABLE edge_devices (
    project TEXT NOT NULL,
    host_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (project, host_id),
    CONSTRAINT edge_devices_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);

-- A workload's state on a device, as the device last reported it.
-- containers and upload_errors are JSON.
CREATE TABLE edge_workload_status (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    host_id TEXT NOT NULL,
    revision BIGINT NOT NULL DEFAULT 0,
    phase TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    transition_at BIGINT NOT NULL DEFAULT 0,
    containers TEXT NOT NULL DEFAULT '[]',
    reported_at BIGINT NOT NULL DEFAULT 0,
    last_data_upload BIGINT NOT NULL DEFAULT 0,
    upload_errors TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (project, name, host_id),
    CONSTRAINT edge_workload_status_fkey FOREIGN KEY (project, name) REFERENCES edge_workloads (project, name) ON DELETE CASCADE,
    CONSTRAINT edge_workload_status_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX edge_workload_status_host ON edge_workload_status (project, host_id);

-- Log tails asked of devices; logs is JSON once answered.
CREATE TABLE edge_workload_logs (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    host_id TEXT NOT NULL,
    container TEXT NOT NULL DEFAULT '',
    tail BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    answered BOOLEAN NOT NULL DEFAULT FALSE,
    logs TEXT NOT NULL DEFAULT '[]',
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (project, id),
    CONSTRAINT edge_workload_logs_fkey FOREIGN KEY (project, name) REFERENCES edge_workloads (project, name) ON DELETE CASCADE,
    CONSTRAINT edge_workload_logs_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX edge_workload_logs_host ON edge_workload_logs (project, host_id, answered);

-- Tenant isolation and grants as for the resource tables (0001).
GRANT SELECT, INSERT, UPDATE, DELETE ON edge_workloads, edge_workload_revisions, edge_workload_targets, edge_devices, edge_workload_status, edge_workload_logs TO eim_tenant;
ALTER TABLE edge_workloads ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_workloads TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE edge_workload_revisions ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_workload_revisions TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE edge_workload_targets ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_workload_targets TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE edge_devices ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_devices TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE edge_workload_status ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_workload_status TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
ALTER TABLE edge_workload_logs ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON edge_workload_logs TO eim_tenant
    USING (project = current_setting('eim.project', true)) WITH CHECK (project = current_setting('eim.project', true));
