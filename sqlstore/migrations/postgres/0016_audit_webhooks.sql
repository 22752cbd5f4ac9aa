-- The audit log (Store.Audit): one row per change of a resource, written
-- in the transaction of the change, so by the tenant role too (RLS as for
-- the resource tables). Not tied to the projects table: a project's
-- records are deleted with it by the store (DeleteProject), and otherwise
-- by age (PruneAudit).
CREATE TABLE audit_log (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project TEXT NOT NULL,
    at BIGINT NOT NULL,
    principal TEXT NOT NULL,
    action TEXT NOT NULL,
    kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    changes JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_project_seq_idx ON audit_log (project, seq);
CREATE INDEX audit_log_project_resource_idx ON audit_log (project, resource_id, seq);
CREATE INDEX audit_log_at_idx ON audit_log (at);
GRANT SELECT, INSERT ON audit_log TO eim_tenant;
ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON audit_log TO eim_tenant
    USING (project = current_setting('eim.project', true))
    WITH CHECK (project = current_setting('eim.project', true));

-- Webhooks and what is queued for them: the store's own role only (no
-- grant to eim_tenant); every statement names the project.
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    url TEXT NOT NULL,
    event_types JSONB NOT NULL,
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhooks_project_idx ON webhooks (project, created_at);

-- How far the webhooks module has turned each resource's audit records
-- into events (Store.QueueEvents): the last record's seq.
CREATE TABLE webhook_cursors (
    project TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (project, resource_id)
);

-- The delivery queue. A delivery carries its body and the URL and secret
-- of its webhook when queued (a project's deletion is delivered after its
-- webhooks are gone); deleting a webhook deletes its pending ones.
CREATE TABLE webhook_deliveries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    next_at BIGINT NOT NULL,
    last_status INT NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL,
    secret TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_at) WHERE state = 'PENDING';
CREATE INDEX webhook_deliveries_order_idx ON webhook_deliveries (webhook_id, resource_id, seq) WHERE state = 'PENDING';
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, seq);
