-- `$1 namespace` -> every execution (the columns rows.rs's read_raw reads), then its place
-- in admission order.
SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, admitted_seq
FROM lease_executions WHERE namespace = ?1
