SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy
FROM lease_executions
INDEXED BY lease_executions_running
WHERE namespace = ?1 AND status = 'running' AND lease_expires_at > ?2 AND corrupt IS NULL
ORDER BY lease_expires_at, id LIMIT ?3
