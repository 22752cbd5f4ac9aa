-- Audit records are numbered per project (issue 31): a project's seq runs
-- 1, 2, 3… whatever other projects write, so it tells nothing of their
-- activity. The global identity stays as the row's key (id). A writer
-- inserts its records without a seq (NULL: not shown yet), and the change
-- feed's sequencer numbers the committed ones per project, from
-- audit_seqs, in the round that numbers the events (eim_sequence_events
-- below): rounds are serialized and each commits before the next, so a
-- project's numbers become visible in order, and writers commit without
-- waiting for each other (sqlstore/audit.go).
ALTER TABLE audit_log RENAME COLUMN seq TO id;
ALTER TABLE audit_log ADD COLUMN seq BIGINT;
UPDATE audit_log a SET seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY project ORDER BY id) AS seq FROM audit_log) n
WHERE a.id = n.id;
CREATE INDEX audit_log_unsequenced_idx ON audit_log (id) WHERE seq IS NULL;

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

-- A round of the sequencer (0009) numbers the committed audit records too,
-- per project in the order of their insert (id): a resource's records are
-- inserted in the order of its changes (each holds the resource's row),
-- so they are numbered in that order.
CREATE OR REPLACE FUNCTION eim_sequence_events() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    numbered bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(7307492212775939683); -- "eimseqnc"
    WITH p AS (
        SELECT seq, row_number() OVER (ORDER BY seq) AS n, count(*) OVER () AS total
        FROM events WHERE revision IS NULL
    ), c AS (
        UPDATE eim_revision SET revision = revision + (SELECT max(total) FROM p)
        WHERE id = 1 AND EXISTS (SELECT FROM p) RETURNING revision
    )
    UPDATE events e SET revision = c.revision - p.total + p.n FROM p, c WHERE e.seq = p.seq;
    GET DIAGNOSTICS numbered = ROW_COUNT;
    WITH p AS (
        SELECT id, project, row_number() OVER (PARTITION BY project ORDER BY id) AS n,
            count(*) OVER (PARTITION BY project) AS total
        FROM audit_log WHERE seq IS NULL
    ), c AS (
        INSERT INTO audit_seqs (project, seq) SELECT project, max(total) FROM p GROUP BY project ORDER BY project
        ON CONFLICT (project) DO UPDATE SET seq = audit_seqs.seq + EXCLUDED.seq
        RETURNING project, seq
    )
    UPDATE audit_log a SET seq = c.seq - p.total + p.n FROM p JOIN c ON c.project = p.project WHERE a.id = p.id;
    IF numbered > 0 THEN
        PERFORM pg_notify('eim_events', '');
    END IF;
    RETURN numbered;
END
$$;
