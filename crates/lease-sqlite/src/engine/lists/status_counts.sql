-- status_counts (the operator command's `status`): ?1 namespace, ?2 the backend clock
-- (ms) -> (effective status or 'corrupt', count), rows of one name to be summed. A running row whose lease has expired
-- (or has no expiry) counts as its delivery ended: dead if that expiry used its last
-- attempt, else suspended if a delivery was ever acknowledged as suspended, else admitted
-- (ExecutionRecord::effective). Quarantined rows and rows of an unknown status are
-- 'corrupt' (an unknown name counts as corrupt where it is summed).
--
-- Every part reads an index, never the table's rows in a scan: the stored statuses are
-- counted from `lease_executions_by_status` alone (a covering walk of one entry per row,
-- a fraction of reading every row), the quarantined rows through `lease_executions_corrupt`
-- and the running rows, whose effective status needs their columns, through
-- `lease_executions_running`. One statement in the caller's transaction (one snapshot).
WITH quarantined AS (
    SELECT status, count(*) AS n
    FROM lease_executions INDEXED BY lease_executions_corrupt
    WHERE namespace = ?1 AND corrupt IS NOT NULL
    GROUP BY status
)
SELECT s.status, s.n - COALESCE(q.n, 0)
FROM (SELECT status, count(*) AS n
      FROM lease_executions INDEXED BY lease_executions_by_status
      WHERE namespace = ?1
      GROUP BY status) s
LEFT JOIN quarantined q ON q.status = s.status
WHERE s.status <> 'running'
UNION ALL
SELECT 'corrupt', n FROM quarantined
UNION ALL
SELECT CASE
        WHEN lease_expires_at IS NULL OR lease_expires_at <= ?2
            THEN CASE
                WHEN attempt_limit IS NOT NULL AND unacknowledged + 1 >= attempt_limit
                    THEN 'dead'
                WHEN ever_suspended <> 0 THEN 'suspended'
                ELSE 'admitted'
            END
        ELSE 'running'
    END,
    count(*)
FROM lease_executions INDEXED BY lease_executions_running
WHERE namespace = ?1 AND status = 'running' AND corrupt IS NULL
GROUP BY 1
