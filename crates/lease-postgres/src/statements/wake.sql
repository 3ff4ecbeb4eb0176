-- RFC 001's wake (`ExecutionRecord::request_wake`) of the executions in the statement's
-- `wake_targets` CTE (columns id, at, delays: the execution, the wake instant and the
-- redelivery delays parameter), spliced as `{wake}` after it: two CTEs, `woken` (the rows
-- changed) and `note` (their wake-up). Terminal (dead included): no-op; stored status
-- running: folded into wake_after_claim (no notification: the acknowledgement or the
-- lease's end decides); otherwise into due_at, notifying the row's new `claimable_at`.
-- Written once, for `request_wake` and for the wakes of effect settles and store updates.
woken AS (
    UPDATE {s}.executions e SET
        wake_after_claim = CASE WHEN e.status = 'running'
            THEN LEAST(e.wake_after_claim, t.at) ELSE e.wake_after_claim END,
        due_at = CASE WHEN e.status = 'running'
            THEN e.due_at ELSE LEAST(e.due_at, t.at) END,
        claimable_at = {s}.claimable_after(e.status,
            CASE WHEN e.status = 'running' THEN e.due_at ELSE LEAST(e.due_at, t.at) END,
            CASE WHEN e.status = 'running'
                THEN LEAST(e.wake_after_claim, t.at) ELSE e.wake_after_claim END,
            e.lease_expires_at, e.unacknowledged_deliveries, e.last_delivery_ended_at,
            t.delays, e.redelivery_base_ms, e.redelivery_factor, e.redelivery_cap_ms)
    FROM wake_targets t
    WHERE e.id = t.id AND e.status NOT IN ('completed', 'failed', 'cancelled', 'dead')
    RETURNING e.status, e.claimable_at
),
note AS MATERIALIZED (
    {notify} FROM woken WHERE woken.status <> 'running'
    HAVING min(woken.claimable_at) IS NOT NULL
)
