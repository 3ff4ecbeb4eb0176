-- status_counts (the operator command's `status`): $1 clock (NULL: the database clock) ->
-- (effective status or 'corrupt', count). A running row whose lease has expired (or has no
-- expiry) counts as its delivery ended: suspended if a delivery was ever acknowledged as
-- suspended, else admitted (ExecutionRecord::effective), or dead when that delivery was its
-- last attempt (`{last_attempt}`, schema v15). Rows list_corrupt lists (not decodable) are
-- 'corrupt'. One statement, so one snapshot: an atomic read that blocks no writer. A full
-- scan: an operator's call, never on a hot path.
WITH clk AS MATERIALIZED (SELECT COALESCE($1::bigint, {now}) AS now)
SELECT CASE
        WHEN NOT {decodable} THEN 'corrupt'
        WHEN e.status = 'running' AND COALESCE(e.lease_expires_at <= clk.now, true)
            AND {last_attempt} THEN 'dead'
        WHEN e.status = 'running' AND COALESCE(e.lease_expires_at <= clk.now, true)
            THEN CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END
        ELSE e.status
    END AS effective,
    count(*)
FROM {s}.executions e, clk
GROUP BY effective
