-- lease-postgres schema version 9: operator controls (issue 21).
--
-- Cancel: a terminal status 'cancelled' whose outcome is the reason (the status check,
-- `claimable_from`, `record_problem` and the retention index learn it). Priorities and
-- concurrency keys: two columns on executions (priority -1000..=1000, default 0; key NULL
-- for none). Pauses: one row per paused scope (`workflow` NULL for the namespace).
-- Limits: one row per limited key (`key` NULL for the namespace default).
-- The claim's order (priority DESC, sort_due, id) is the index `executions_claim_order`,
-- which replaces v7's `executions_claim_waiting` (see `execution/claim.sql`).

ALTER TABLE {s}.executions DROP CONSTRAINT executions_status_check;
ALTER TABLE {s}.executions ADD CONSTRAINT executions_status_check
    CHECK (status IN ('admitted', 'running', 'suspended', 'completed', 'failed', 'cancelled'));

ALTER TABLE {s}.executions
    ADD COLUMN priority integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    ADD COLUMN concurrency_key text COLLATE "C";

CREATE OR REPLACE FUNCTION {s}.claimable_from(
    status text, due bigint, wake bigint, expires bigint, unacked bigint, ended bigint,
    delays bigint[]
) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('completed', 'failed', 'cancelled') THEN NULL
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

CREATE OR REPLACE FUNCTION {s}.record_problem(
    id text, workflow text, status text, token bigint, unacked bigint, outcome text
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN id IS NULL THEN 'execution id is NULL'
        WHEN octet_length(id) NOT BETWEEN 1 AND 255
            THEN format('execution id is %s bytes, outside 1..=255', octet_length(id))
        WHEN id ~ '[\u0001-\u001f\u007f-\u009f]'
            THEN 'execution id contains a control character'
        WHEN octet_length(workflow) NOT BETWEEN 1 AND 255
            THEN format('workflow name is %s bytes, outside 1..=255', octet_length(workflow))
        WHEN workflow ~ '[\u0001-\u001f\u007f-\u009f]'
            THEN 'workflow name contains a control character'
        WHEN status IS NULL
            OR status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed',
                              'cancelled')
            THEN format('unknown status %L', status)
        WHEN token IS NULL OR token < 0 THEN format('invalid token %L', token)
        WHEN unacked IS NULL OR unacked NOT BETWEEN 0 AND 4294967295
            THEN format('unacknowledged count %L outside 0..=4294967295', unacked)
        WHEN status IN ('completed', 'failed', 'cancelled') AND outcome IS NULL
            THEN 'terminal execution without an outcome'
    END
$$;

DROP INDEX {s}.executions_terminal;
CREATE INDEX executions_terminal ON {s}.executions (last_delivery_ended_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE {s}.paused_scopes (
    workflow text COLLATE "C" UNIQUE NULLS NOT DISTINCT
);

CREATE TABLE {s}.concurrency_limits (
    key          text COLLATE "C" UNIQUE NULLS NOT DISTINCT,
    max_leases   bigint NOT NULL CHECK (max_leases BETWEEN 1 AND 100000)
);

CREATE INDEX executions_live_by_key ON {s}.executions (concurrency_key, lease_expires_at)
    WHERE concurrency_key IS NOT NULL AND status = 'running';
