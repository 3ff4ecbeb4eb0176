-- `$1 id, $2 token, $3 clock, $4 delays` -> (current token, status, released?,
-- notification count). Ends the delivery unacknowledged: unacked + 1,
-- last_delivery_ended_at = now, still due; notifies the end of the redelivery delay (the
-- row's new `claimable_at`), or now for a keyed lease (it frees a place of its key, issue
-- 21 item 4).
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = LEAST(e.unacknowledged_deliveries + 1, 4294967295),
        last_delivery_ended_at = clk.now,
        due_at = LEAST(e.due_at, e.wake_after_claim),
        wake_after_claim = NULL,
        lease_expires_at = NULL,
        status = CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END,
        claimable_at = {s}.claimable_from(
            CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END,
            LEAST(e.due_at, e.wake_after_claim), NULL, NULL,
            LEAST(e.unacknowledged_deliveries + 1, 4294967295), clk.now, $4)
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING true AS released,
        LEAST(e.claimable_at, CASE WHEN e.concurrency_key IS NOT NULL THEN clk.now END)
            AS claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT cur.token, cur.status, upd.released, (SELECT count(*) FROM note)
FROM cur LEFT JOIN upd ON true
