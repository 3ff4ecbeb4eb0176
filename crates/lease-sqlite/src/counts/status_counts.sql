-- status_counts (the operator command's `status`): ?1 namespace, ?2 the backend clock (ms)
-- -> (effective status or 'corrupt', count). A running row whose lease has expired (or has
-- no expiry) counts as its delivery ended: dead if that expiry used its last attempt, else
-- suspended if a delivery was ever acknowledged as suspended, else admitted
-- (ExecutionRecord::effective). Quarantined rows and rows of an unknown status are
-- 'corrupt'. One read of the namespace's rows in the caller's transaction (one snapshot).
SELECT CASE
        WHEN corrupt IS NOT NULL
            OR status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed',
                'cancelled', 'dead')
            THEN 'corrupt'
        WHEN status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= ?2)
            THEN CASE
                WHEN attempt_limit IS NOT NULL AND unacknowledged + 1 >= attempt_limit
                    THEN 'dead'
                WHEN ever_suspended <> 0 THEN 'suspended'
                ELSE 'admitted'
            END
        ELSE status
    END AS effective,
    count(*)
FROM lease_executions
WHERE namespace = ?1
GROUP BY effective
