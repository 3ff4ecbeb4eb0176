-- `$1 id, $2 token, $3 clock, $4 delays, $5 error kind (NULL: no worker started the
-- delivery, `Release::NotStarted`), $6 error message, $7 the history keeps the error (a
-- worker's error, not a retry reply)` -> (current token, status as
-- `{held_status}` judges it, released?, notification count). Ends the delivery
-- unacknowledged (`ExecutionRecord::release_with`), still due:
--
-- - an attempt (`$5` set): unacked + 1, last_delivery_ended_at = now, the last error
--   (kind, message, that attempt, now); when the counter reaches the row's attempt limit
--   the execution is 'dead' in this same statement (nothing due, no claimable_at);
-- - not started: counter, last_delivery_ended_at and last error unchanged, so no
--   redelivery delay starts (the old one had passed when the delivery was claimed).
--
-- The delivery is folded into the history's jsonb as released (with the error) or not
-- started, and the row describes no delivery any more (schema v19).
--
-- Notifies the row's new `claimable_at`, or now for a keyed lease (it frees a place under
-- its key's concurrency limit, which a waiting execution of that key may take at once).
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, {held_status} AS status, e.unacknowledged_deliveries AS unacked,
        e.last_delivery_ended_at AS ended, e.attempt_limit, e.ever_suspended
    FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
fate AS MATERIALIZED (
    SELECT c.id, $5::text IS NOT NULL AS attempt,
        CASE WHEN $5::text IS NULL THEN c.unacked
            ELSE LEAST(c.unacked + 1, 4294967295) END AS unacked,
        CASE WHEN $5::text IS NULL THEN c.ended ELSE clk.now END AS ended,
        CASE WHEN $5::text IS NOT NULL AND c.unacked + 1 >= c.attempt_limit THEN 'dead'
            WHEN c.ever_suspended THEN 'suspended' ELSE 'admitted' END AS status
    FROM cur c, clk
    WHERE c.token = $2 AND c.status = 'running'
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = f.unacked,
        last_delivery_ended_at = f.ended,
        due_at = CASE WHEN f.status = 'dead' THEN NULL
            ELSE LEAST(e.due_at, e.wake_after_claim) END,
        wake_after_claim = NULL,
        lease_expires_at = NULL,
        status = f.status,
        last_error_kind = CASE WHEN f.attempt THEN $5::text ELSE e.last_error_kind END,
        last_error_message = CASE WHEN f.attempt THEN $6::text ELSE e.last_error_message END,
        last_error_attempt = CASE WHEN f.attempt THEN f.unacked ELSE e.last_error_attempt END,
        last_error_at = CASE WHEN f.attempt THEN clk.now ELSE e.last_error_at END,
        deliveries = {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at, clk.now,
            CASE WHEN f.attempt THEN 'released' ELSE 'not_started' END,
            CASE WHEN $7::boolean THEN $5::text END, CASE WHEN $7::boolean THEN $6::text END,
            20),
        delivery_claimed_at = NULL,
        claimable_at = {s}.claimable_after(f.status, LEAST(e.due_at, e.wake_after_claim), NULL,
            NULL, f.unacked, f.ended, $4, e.redelivery_base_ms, e.redelivery_factor,
            e.redelivery_cap_ms)
    FROM fate f, clk
    WHERE e.id = f.id
    RETURNING true AS released,
        LEAST(e.claimable_at, CASE WHEN e.concurrency_key IS NOT NULL THEN clk.now END)
            AS claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT cur.token, cur.status, upd.released, (SELECT count(*) FROM note)
FROM cur LEFT JOIN upd ON true
