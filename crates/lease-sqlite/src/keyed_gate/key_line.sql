SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy
FROM lease_executions
INDEXED BY lease_executions_key_line
WHERE namespace = ?1 AND concurrency_key = ?2
  AND status NOT IN ('completed', 'failed', 'cancelled', 'dead')
ORDER BY admitted_seq
