SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, admitted_seq
FROM lease_executions INDEXED BY lease_executions_by_key
WHERE namespace = ?1 AND concurrency_key = ?2 AND status = 'admitted'
UNION ALL
SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, admitted_seq
FROM lease_executions INDEXED BY lease_executions_by_key
WHERE namespace = ?1 AND concurrency_key = ?2 AND status = 'running'
UNION ALL
SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, admitted_seq
FROM lease_executions INDEXED BY lease_executions_by_key
WHERE namespace = ?1 AND concurrency_key = ?2 AND status = 'suspended'
ORDER BY admitted_seq
