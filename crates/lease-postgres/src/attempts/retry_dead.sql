-- `$1 ids text[] (distinct), $2 input (NULL: keep each one's), $3 clock` -> one row per id
-- in order: (item number from 1, status as `{held_status}` judges it or NULL for an unknown
-- execution, retried?, the execution columns as updated, now, notification count).
--
-- Every named row is locked `FOR NO KEY UPDATE` in id order (as `acknowledge_batch` does,
-- so concurrent calls cannot deadlock) and judged on its version current after the lock;
-- only when every id names a dead execution are they all re-admitted
-- (`ExecutionRecord::retry_dead`): waiting again, due now, counter 0, no lease, no wake
-- pending, the new input if given, claimable now; the last error stays. A running row whose
-- lease expired on its last attempt is first ended as `get` reads it (at its expiry, with
-- the expiry's last error), its delivery folded into the history's jsonb as expired. Otherwise nothing is written and the caller reports the first
-- item that is unknown or not dead. One wake-up, "now", as an admission's.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.id, u.ord FROM unnest($1::text[]) WITH ORDINALITY AS u(id, ord)
),
cur AS MATERIALIZED (
    SELECT e.id, {held_status} AS status FROM {s}.executions e
    WHERE e.id = ANY ($1::text[])
    ORDER BY e.id
    FOR NO KEY UPDATE
),
verdict AS MATERIALIZED (
    SELECT i.ord, i.id, c.status FROM items i LEFT JOIN cur c ON c.id = i.id
),
upd AS (
    UPDATE {s}.executions e SET
        status = CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END,
        due_at = clk.now,
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = CASE WHEN e.status = 'running'
            THEN COALESCE(e.lease_expires_at, clk.now) ELSE e.last_delivery_ended_at END,
        {expiry_error},
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        input = COALESCE($2::text, e.input),
        claimable_at = clk.now,
        deliveries = CASE WHEN e.status = 'running' THEN {s}.history_fold(e.deliveries,
            e.token, e.delivery_claimed_at, COALESCE(e.lease_expires_at, clk.now), 'expired',
            'lease_expired', 'the lease expired before the delivery was acknowledged', 20)
            ELSE e.deliveries END,
        delivery_claimed_at = NULL
    FROM verdict v, clk
    WHERE e.id = v.id
      AND NOT EXISTS (SELECT 1 FROM verdict r WHERE r.status IS DISTINCT FROM 'dead')
    RETURNING {cols}, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING count(*) > 0)
SELECT v.ord, v.status, (u.id IS NOT NULL) AS retried, u.*, (SELECT now FROM clk),
    (SELECT count(*) FROM note)
FROM verdict v LEFT JOIN upd u ON u.id = v.id
ORDER BY v.ord
