-- `$1 before, $2 limit` -> the ids purged, by id (retention). Takes up to `$2` terminal
-- executions acknowledged before `$1` (`last_delivery_ended_at` of a completed or failed
-- row), oldest first, from the `executions_terminal` index (migration v6), and deletes them
-- with their step records, the store receipts they made, the start records naming them,
-- their effects and their store-waiter registrations, in one statement. Never a
-- non-terminal row: no transition leaves a terminal status, so the condition re-checked on
-- a row's newest version after its lock cannot change. Rows are locked
-- `FOR UPDATE SKIP LOCKED`: a row some statement holds (a stale holder's fenced write,
-- another purge) is left for a later call instead of waiting for it, so purges never queue
-- behind the hot path nor each other, and two concurrent purges take disjoint rows; a
-- fenced write that waited for a purge's lock then finds no row (`UnknownExecution`). Rows
-- `record_problem` rejects are left for `list_corrupt` (their ids could not be reported).
WITH victims AS MATERIALIZED (
    SELECT e.id FROM {s}.executions e
    WHERE e.status IN ('completed', 'failed', 'cancelled') AND e.last_delivery_ended_at < $1
      AND {decodable}
    ORDER BY e.last_delivery_ended_at, e.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM {s}.executions e USING victims v WHERE e.id = v.id RETURNING e.id
),
steps AS (
    DELETE FROM {s}.steps st USING victims v WHERE st.execution_id = v.id
),
receipts AS (
    DELETE FROM {s}.store_receipts r USING victims v WHERE r.execution_id = v.id
),
starts AS (
    DELETE FROM {s}.start_requests q USING victims v WHERE q.target = v.id
),
effects AS (
    DELETE FROM {s}.effects f USING victims v WHERE f.execution_id = v.id
),
waiters AS (
    DELETE FROM {s}.store_waiters w USING victims v WHERE w.execution_id = v.id
)
SELECT g.id FROM gone g ORDER BY g.id
