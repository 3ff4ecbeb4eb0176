-- lease-postgres schema version 9: operator controls.
--
-- Cancel: a terminal status 'cancelled' whose outcome is the reason (the status check,
-- `record_problem` and the retention index learn it). Priorities and
-- concurrency keys: two columns on executions (priority -1000..=1000, default 0; key NULL
-- for none). Pauses: one row per paused scope (`workflow` NULL for the namespace).
-- Limits: one row per limited key (`key` NULL for the namespace default).

ALTER TABLE {s}.executions DROP CONSTRAINT executions_status_check;
ALTER TABLE {s}.executions ADD CONSTRAINT executions_status_check
    CHECK (status IN ('admitted', 'running', 'suspended', 'completed', 'failed', 'cancelled'));

ALTER TABLE {s}.executions
    ADD COLUMN priority integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    ADD COLUMN concurrency_key text COLLATE "C";

-- `claimable_from` needs no change: it is only evaluated for rows a claim, renew, release
-- or wake changes, and none of them changes a cancelled row (cancel itself stores
-- claimable_at NULL). `record_problem` treats a cancelled row as v5 treats a failed one
-- (terminal: it must have an outcome); v5's function is kept under a new name.
ALTER FUNCTION {s}.record_problem RENAME TO record_problem_v5;

CREATE FUNCTION {s}.record_problem(
    id text, workflow text, status text, token bigint, unacked bigint, outcome text
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT {s}.record_problem_v5(id, workflow,
        CASE WHEN status = 'cancelled' THEN 'failed' ELSE status END, token, unacked, outcome)
$$;

DROP INDEX {s}.executions_terminal;
CREATE INDEX CONCURRENTLY executions_terminal ON {s}.executions (last_delivery_ended_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE {s}.paused_scopes (
    workflow text COLLATE "C" UNIQUE NULLS NOT DISTINCT
);

CREATE TABLE {s}.concurrency_limits (
    key          text COLLATE "C" UNIQUE NULLS NOT DISTINCT,
    max_leases   bigint NOT NULL CHECK (max_leases BETWEEN 1 AND 100000)
);

CREATE INDEX CONCURRENTLY executions_live_by_key ON {s}.executions (concurrency_key, lease_expires_at)
    WHERE concurrency_key IS NOT NULL AND status = 'running';
