SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, rowid, claim_due_at, CAST(id AS TEXT), deliveries, delivery_claimed_at FROM lease_executions
INDEXED BY lease_executions_claim_running
WHERE namespace = ?1 AND status = 'running' AND claimable_at <= ?2 AND claim_due_at <= ?2
  AND (-priority, claim_due_at, id) > (?4, ?5, ?6)
ORDER BY -priority, claim_due_at, id LIMIT ?3
