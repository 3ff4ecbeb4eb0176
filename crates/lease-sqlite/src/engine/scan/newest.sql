-- `$1 namespace, $2 before` -> the executions admitted strictly before place `$2`, newest
-- first (the columns rows.rs's read_raw reads), then each one's place.
SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, admitted_seq
FROM lease_executions WHERE namespace = ?1 AND admitted_seq < ?2
ORDER BY admitted_seq DESC
