-- `$1 ids text[], $2 tokens bigint[], $3 new statuses text[], $4 outcomes text[] (NULL for
-- suspended), $5 clock` -> one row per item in item order: (item number from 1, current
-- token, status; both NULL for an unknown execution, acknowledged?, notification count).
-- The ids must be distinct (`check_ack_batch`). One notification: the earliest wake of the
-- items acknowledged as suspended with one, or now when an item held a keyed lease (it
-- frees a place of its key). The history is written as `acknowledge.sql` writes it: none
-- for a terminal outcome, the delivery folded into the jsonb for a suspension.
--
-- Each item is the single `acknowledge.sql` applied independently, in one statement: the
-- items' rows are locked `FOR NO KEY UPDATE` in id order (concurrent batches lock their
-- common rows in the same order, so they cannot deadlock each other), every item gets a
-- verdict from the row version current after its lock, and the update applies the items
-- whose token is current on a running row, but only when no item is refused outright
-- (unknown execution, token 0 or a token above the execution's latest): then nothing is
-- written and the caller reports the first refused item's error.
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.ord, u.id, u.token, u.status, u.outcome
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
        WITH ORDINALITY AS u(id, token, status, outcome, ord)
),
cur AS MATERIALIZED (
    SELECT e.id, e.token, {held_status} AS status FROM {s}.executions e
    WHERE e.id = ANY ($1::text[])
    ORDER BY e.id
    FOR NO KEY UPDATE
),
verdict AS MATERIALIZED (
    SELECT i.ord, i.id, i.token AS lease_token, i.status AS new_status, i.outcome,
        c.token AS cur_token, c.status AS cur_status,
        (c.id IS NULL OR i.token = 0 OR i.token > c.token) AS refused
    FROM items i LEFT JOIN cur c ON c.id = i.id
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = v.new_status,
        ever_suspended = e.ever_suspended OR v.new_status = 'suspended',
        due_at = CASE WHEN v.new_status = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN v.new_status = 'suspended' THEN e.outcome ELSE v.outcome END,
        claimable_at = CASE WHEN v.new_status = 'suspended'
            THEN e.wake_after_claim ELSE NULL END,
        deliveries = CASE WHEN v.new_status <> 'suspended' AND e.delivery_claimed_at IS NOT NULL
            THEN e.deliveries
            ELSE {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at, clk.now,
                CASE WHEN v.new_status = 'suspended' THEN 'suspended' ELSE 'acknowledged' END,
                NULL, NULL, 20) END,
        delivery_claimed_at = CASE WHEN v.new_status = 'suspended' THEN NULL
            ELSE e.delivery_claimed_at END
    FROM verdict v, clk
    WHERE e.id = v.id AND v.cur_token = v.lease_token AND v.cur_status = 'running'
      AND NOT EXISTS (SELECT 1 FROM verdict r WHERE r.refused)
    RETURNING e.id,
        LEAST(e.claimable_at, CASE WHEN e.concurrency_key IS NOT NULL THEN clk.now END)
            AS claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT v.ord, v.cur_token, v.cur_status, (u.id IS NOT NULL) AS acknowledged,
    (SELECT count(*) FROM note)
FROM verdict v LEFT JOIN upd u ON u.id = v.id
ORDER BY v.ord
