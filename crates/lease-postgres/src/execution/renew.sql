-- `$1 id, $2 token, $3 clock, $4 lease ms, $5 delays` -> (current token, status, new expiry
-- or NULL when not renewed). No row: unknown execution.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, {held_status} AS status
    FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        lease_expires_at = clk.now + $4,
        claimable_at = {s}.claimable_after(e.status, e.due_at, e.wake_after_claim,
            clk.now + $4, e.unacknowledged_deliveries, e.last_delivery_ended_at, $5,
            e.redelivery_base_ms, e.redelivery_factor, e.redelivery_cap_ms)
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING e.lease_expires_at
)
SELECT cur.token, cur.status, upd.lease_expires_at FROM cur LEFT JOIN upd ON true
