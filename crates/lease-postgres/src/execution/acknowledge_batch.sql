-- `$1 ids text[], $2 tokens bigint[], $3 new statuses text[], $4 outcomes text[] (NULL for
-- suspended), $5 clock` -> one row per item in item order: (item number from 1, current
-- token, status; both NULL for an unknown execution, acknowledged?, notification count).
-- The ids must be distinct (`check_ack_batch`). One notification: the earliest wake of the
-- items acknowledged as suspended with one, or now when an item held a keyed lease (it
-- frees a place of its key). The history is written as `acknowledge.sql` writes it: none
-- for a terminal outcome, the delivery folded into the jsonb for a suspension.
--
-- Each item is the single `acknowledge.sql` applied independently, in one statement, and
-- fenced as it is: the update's WHERE holds each item's token and status test, which an
-- update that meets a row changed since its snapshot tests again on the newest version
-- under the row's lock before it writes. The items are joined in id order (`items` is
-- sorted), so concurrent batches tend to lock common rows in the same order; a deadlock
-- between them rolls one statement back whole and it is retried. Refused outright (an
-- unknown execution, token 0 or a token above the execution's latest) is decided on the
-- statement's snapshot (`snap`): a token the caller holds was issued by a claim that
-- committed before this statement began, so the snapshot sees it. When an item is refused,
-- nothing is written and every verdict is the snapshot's; otherwise `cur` locks the rows of
-- the items the update did not apply (none, usually: then it reads no row) and reports
-- their newest versions (as
-- `acknowledge.sql` does), so an applied item is never missing from the reply and a stale
-- holder learns `Lost` from the version that beat it.
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.ord, u.id, u.token, u.status, u.outcome
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
        WITH ORDINALITY AS u(id, token, status, outcome, ord)
    ORDER BY u.id
),
snap AS MATERIALIZED (
    SELECT i.ord, i.id, i.token AS lease_token, i.status AS new_status, i.outcome,
        e.token AS cur_token, {held_status} AS cur_status,
        (e.id IS NULL OR i.token = 0 OR i.token > e.token) AS refused
    FROM items i LEFT JOIN {s}.executions e ON e.id = i.id
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = v.status,
        ever_suspended = e.ever_suspended OR v.status = 'suspended',
        due_at = CASE WHEN v.status = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN v.status = 'suspended' THEN e.outcome ELSE v.outcome END,
        claimable_at = CASE WHEN v.status = 'suspended'
            THEN e.wake_after_claim ELSE NULL END,
        deliveries = CASE WHEN v.status <> 'suspended' AND e.delivery_claimed_at IS NOT NULL
            THEN e.deliveries
            ELSE {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at, clk.now,
                CASE WHEN v.status = 'suspended' THEN 'suspended' ELSE 'acknowledged' END,
                NULL, NULL, 20) END,
        delivery_claimed_at = CASE WHEN v.status = 'suspended' THEN NULL
            ELSE e.delivery_claimed_at END
    FROM items v, clk
    WHERE e.id = v.id AND e.token = v.token AND {held_status} = 'running'
      AND NOT EXISTS (SELECT 1 FROM snap r WHERE r.refused)
    RETURNING e.id,
        LEAST(e.claimable_at, CASE WHEN e.concurrency_key IS NOT NULL THEN clk.now END)
            AS claimable_at
),
cur AS MATERIALIZED (
    SELECT e.id, e.token, {held_status} AS status FROM {s}.executions e
    WHERE e.id = ANY (ARRAY(
            SELECT v.id FROM items v
            WHERE NOT EXISTS (SELECT 1 FROM upd u WHERE u.id = v.id)))
      AND NOT EXISTS (SELECT 1 FROM snap r WHERE r.refused)
    ORDER BY e.id
    FOR NO KEY UPDATE
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT v.ord,
    CASE WHEN u.id IS NOT NULL THEN v.lease_token
        WHEN c.id IS NOT NULL THEN c.token ELSE v.cur_token END,
    CASE WHEN u.id IS NOT NULL THEN 'running'
        WHEN c.id IS NOT NULL THEN c.status ELSE v.cur_status END,
    (u.id IS NOT NULL) AS acknowledged,
    (SELECT count(*) FROM note)
FROM snap v LEFT JOIN upd u ON u.id = v.id LEFT JOIN cur c ON c.id = v.id
ORDER BY v.ord
