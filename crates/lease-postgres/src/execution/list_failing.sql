-- `$1 min (at least 1), $2 limit, $3 clock` -> stored records and now, by effective
-- unacknowledged count (an expired running lease counts as one more) descending, then id.
-- Only rows that can reach `$1` are read (schema v20): those with at least `$1`
-- unacknowledged deliveries (a range of `executions_failing`, whose rows all have one) and
-- the running rows whose lease has expired or has no expiry (`executions_live`), not every
-- stored row.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
candidate AS (
    SELECT e.id FROM {s}.executions e
    WHERE e.unacknowledged_deliveries > 0 AND e.unacknowledged_deliveries >= $1
    UNION
    SELECT e.id FROM {s}.executions e
    WHERE e.status = 'running' AND e.lease_expires_at <= (SELECT now FROM clk)
    UNION
    SELECT e.id FROM {s}.executions e
    WHERE e.status = 'running' AND e.lease_expires_at IS NULL
),
eff AS (
    SELECT {cols}, clk.now AS now_ms,
        e.unacknowledged_deliveries
        + CASE WHEN e.status = 'running' AND COALESCE(e.lease_expires_at <= clk.now, true)
               THEN 1 ELSE 0 END AS effective_unacked
    FROM candidate c
    JOIN {s}.executions e ON e.id = c.id
    CROSS JOIN clk
)
SELECT * FROM eff WHERE effective_unacked >= $1 ORDER BY effective_unacked DESC, id LIMIT $2
