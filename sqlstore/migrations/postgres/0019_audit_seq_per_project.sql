-- Audit records are numbered per project (issue 31): a project's seq runs
-- 1, 2, 3… whatever other projects write, so it tells nothing of their
-- activity. The global identity stays as the row's key (id); seq is
-- handed out from audit_seqs in the transaction of the record, whose row
-- of the project stays locked until that transaction ends: a project's
-- records commit in seq order (sqlstore/audit.go).
ALTER TABLE audit_log RENAME COLUMN seq TO id;
ALTER TABLE audit_log ADD COLUMN seq BIGINT;
UPDATE audit_log a SET seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY project ORDER BY id) AS seq FROM audit_log) n
WHERE a.id = n.id;
ALTER TABLE audit_log ALTER COLUMN seq SET NOT NULL;

-- The webhooks' cursors held global seqs: each becomes the project's seq
-- of the last record at or before it (0: none left; seq grows with id in
-- a project). A project's deletion marker (resource_id = project, seq 1)
-- is not a record's and stays. Before the (project, id) index goes.
UPDATE webhook_cursors c SET seq = COALESCE(
    (SELECT a.seq FROM audit_log a WHERE a.project = c.project AND a.id <= c.seq ORDER BY a.id DESC LIMIT 1), 0)
WHERE c.resource_id <> c.project;

DROP INDEX audit_log_project_seq_idx;
CREATE UNIQUE INDEX audit_log_project_seq_key ON audit_log (project, seq);
DROP INDEX audit_log_project_resource_idx;
CREATE INDEX audit_log_project_resource_idx ON audit_log (project, resource_id, seq);

-- The last seq handed out in each project; it never moves back (records
-- pruned by age do not free their numbers), and goes with the project.
CREATE TABLE audit_seqs (
    project TEXT PRIMARY KEY,
    seq BIGINT NOT NULL
);
INSERT INTO audit_seqs (project, seq) SELECT project, max(seq) FROM audit_log GROUP BY project;
GRANT SELECT, INSERT, UPDATE ON audit_seqs TO eim_tenant;
ALTER TABLE audit_seqs ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON audit_seqs TO eim_tenant
    USING (project = current_setting('eim.project', true))
    WITH CHECK (project = current_setting('eim.project', true));
