-- list_dead: ?1 namespace, ?2 after (id, '' for the start), ?3 now, ?4 limit -> rows read as
-- dead by `get`: stored dead ones (lease_executions_dead) and running ones whose lease
-- expired on their last attempt, by id.
SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy
FROM lease_executions
WHERE namespace = ?1 AND id > ?2 AND corrupt IS NULL
    AND (status = 'dead'
        OR (status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= ?3) AND attempt_limit IS NOT NULL
            AND unacknowledged + 1 >= attempt_limit))
ORDER BY id
LIMIT ?4
