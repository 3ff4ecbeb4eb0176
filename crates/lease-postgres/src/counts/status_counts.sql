-- status_counts (the operator command's `status`): $1 clock (NULL: the database clock) ->
-- (effective status or 'corrupt', count), rows of one name to be summed. A running row whose lease has expired (or has no
-- expiry) counts as its delivery ended: suspended if a delivery was ever acknowledged as
-- suspended, else admitted (ExecutionRecord::effective), or dead when that delivery was its
-- last attempt (`{last_attempt}`, schema v15). Rows list_corrupt lists (not decodable) are
-- 'corrupt'. One statement, so one snapshot: an atomic read that blocks no writer.
--
-- No part reads every row (schema v20): the stored statuses other than running are counted
-- one range of `executions_browse_status` each (index entries only, where the visibility
-- map says their pages hold no change in flight), the undecodable rows are found through
-- `executions_corrupt` (and subtracted from their stored status), and the running rows,
-- whose effective status needs their lease, through `executions_live`.
--
-- The last row is ('takeovers', the schema's takeover counter, schema v21), read in the same
-- snapshot: not a status (the caller sets `StatusCounts::takeovers` from it).
WITH clk AS MATERIALIZED (SELECT COALESCE($1::bigint, {now}) AS now),
corrupt AS MATERIALIZED (
    SELECT e.status, count(*) AS n
    FROM {s}.executions e
    WHERE NOT {decodable}
    GROUP BY e.status
)
SELECT st.status, c.n - COALESCE((SELECT q.n FROM corrupt q WHERE q.status = st.status), 0)
FROM unnest(ARRAY['admitted', 'suspended', 'completed', 'failed', 'cancelled',
                  'dead']::text[]) AS st(status)
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM {s}.executions e WHERE e.status COLLATE "C" = st.status
) c
UNION ALL
SELECT 'corrupt', COALESCE(sum(q.n), 0)::bigint FROM corrupt q
UNION ALL
SELECT CASE
        WHEN COALESCE(e.lease_expires_at <= clk.now, true) AND {last_attempt} THEN 'dead'
        WHEN COALESCE(e.lease_expires_at <= clk.now, true)
            THEN CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END
        ELSE 'running'
    END,
    count(*)
FROM {s}.executions e, clk
WHERE e.status = 'running' AND {decodable}
GROUP BY 1
UNION ALL
SELECT 'takeovers', COALESCE((SELECT t.total FROM {s}.takeovers t), 0)
