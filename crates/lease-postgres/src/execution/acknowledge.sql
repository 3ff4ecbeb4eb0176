-- `$1 id, $2 token, $3 clock, $4 new status, $5 outcome` -> (current token, status,
-- acknowledged?, notification count). Resets unacked; suspended: due at the earliest wake
-- requested during the delivery (or never), notified when there is one; completed/failed:
-- terminal with the outcome. A terminal acknowledgement writes no history: the row's
-- columns describe its last delivery (schema v19, `delivery_claimed_at`); a suspension
-- folds the delivery into the `deliveries` jsonb as suspended, as does either end of a
-- delivery claimed before version 19 (its open entry is in the jsonb). A keyed lease frees
-- a place of its key (its concurrency limit counts live leases): it notifies "claimable
-- now".
--
-- The fence is the update's own row lock: its WHERE holds the token and status test, and
-- in READ COMMITTED an update that meets a row changed since its snapshot waits for the
-- row's lock and tests the WHERE again on the newest version before it writes. So the
-- test and the write are one step under the lock a claim's `FOR UPDATE SKIP LOCKED`
-- conflicts with, and no separate lock is logged before the write (one WAL record per
-- acknowledgement fewer). Only when the update did not apply does `cur` lock the row, to
-- report the newest token and status (`FenceCheck`): a stale holder learns `Lost` from
-- the version that beat it, never from its snapshot.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = $4,
        ever_suspended = e.ever_suspended OR $4 = 'suspended',
        due_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN $4 = 'suspended' THEN e.outcome ELSE $5 END,
        claimable_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        deliveries = CASE WHEN $4 <> 'suspended' AND e.delivery_claimed_at IS NOT NULL
            THEN e.deliveries
            ELSE {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at, clk.now,
                CASE WHEN $4 = 'suspended' THEN 'suspended' ELSE 'acknowledged' END,
                NULL, NULL, 20) END,
        delivery_claimed_at = CASE WHEN $4 = 'suspended' THEN NULL
            ELSE e.delivery_claimed_at END
    FROM clk
    WHERE e.id = $1 AND e.token = $2 AND {held_status} = 'running'
    RETURNING true AS acknowledged,
        LEAST(e.claimable_at, CASE WHEN e.concurrency_key IS NOT NULL THEN clk.now END)
            AS claimable_at
),
cur AS MATERIALIZED (
    SELECT e.token, {held_status} AS status
    FROM {s}.executions e
    WHERE e.id = $1 AND NOT EXISTS (SELECT 1 FROM upd)
    FOR NO KEY UPDATE
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT $2::bigint AS token, 'running'::text AS status, upd.acknowledged,
    (SELECT count(*) FROM note)
FROM upd
UNION ALL
SELECT cur.token, cur.status, NULL::boolean, 0::bigint
FROM cur
