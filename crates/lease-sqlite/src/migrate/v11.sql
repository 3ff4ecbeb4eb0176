-- lease-sqlite schema version 11: attempt limits and dead letters.
--
-- attempt_limit: the limit in force when the current (or last) delivery was claimed (NULL:
-- unlimited); the delivery that brings `unacknowledged` to it makes the row 'dead'.
-- last_error: the last failed attempt as JSON ({"kind", "message", "attempt", "at"}), NULL
-- before the first.
-- lease_attempt_limits: workflow '' is the namespace default (no workflow name is empty),
-- any other a workflow's own limit; value in 1..=MAX_ATTEMPT_LIMIT. No row: unlimited.
-- lease_executions_dead: list_dead pages the dead rows by id.
ALTER TABLE lease_executions ADD COLUMN attempt_limit INTEGER;
ALTER TABLE lease_executions ADD COLUMN last_error TEXT;
CREATE TABLE lease_attempt_limits (
    namespace TEXT    NOT NULL,
    workflow  TEXT    NOT NULL,
    value     INTEGER NOT NULL,
    PRIMARY KEY (namespace, workflow)
) WITHOUT ROWID;
CREATE INDEX lease_executions_dead ON lease_executions (namespace, id) WHERE status = 'dead';
