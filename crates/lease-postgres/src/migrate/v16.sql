-- lease-postgres schema version 16: ordered keys, start rates per key and browsing
-- (docs/decisions/0023-ordered-keys.md).
--
-- `admission_seq`: the admission order, from one sequence per schema, set when a row is
-- inserted (every admission path inserts, and a re-admission of a known id inserts
-- nothing, so a row keeps its place: `retry_dead` re-admits in place). Rows stored before
-- this version are numbered in id order (their admission order was never stored).
CREATE SEQUENCE {s}.admission_order AS bigint MINVALUE 1 START 1;

ALTER TABLE {s}.executions ADD COLUMN admission_seq bigint;
UPDATE {s}.executions e SET admission_seq = o.seq
FROM (SELECT x.id, nextval('{s}.admission_order') AS seq
      FROM (SELECT id FROM {s}.executions ORDER BY id) x) o
WHERE e.id = o.id;
ALTER TABLE {s}.executions
    ALTER COLUMN admission_seq SET DEFAULT nextval('{s}.admission_order'),
    ALTER COLUMN admission_seq SET NOT NULL;
ALTER SEQUENCE {s}.admission_order OWNED BY {s}.executions.admission_seq;

-- An ordered key's line: its executions that are neither terminal nor dead, by admission.
-- The claim's "is this row its key's head" is one seek here.
CREATE INDEX CONCURRENTLY executions_key_line ON {s}.executions (concurrency_key, admission_seq)
    WHERE concurrency_key IS NOT NULL AND status IN ('admitted', 'running', 'suspended');

-- Browsing, newest admitted first: one index per filter field, each in admission order,
-- so a page is one backward range walk whatever is stored. The unfiltered index is partial
-- on a predicate every row meets, which only the unfiltered page states: a generic plan of
-- a filtered page (its parameter's selectivity guessed) could otherwise prefer walking
-- every row in admission order and filtering.
CREATE UNIQUE INDEX CONCURRENTLY executions_admitted ON {s}.executions (admission_seq)
    WHERE admission_seq > 0;
CREATE INDEX CONCURRENTLY executions_admitted_by_status ON {s}.executions (status, admission_seq);
CREATE INDEX CONCURRENTLY executions_admitted_by_workflow ON {s}.executions (workflow, admission_seq)
    WHERE workflow IS NOT NULL;
CREATE INDEX CONCURRENTLY executions_admitted_by_key ON {s}.executions (concurrency_key, admission_seq)
    WHERE concurrency_key IS NOT NULL;

-- Per-key policies beyond the concurrency limit, one row per scope (`key` NULL for the
-- namespace default): ordered (a key row marks the key; the default row every key) and
-- the start rate (NULL: none of its own). A row with neither is deleted, so an empty table
-- means no policy and the claim pays one probe.
CREATE TABLE {s}.key_policies (
    key            text COLLATE "C" UNIQUE NULLS NOT DISTINCT,
    ordered        boolean NOT NULL DEFAULT false,
    rate_starts    bigint CHECK (rate_starts BETWEEN 1 AND 10000),
    rate_period_ms bigint CHECK (rate_period_ms BETWEEN 1 AND 86400000),
    CHECK ((rate_starts IS NULL) = (rate_period_ms IS NULL)),
    CHECK (ordered OR rate_starts IS NOT NULL)
);

-- The claim instants of rate-limited keys, pruned to the key's window when the key is
-- claimed (and dropped for keys no rate applies to any more).
CREATE TABLE {s}.key_starts (
    key text COLLATE "C" NOT NULL,
    at  bigint NOT NULL
);
CREATE INDEX key_starts_by_key ON {s}.key_starts (key, at);

-- What a keyed claim may take of one key, read after the key's bucket lock was granted:
-- a VOLATILE PL/pgSQL function's queries take fresh snapshots under READ COMMITTED (as
-- `live_leases`, version 12), so they see everything the lock's previous holder committed.
-- `room`: how many executions of the key the claim may start (its concurrency limit minus
-- its live leases, 1 or 0 for an ordered key, the rate's starts left in the window
-- (now - period, now]), NULL for no bound; `head`: an ordered key's earliest admitted
-- execution that is neither terminal nor dead (a running last attempt whose lease expired
-- is dead), the only one it may start. Prunes the key's claim instants out of its window.
CREATE FUNCTION {s}.key_room(
    key text, now bigint, cap bigint, ordered boolean, starts bigint, period bigint,
    OUT room bigint, OUT head text
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    live bigint;
    recent bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'LT002',
            MESSAGE = format('a keyed claim needs READ COMMITTED, not %s',
                             current_setting('transaction_isolation')),
            HINT = 'do not set default_transaction_isolation on the library''s connections';
    END IF;
    IF cap IS NOT NULL OR ordered THEN
        live := {s}.live_leases(key, now);
        room := CASE WHEN cap IS NULL THEN NULL ELSE cap - live END;
    END IF;
    IF ordered THEN
        room := LEAST(room, CASE WHEN live > 0 THEN 0 ELSE 1 END);
        head := (SELECT x.id FROM {s}.executions x
                 WHERE x.concurrency_key = key
                   AND x.status IN ('admitted', 'running', 'suspended')
                   AND NOT (x.status = 'running' AND x.attempt_limit IS NOT NULL
                            AND x.unacknowledged_deliveries + 1 >= x.attempt_limit
                            AND x.lease_expires_at <= now)
                 ORDER BY x.admission_seq LIMIT 1);
    END IF;
    IF starts IS NOT NULL THEN
        DELETE FROM {s}.key_starts r WHERE r.key = key_room.key AND r.at <= now - period;
        recent := (SELECT count(*) FROM {s}.key_starts r
                   WHERE r.key = key_room.key AND r.at > now - period);
        room := LEAST(room, starts - recent);
    END IF;
END
$$;
