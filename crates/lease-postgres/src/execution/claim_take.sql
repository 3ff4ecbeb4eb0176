-- The claim transition, spliced as `{take}` after a statement's `clk`, `picked` (id,
-- priority, due, key: the rows to claim, locked by this transaction) and `gated` (true:
-- claim nothing) CTEs: `claim.sql` and the keyed claim `claim_keyed.sql`. Rows are claimed
-- in claim order (priority DESC, due, id), each with the next token of the schema's single
-- sequence, issued in that order. An expired running row is first ended as an
-- unacknowledged delivery ended at its expiry (unacked + 1, last_delivery_ended_at =
-- expiry, due_at = min(due_at, wake_after_claim)). A token not above the row's stored
-- (post-lock) token means the sequence fell behind the tokens already issued:
-- `token_counter_behind` aborts the whole statement (SQLSTATE LT001, nothing claimed)
-- instead of issuing a token twice. `{unblocked}` is the horizon's test that a row due now
-- is not held back by its key (`true` in `claim.sql`), applied after a short claim only
-- (`due_unlocked`): after a full one, `unpicked` reports the next claimable row whatever
-- its key (counting that key's live leases there cost the keyed claim ~0.09 ms); a row held
-- back by a full key then costs a dispatcher one short claim, whose horizon leaves it out.
-- The claim copies the workflow's own redelivery policy onto the row (schema v17, like the
-- attempt limit; the delay after this delivery follows it). The new delivery lives in the
-- row's columns (token, `delivery_claimed_at`, schema v19); the one before it, if the row
-- still described it (a takeover), is folded into the `deliveries` jsonb as expired at its
-- expiry, keeping 19 entries there so that with the row's the history holds 20. A first
-- claim (no jsonb, no earlier delivery) writes no jsonb. A death by expiry folds the
-- delivery the same way and leaves the row describing none.
--
-- Takeovers (schema v21): the claimed rows that came from `expired` (running rows whose
-- lease ran out, locked FOR UPDATE, so PostgreSQL checked their status again on the row
-- version it locked, the one `claimed` updates) are added to the one-row counter
-- `takeovers` by `counted`, in this statement. Only when there is at least one: for a claim
-- of waiting rows alone (the drain's) the update's one-time test is false, so it never
-- reads the counter row, let alone locks or writes it, and concurrent claims do not queue
-- on it.
attempt_rules AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM {s}.attempt_limits) AS any_limit,
        EXISTS (SELECT 1 FROM {s}.redelivery_policies) AS any_policy
),
dying AS MATERIALIZED (
    SELECT e.id FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status = 'running'
      AND e.claimable_at <= (SELECT now FROM clk) AND {last_attempt}
    ORDER BY e.claimable_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
died AS (
    UPDATE {s}.executions e SET
        status = 'dead',
        unacknowledged_deliveries = LEAST(e.unacknowledged_deliveries + 1, 4294967295),
        last_delivery_ended_at = COALESCE(e.lease_expires_at, (SELECT now FROM clk)),
        {expiry_error},
        due_at = NULL,
        wake_after_claim = NULL,
        lease_expires_at = NULL,
        claimable_at = NULL,
        deliveries = {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at,
            COALESCE(e.lease_expires_at, (SELECT now FROM clk)), 'expired', 'lease_expired',
            'the lease expired before the delivery was acknowledged', 20),
        delivery_claimed_at = NULL
    FROM dying d
    WHERE e.id = d.id
),
issued AS MATERIALIZED (
    SELECT p.id, p.due,
        row_number() OVER (ORDER BY p.priority DESC, p.due, p.id) AS ord,
        nextval('{s}.fencing_tokens') AS token
    FROM picked p
    WHERE NOT (SELECT gated FROM gated)
    ORDER BY p.priority DESC, p.due, p.id
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
        {expiry_error},
        attempt_limit = CASE WHEN (SELECT any_limit FROM attempt_rules) THEN COALESCE(
            (SELECT a.max_attempts FROM {s}.attempt_limits a WHERE a.workflow = e.workflow),
            (SELECT a.max_attempts FROM {s}.attempt_limits a WHERE a.workflow IS NULL)) END,
        redelivery_base_ms = CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.base_ms FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END,
        redelivery_factor = CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.factor FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END,
        redelivery_cap_ms = CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.cap_ms FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END,
        deliveries = CASE WHEN e.deliveries IS NULL AND e.delivery_claimed_at IS NULL
            THEN NULL
            ELSE {s}.history_fold(e.deliveries, e.token, e.delivery_claimed_at,
                e.lease_expires_at, CASE WHEN e.status = 'running' THEN 'expired' END,
                'lease_expired', 'the lease expired before the delivery was acknowledged',
                19) END,
        delivery_claimed_at = clk.now,
        claimable_at = {s}.claimable_after('running', i.due, NULL, clk.now + $4,
            CASE WHEN e.status = 'running'
                THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
                ELSE e.unacknowledged_deliveries END,
            NULL, $5, CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.base_ms FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END,
            CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.factor FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END,
            CASE WHEN (SELECT any_policy FROM attempt_rules) THEN
            (SELECT r.cap_ms FROM {s}.redelivery_policies r WHERE r.workflow = e.workflow) END)
    FROM issued i, clk
    WHERE e.id = i.id
    RETURNING {cols}, e.claimable_at, i.ord AS claim_order
),
took_over AS MATERIALIZED (
    SELECT count(*) AS n FROM issued i WHERE i.id IN (SELECT x.id FROM expired x)
),
counted AS (
    UPDATE {s}.takeovers t SET total = t.total + (SELECT o.n FROM took_over o)
    WHERE (SELECT o.n FROM took_over o) > 0
),
note AS MATERIALIZED ({notify} FROM claimed e HAVING count(*) > 0),
short AS MATERIALIZED (SELECT (SELECT count(*) FROM picked) < $3 AS short),
unpicked AS MATERIALIZED (
    SELECT LEAST(
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE NOT (SELECT short FROM short)
           AND e.claimable_at IS NOT NULL AND e.status COLLATE "C" <> 'running'
           AND e.id NOT IN (SELECT p.id FROM picked p)
           AND {decodable} AND {unpaused}
         ORDER BY e.claimable_at
         LIMIT 1),
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE NOT (SELECT short FROM short)
           AND e.claimable_at IS NOT NULL AND e.status = 'running'
           AND e.id NOT IN (SELECT p.id FROM picked p)
           AND e.id NOT IN (SELECT d.id FROM dying d)
           AND {decodable} AND {unpaused}
         ORDER BY e.claimable_at
         LIMIT 1)) AS claimable_at
),
due_unlocked AS MATERIALIZED (
    SELECT LEAST(
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE (SELECT short FROM short)
           AND e.claimable_at <= (SELECT now FROM clk) AND e.status COLLATE "C" <> 'running'
           AND e.id NOT IN (SELECT p.id FROM picked p)
           AND {decodable} AND {unpaused} AND {unblocked}
         ORDER BY e.claimable_at
         LIMIT 1
         FOR KEY SHARE SKIP LOCKED),
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE (SELECT short FROM short)
           AND e.claimable_at <= (SELECT now FROM clk) AND e.status = 'running'
           AND e.id NOT IN (SELECT p.id FROM picked p)
           AND e.id NOT IN (SELECT d.id FROM dying d)
           AND {decodable} AND {unpaused} AND {unblocked}
         ORDER BY e.claimable_at
         LIMIT 1
         FOR KEY SHARE SKIP LOCKED)) AS claimable_at
),
later AS MATERIALIZED (
    SELECT LEAST(
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE (SELECT short FROM short) AND e.claimable_at > (SELECT now FROM clk)
           AND e.status COLLATE "C" <> 'running' AND {decodable} AND {unpaused}
         ORDER BY e.claimable_at
         LIMIT 1),
        (SELECT e.claimable_at FROM {s}.executions e
         WHERE (SELECT short FROM short) AND e.claimable_at > (SELECT now FROM clk)
           AND e.status = 'running' AND {decodable} AND {unpaused}
         ORDER BY e.claimable_at
         LIMIT 1)) AS claimable_at
)
SELECT e.id AS lease_id, e.token AS lease_token, e.lease_expires_at AS lease_expiry, {cols},
    NULL::bigint AS now_ms, NULL::bigint AS next_claimable_at,
    (SELECT count(*) FROM note) AS notified, 0 AS part, e.claim_order, NULL::boolean AS gated
FROM claimed e
{horizon}
ORDER BY part, claim_order, lease_id
