-- Audit records are numbered per project (issue 31): a project's seq runs
-- 1, 2, 3… whatever other projects write, so it tells nothing of their
-- activity. The global rowid stays as the row's key (id); seq is handed
-- out from audit_seqs in the transaction of the record (one writer).
ALTER TABLE audit_log RENAME COLUMN seq TO id;
ALTER TABLE audit_log ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE audit_log SET seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY project ORDER BY id) AS seq FROM audit_log) AS n
WHERE audit_log.id = n.id;

-- The webhooks' cursors held global seqs: each becomes the project's seq
-- of the last record at or before it (0: none left; seq grows with id in
-- a project). A project's deletion marker (resource_id = project, seq 1)
-- is not a record's and stays. Before the (project, id) index goes.
UPDATE webhook_cursors SET seq = COALESCE(
    (SELECT a.seq FROM audit_log a WHERE a.project = webhook_cursors.project AND a.id <= webhook_cursors.seq ORDER BY a.id DESC LIMIT 1), 0)
WHERE resource_id <> project;

DROP INDEX audit_log_project_seq_idx;
CREATE UNIQUE INDEX audit_log_project_seq_key ON audit_log (project, seq);
DROP INDEX audit_log_project_resource_idx;
CREATE INDEX audit_log_project_resource_idx ON audit_log (project, resource_id, seq);

-- The last seq handed out in each project; it never moves back (records
-- pruned by age do not free their numbers), and goes with the project.
CREATE TABLE audit_seqs (
    project TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
INSERT INTO audit_seqs (project, seq) SELECT project, max(seq) FROM audit_log GROUP BY project;
