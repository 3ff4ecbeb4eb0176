-- lease-postgres schema version 15: attempt limits and dead letters
-- (docs/decisions/0016-attempt-limits-and-dead-letters.md).
--
-- Status 'dead': out of attempts, waiting for an operator (`retry_dead` or `cancel`). No
-- outcome, no claimable_at (so it leaves both claim indexes), not in `executions_terminal`
-- (retention keeps it). `record_problem` accepts it as it accepts an admitted row; version
-- 11's function is kept under a new name, as each earlier version kept its predecessor.
--
-- `attempt_limit`: the limit the current (or last) delivery was claimed under, copied by
-- the claim from `attempt_limits` (the workflow's row, else the namespace default, workflow
-- NULL; no row: NULL, unlimited), so every rule about the last attempt reads the row alone.
-- `last_error_*`: the last attempt that ended unacknowledged (all four set, or none).
ALTER TABLE {s}.executions DROP CONSTRAINT executions_status_check;
ALTER TABLE {s}.executions ADD CONSTRAINT executions_status_check
    CHECK (status IN ('admitted', 'running', 'suspended', 'completed', 'failed', 'cancelled',
        'dead'));

ALTER TABLE {s}.executions
    ADD COLUMN attempt_limit bigint CHECK (attempt_limit BETWEEN 1 AND 10000),
    ADD COLUMN last_error_kind text,
    ADD COLUMN last_error_message text,
    ADD COLUMN last_error_attempt bigint
        CHECK (last_error_attempt BETWEEN 1 AND 4294967295),
    ADD COLUMN last_error_at bigint,
    ADD CONSTRAINT executions_last_error_whole CHECK (
        (last_error_kind IS NULL) = (last_error_message IS NULL)
        AND (last_error_kind IS NULL) = (last_error_attempt IS NULL)
        AND (last_error_kind IS NULL) = (last_error_at IS NULL));

CREATE TABLE {s}.attempt_limits (
    workflow     text COLLATE "C" UNIQUE NULLS NOT DISTINCT,
    max_attempts bigint NOT NULL CHECK (max_attempts BETWEEN 1 AND 10000)
);

-- A dead row is never claimable, like the other ends (the statements that make a row dead
-- store NULL themselves; this keeps any later caller of the function right too).
CREATE OR REPLACE FUNCTION {s}.claimable_from(
    status text, due bigint, wake bigint, expires bigint, unacked bigint, ended bigint,
    delays bigint[]
) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('completed', 'failed', 'cancelled', 'dead') THEN NULL
        WHEN status = 'running' THEN
            CASE
                WHEN least(due, wake) IS NULL THEN NULL
                WHEN expires IS NULL THEN least(due, wake)
                ELSE greatest(least(due, wake),
                              expires + {s}.redelivery_delay(delays, unacked + 1))
            END
        WHEN due IS NULL THEN NULL
        WHEN unacked = 0 OR ended IS NULL THEN due
        ELSE greatest(due, ended + {s}.redelivery_delay(delays, unacked))
    END
$$;

ALTER FUNCTION {s}.record_problem RENAME TO record_problem_v11;

CREATE FUNCTION {s}.record_problem(
    id text, workflow text, status text, token bigint, unacked bigint, outcome text,
    concurrency_key text
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT {s}.record_problem_v11(id, workflow,
        CASE WHEN status = 'dead' THEN 'admitted' ELSE status END, token, unacked, outcome,
        concurrency_key)
$$;

-- `list_dead` walks this by id: the stored dead rows and the running rows on their last
-- attempt (dead once their lease expires; the statement tests the expiry).
CREATE INDEX CONCURRENTLY executions_dead ON {s}.executions (id)
    WHERE status = 'dead' OR (status = 'running' AND attempt_limit IS NOT NULL
        AND unacknowledged_deliveries + 1 >= attempt_limit);
