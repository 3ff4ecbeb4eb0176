-- lease-sqlite schema version 7 (cancel and pause).
--
-- Cancelled executions are terminal: the retention walk's partial index now holds them too
-- (their end instant is last_delivery_ended_at, written by the cancel).
-- lease_paused: one row per paused scope of a namespace; kind 'namespace' (workflow '')
-- or 'workflow' (workflow = its name). Ordered by (kind, workflow), which is list_paused's
-- order: the namespace first, then workflows by name.
DROP INDEX lease_executions_terminal;
CREATE INDEX lease_executions_terminal
    ON lease_executions (namespace, id, last_delivery_ended_at)
    WHERE status IN ('completed', 'failed', 'cancelled') AND corrupt IS NULL;
CREATE TABLE lease_paused (
    namespace TEXT NOT NULL,
    kind      TEXT NOT NULL,
    workflow  TEXT NOT NULL,
    PRIMARY KEY (namespace, kind, workflow)
) WITHOUT ROWID;
