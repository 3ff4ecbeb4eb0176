-- `$1 min, $2 limit, $3 clock` -> stored records and now, by effective unacknowledged count
-- (an expired running lease counts as one more) descending, then id.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
eff AS (
    SELECT {cols}, clk.now AS now_ms,
        e.unacknowledged_deliveries
        + CASE WHEN e.status = 'running' AND COALESCE(e.lease_expires_at <= clk.now, true)
               THEN 1 ELSE 0 END AS effective_unacked
    FROM {s}.executions e, clk
)
SELECT * FROM eff WHERE effective_unacked >= $1 ORDER BY effective_unacked DESC, id LIMIT $2
