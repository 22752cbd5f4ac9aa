-- A round of the change feed's sequencer (see sqlstore/sequencer.go) as one
-- function, so that a round is one statement, and one round trip, instead of
-- five (BEGIN, lock, numbering, notify, COMMIT). Called in its own implicit
-- transaction: the advisory lock serializes the rounds of every process, and
-- it is held until that transaction commits. The numbering runs after the
-- lock is taken in a statement of its own: in a VOLATILE function every
-- statement takes a fresh snapshot, so it sees the previous round's commit
-- (one statement taking the lock inside itself would not). Returns how many
-- events it numbered; listeners of other processes are woken only then.
CREATE FUNCTION eim_sequence_events() RETURNS bigint
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
    IF numbered > 0 THEN
        PERFORM pg_notify('eim_events', '');
    END IF;
    RETURN numbered;
END
$$;
