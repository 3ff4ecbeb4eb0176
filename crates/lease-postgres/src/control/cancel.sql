-- `$1 id, $2 reason, $3 clock` -> (stored status, stored outcome, ended a live lease?,
-- notification count), or no row for an unknown id. The row is locked `FOR NO KEY UPDATE`
-- like acknowledge's, so a claim or fenced write is either before it or sees the cancelled
-- row (and is `Lost`). A terminal row is left as it is; otherwise the effective record (an
-- expired running lease ends unacknowledged: unacked + 1, with the expiry's last error; a
-- dead one, stored or by expiry, is cancellable too) becomes cancelled with the reason as
-- outcome, no lease, nothing due, ended now; token unchanged. A running row's delivery is
-- folded into the history's jsonb as cancelled (a live lease) or expired at its expiry,
-- and the row describes no delivery any more (schema v19). A keyed execution freed a
-- place for its key: the wake-up says "claimable now".
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.status, e.outcome, e.lease_expires_at, e.concurrency_key
    FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = CASE
            WHEN e.status = 'running' AND e.lease_expires_at <= clk.now
            THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
            ELSE e.unacknowledged_deliveries END,
        status = 'cancelled',
        outcome = $2,
        lease_expires_at = NULL,
        due_at = NULL,
        wake_after_claim = NULL,
        last_delivery_ended_at = clk.now,
        {expiry_error},
        claimable_at = NULL,
        deliveries = CASE
            WHEN e.status <> 'running' THEN e.deliveries
            WHEN e.lease_expires_at > clk.now
            THEN {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at, clk.now,
                'cancelled', NULL, NULL, 20)
            ELSE {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at,
                COALESCE(e.lease_expires_at, clk.now), 'expired', 'lease_expired',
                'the lease expired before the delivery was acknowledged', 20)
            END,
        delivery_claimed_at = NULL
    FROM cur, clk
    WHERE e.id = cur.id AND cur.status NOT IN ('completed', 'failed', 'cancelled')
    RETURNING COALESCE(cur.status = 'running' AND cur.lease_expires_at > clk.now, false)
        AS ended_lease, cur.concurrency_key, clk.now AS claimable_at
),
note AS MATERIALIZED (
    {notify} FROM upd WHERE upd.concurrency_key IS NOT NULL HAVING count(*) > 0
)
SELECT cur.status, cur.outcome, upd.ended_lease, (SELECT count(*) FROM note)
FROM cur LEFT JOIN upd ON true
