-- `$1 request now, $2 clock, $3 limit, $4 lease ms, $5 delays` -> (id, token, expires_at,
-- the 12 execution columns as updated by the claim, NULL, NULL, notification count, 0,
-- due) by (due, id): the lease first (a stable prefix the benchmark reads), then the record
-- as the claim left it, so `claim_due_with_records` needs no second round trip; then
-- `{horizon}` appends one summary row (id NULL; columns 15 and 16: the clock the claim ran
-- at and the horizon, see `claim_horizon.sql`). One `UPDATE ... FROM` the first n rows, by
-- (due, id), of two locking selects (`FOR UPDATE SKIP LOCKED LIMIT n`, schema v7), so no
-- claim walks past a live lease:
--
-- - `waiting`: rows not running, walked by `(sort_due, id)` on `executions_claim_waiting` up
--   to now (`claimable_at >= sort_due`, so the bound is implied), stopping after n
--   claimable rows; it passes over rows waiting out a redelivery delay only. Its
--   `claimable_at + 0` keeps `executions_horizon` out of reach: the generic plan of the
--   prepared statement (which sqlx's cache runs; its LIMIT is a parameter, planned as 10%
--   of the rows) read every due row through that index and sorted them, 67 ms for a claim
--   of one over 5,000 due rows at 10^6 stored, against 0.3 ms for the ordered walk;
-- - `expired`: running rows with `claimable_at <= now` on `executions_claim_expired` (a
--   live lease's `claimable_at` is its expiry plus the redelivery delay, in the future), so
--   it reads only expired leases past their delay, sorted by (due, id).
--
-- The first n of each side hold the first n overall. When both sides have rows, rows of
-- the n + n locked that are not among the first n stay locked (unclaimed) until the commit:
-- only in a full claim (as many as asked), whose summary row (`unpicked`) then reports them
-- due at once, so its dispatcher claims again immediately; concurrent claims skip them
-- meanwhile. An expired running row is first ended as an unacknowledged delivery ended at its expiry
-- (unacked + 1, last_delivery_ended_at = expiry, due_at = min(due_at, wake_after_claim)),
-- then claimed with the next token of the schema's single sequence, issued in claim order.
-- A token not above the row's stored (post-lock) token means the sequence fell behind the
-- tokens already issued: `token_counter_behind` aborts the whole statement (SQLSTATE
-- LT001, nothing claimed) instead of issuing a token twice.
WITH clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
waiting AS MATERIALIZED (
    SELECT e.id, e.sort_due AS due
    FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status <> 'running'
      AND e.sort_due <= (SELECT now FROM clk)
      AND e.claimable_at + 0 <= (SELECT now FROM clk)
      AND {decodable} AND {unpaused}
    ORDER BY e.sort_due, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
expired AS MATERIALIZED (
    SELECT e.id, e.sort_due AS due
    FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status = 'running'
      AND e.claimable_at <= (SELECT now FROM clk)
      AND {decodable} AND {unpaused}
    ORDER BY e.sort_due, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
picked AS MATERIALIZED (
    SELECT u.id, u.due FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) u
    ORDER BY u.due, u.id
    LIMIT $3
),
issued AS MATERIALIZED (
    SELECT p.id, p.due, nextval('{s}.fencing_tokens') AS token
    FROM picked p ORDER BY p.due, p.id
),
claimed AS (
    UPDATE {s}.executions e SET
        token = CASE WHEN i.token > e.token THEN i.token
            ELSE {s}.token_counter_behind(i.token, e.token, e.id) END,
        status = 'running',
        unacknowledged_deliveries = CASE WHEN e.status = 'running'
            THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
            ELSE e.unacknowledged_deliveries END,
        last_delivery_ended_at = CASE WHEN e.status = 'running'
            THEN e.lease_expires_at ELSE e.last_delivery_ended_at END,
        due_at = i.due,
        lease_expires_at = clk.now + $4,
        wake_after_claim = NULL,
        claimable_at = {s}.claimable_from('running', i.due, NULL, clk.now + $4,
            CASE WHEN e.status = 'running'
                THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
                ELSE e.unacknowledged_deliveries END,
            NULL, $5)
    FROM issued i, clk
    WHERE e.id = i.id
    RETURNING {cols}, e.claimable_at, i.due AS claim_order
),
note AS MATERIALIZED ({notify} FROM claimed e HAVING count(*) > 0),
short AS MATERIALIZED (SELECT (SELECT count(*) FROM picked) < $3 AS short),
unpicked AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE NOT (SELECT short FROM short)
      AND e.claimable_at IS NOT NULL AND e.id NOT IN (SELECT p.id FROM picked p)
      AND {decodable} AND {unpaused}
    ORDER BY e.claimable_at
    LIMIT 1
),
due_unlocked AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE (SELECT short FROM short)
      AND e.claimable_at <= (SELECT now FROM clk) AND e.id NOT IN (SELECT p.id FROM picked p)
      AND {decodable} AND {unpaused}
    ORDER BY e.claimable_at
    LIMIT 1
    FOR KEY SHARE SKIP LOCKED
),
later AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE (SELECT short FROM short) AND e.claimable_at > (SELECT now FROM clk)
      AND {decodable} AND {unpaused}
    ORDER BY e.claimable_at
    LIMIT 1
)
SELECT e.id AS lease_id, e.token AS lease_token, e.lease_expires_at AS lease_expiry, {cols},
    NULL::bigint AS now_ms, NULL::bigint AS next_claimable_at,
    (SELECT count(*) FROM note) AS notified, 0 AS part, e.claim_order
FROM claimed e
{horizon}
ORDER BY part, claim_order, lease_id
