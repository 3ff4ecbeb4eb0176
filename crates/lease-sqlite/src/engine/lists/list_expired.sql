SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy
FROM lease_executions
WHERE namespace = ?1 AND status = 'running' AND unacknowledged + 1 >= ?2
  AND (lease_expires_at IS NULL OR lease_expires_at <= ?3) AND corrupt IS NULL
