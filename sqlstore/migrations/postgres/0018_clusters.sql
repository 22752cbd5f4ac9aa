-- The clusters module (package clusters): cluster templates, clusters and
-- their nodes. Not Store resources (their own statements, sqlstore/
-- cluster.go), but scoped to a project like them, with their changes in
-- the change feed. Times are unix milliseconds.

-- A template: immutable once made (a new version is a new template); its
-- body is the template's JSON.
CREATE TABLE cluster_templates (
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    is_default BOOLEAN NOT NULL DEFAULT FALSE,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project, name, version)
);

-- A cluster. join_token and connect_token are sealed (AES-GCM under the
-- server's secrets key, package seal), base64: never in the clear here.
CREATE TABLE clusters (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects (name) ON DELETE RESTRICT,
    name TEXT NOT NULL,
    template_name TEXT NOT NULL,
    template_version TEXT NOT NULL,
    template_gen BIGINT NOT NULL DEFAULT 0,
    labels TEXT NOT NULL DEFAULT '{}',
    join_token TEXT NOT NULL DEFAULT '',
    connect_token TEXT NOT NULL DEFAULT '',
    connect_token_id TEXT NOT NULL DEFAULT '',
    deleting BOOLEAN NOT NULL DEFAULT FALSE,
    force_delete BOOLEAN NOT NULL DEFAULT FALSE,
    status TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT clusters_project_id_key UNIQUE (project, id)
);
CREATE UNIQUE INDEX clusters_name_key ON clusters (project, name);

-- A cluster's node: a host of the project. The primary key reserves the
-- host: it joins one cluster at most, also when two requests race for it.
-- plan is what the reconciler decided (NodePlan, JSON); plan_template its
-- template (name:version), which cannot be deleted while named here; the
-- rest is the node's last report.
CREATE TABLE cluster_nodes (
    project TEXT NOT NULL,
    host_id TEXT NOT NULL,
    cluster_id TEXT NOT NULL,
    role TEXT NOT NULL,
    seq BIGINT NOT NULL,
    removing BOOLEAN NOT NULL DEFAULT FALSE,
    force_removal BOOLEAN NOT NULL DEFAULT FALSE,
    plan_template TEXT NOT NULL DEFAULT '',
    plan TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    reported_version TEXT NOT NULL DEFAULT '',
    kubernetes_version TEXT NOT NULL DEFAULT '',
    reported_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (project, host_id),
    CONSTRAINT cluster_nodes_cluster_id_fkey FOREIGN KEY (project, cluster_id) REFERENCES clusters (project, id) ON DELETE CASCADE
);
CREATE INDEX cluster_nodes_cluster_id_idx ON cluster_nodes (project, cluster_id);

-- Tenant isolation and grants as for the resource tables (0001).
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['cluster_templates', 'clusters', 'cluster_nodes']
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO eim_tenant', t);
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY eim_tenant_isolation ON %I TO eim_tenant
            USING (project = current_setting('eim.project', true))
            WITH CHECK (project = current_setting('eim.project', true))$p$, t);
    END LOOP;
END
$$;
